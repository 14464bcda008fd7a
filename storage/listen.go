package storage

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// Listen calls onNotify for every notification on channels, and onConnect
// after every (re)connect once LISTEN on them is in place, until ctx ends;
// it returns only then, with no callback running. NOTIFY is only a hint: it
// is lost while nobody listens, so onConnect is where the caller sweeps its
// table.
//
// Every Listen on a Store shares one connection of its own (outside the
// pool, which would hand a LISTENing connection to other work): a replica
// listens on one channel per workflow, and a connection for each cost five
// of the server's slots per replica where one does. The callbacks run in the
// caller's goroutine, so a slow one holds up its own channels only. A lost
// connection is retried with backoff up to 30 s.
func (s *Store) Listen(ctx context.Context, channels []string, onConnect func(), onNotify func(channel, payload string)) {
	s.listenOnce.Do(func() { s.hub = &listenHub{db: s.db, subs: map[*listener]struct{}{}, added: make(chan struct{}, 1)} })
	l := &listener{channels: channels, wake: make(chan struct{}, 1)}
	s.hub.add(l)
	defer s.hub.remove(l)
	for {
		select {
		case <-ctx.Done():
			return
		case <-l.wake:
		}
		l.mu.Lock()
		queue := l.queue
		l.queue = nil
		l.mu.Unlock()
		for _, n := range queue {
			if ctx.Err() != nil {
				return
			}
			if n.connected {
				if onConnect != nil {
					onConnect()
				}
				continue
			}
			onNotify(n.channel, n.payload)
		}
	}
}

// listener is one Listen call: its channels and what has come for it.
type listener struct {
	channels []string
	wake     chan struct{} // cap 1: queue has something
	mu       sync.Mutex
	queue    []notice
}

// notice is a notification, or (connected) the news that LISTEN is in place.
type notice struct {
	connected        bool
	channel, payload string
}

func (l *listener) push(n notice) {
	l.mu.Lock()
	l.queue = append(l.queue, n)
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// listenHub holds the shared connection while any Listen is running.
type listenHub struct {
	*db
	mu        sync.Mutex
	subs      map[*listener]struct{}
	listening map[string]bool // the connection's channels while it is up
	sessions  int             // sessions so far; the last set listening
	added     chan struct{}   // cap 1: a listener came whose channels it lacks
	stop      context.CancelFunc
	done      chan struct{}
}

func (h *listenHub) add(l *listener) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.subs[l] = struct{}{}
	if h.stop == nil {
		ctx, cancel := context.WithCancel(context.Background())
		h.stop, h.done = cancel, make(chan struct{})
		go h.run(ctx, h.done)
	}
	for _, ch := range l.channels {
		if !h.listening[ch] {
			select {
			case h.added <- struct{}{}:
			default:
			}
			return
		}
	}
	if h.listening != nil {
		l.push(notice{connected: true})
	}
}

// remove drops l; the last one out closes the connection and waits for it,
// so that nothing of the Store's outlives the Listens on it.
func (h *listenHub) remove(l *listener) {
	h.mu.Lock()
	delete(h.subs, l)
	if len(h.subs) > 0 || h.stop == nil {
		h.mu.Unlock()
		return
	}
	stop, done := h.stop, h.done
	h.stop, h.done = nil, nil
	h.mu.Unlock()
	stop()
	<-done
}

// settle lets the listeners a replica starts together arrive before the
// hub (re)connects for them, so start-up LISTENs once, not once a workflow.
const settle = 20 * time.Millisecond

func (h *listenHub) run(ctx context.Context, done chan struct{}) {
	defer close(done)
	const maxBackoff = 30 * time.Second
	backoff := 250 * time.Millisecond
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(settle):
		}
		up, err := h.session(ctx)
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			continue // a listener with new channels: listen again with them
		}
		if up {
			backoff = 250 * time.Millisecond
		}
		h.log.Warn("listen connection lost, reconnecting", "channels", h.channels(), "err", err, "in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, maxBackoff)
	}
}

// channels is every channel some listener wants, once each.
func (h *listenHub) channels() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	seen := map[string]bool{}
	for l := range h.subs {
		for _, ch := range l.channels {
			if !seen[ch] {
				seen[ch] = true
				out = append(out, ch)
			}
		}
	}
	return out
}

// session connects, listens on every wanted channel and hands out
// notifications until the connection fails (err) or a listener comes with
// a channel it lacks (nil). up says LISTEN was in place.
func (h *listenHub) session(ctx context.Context) (up bool, err error) {
	select { // what the channels read below include needs no new session
	case <-h.added:
	default:
	}
	channels := h.channels()
	conn, err := pgx.ConnectConfig(ctx, h.pool.Config().ConnConfig.Copy())
	if err != nil {
		return false, fmt.Errorf("connect: %w", err)
	}
	var session int
	defer func() {
		h.mu.Lock()
		if h.sessions == session { // not a newer session's, after a remove and add
			h.listening = nil
		}
		h.mu.Unlock()
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	for _, ch := range channels {
		if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{ch}.Sanitize()); err != nil {
			return false, fmt.Errorf("listen %s: %w", ch, err)
		}
	}
	session = h.connected(channels)

	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-h.added:
			cancel()
		case <-wctx.Done():
		}
	}()
	for {
		n, err := conn.WaitForNotification(wctx)
		if err != nil {
			if ctx.Err() == nil && wctx.Err() != nil {
				return true, nil
			}
			return true, err
		}
		h.deliver(n.Channel, n.Payload)
	}
}

// connected records the channels in place and tells every listener they
// cover; one they do not cover has asked for a new session (add).
func (h *listenHub) connected(channels []string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.sessions++
	h.listening = make(map[string]bool, len(channels))
	for _, ch := range channels {
		h.listening[ch] = true
	}
next:
	for l := range h.subs {
		for _, ch := range l.channels {
			if !h.listening[ch] {
				continue next
			}
		}
		l.push(notice{connected: true})
	}
	return h.sessions
}

func (h *listenHub) deliver(channel, payload string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for l := range h.subs {
		for _, ch := range l.channels {
			if ch == channel {
				l.push(notice{channel: channel, payload: payload})
				break
			}
		}
	}
}
