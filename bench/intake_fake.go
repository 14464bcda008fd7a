package main

import (
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// tgUpdates is the fake Telegram's update queue for getUpdates
// (withUpdates): the bench offers updates, a long poll returns those from
// its offset on (up to limit, default 100), waiting up to its timeout
// when there are none, and forgets those below the offset, as Telegram
// does once they are acknowledged. offered hears when each update was
// first returned.
type tgUpdates struct {
	mu      sync.Mutex
	queue   []tgQueued // ascending ids
	arrived chan struct{}
	offered func(id int64, at time.Time)
	polls   int
}

type tgQueued struct {
	id       int64
	body     json.RawMessage
	returned bool
}

// withUpdates makes the fake serve getUpdates from the queue the bench
// fills with offerUpdate; offered is called when an update is first
// returned.
func withUpdates(offered func(id int64, at time.Time)) tgOption {
	return func(t *telegram) {
		t.updates = &tgUpdates{arrived: make(chan struct{}), offered: offered}
	}
}

// offerUpdate queues an update for getUpdates (ids must ascend).
func (t *telegram) offerUpdate(id int64, body json.RawMessage) {
	q := t.updates
	q.mu.Lock()
	q.queue = append(q.queue, tgQueued{id: id, body: body})
	close(q.arrived)
	q.arrived = make(chan struct{})
	q.mu.Unlock()
}

func (q *tgUpdates) getUpdates(w http.ResponseWriter, p map[string]string) {
	offset, _ := strconv.ParseInt(p["offset"], 10, 64)
	timeout, _ := strconv.Atoi(p["timeout"])
	limit, err := strconv.Atoi(p["limit"])
	if err != nil || limit <= 0 || limit > 100 {
		limit = 100
	}
	deadline := time.After(time.Duration(timeout) * time.Second)
	for {
		q.mu.Lock()
		q.polls++
		drop := 0
		for drop < len(q.queue) && q.queue[drop].id < offset {
			drop++
		}
		q.queue = q.queue[drop:]
		if n := min(limit, len(q.queue)); n > 0 || timeout <= 0 {
			now := time.Now()
			out := make([]json.RawMessage, n)
			for i := range n {
				out[i] = q.queue[i].body
				if !q.queue[i].returned {
					q.queue[i].returned = true
					q.offered(q.queue[i].id, now)
				}
			}
			q.mu.Unlock()
			writeTG(w, http.StatusOK, map[string]any{"ok": true, "result": out})
			return
		}
		arrived := q.arrived
		q.mu.Unlock()
		select {
		case <-arrived:
		case <-deadline:
			timeout = 0
		}
	}
}
