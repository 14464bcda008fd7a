package tgfake

import (
	"time"
)

// maxPollTimeout is the Bot API's cap on getUpdates' timeout, in seconds.
const maxPollTimeout = 50

// pollWaiter is a getUpdates call held open waiting for updates.
type pollWaiter struct {
	conflict chan struct{} // closed when a newer long poll replaces this one
}

// pushUpdateLocked queues an update for the bot and wakes a held long poll.
func (s *Server) pushUpdateLocked(u Update) {
	u.UpdateID = s.nextUpdateID
	s.nextUpdateID++
	s.updates = append(s.updates, u)
	s.hub.NotifyLocked()
}

// confirmLocked applies getUpdates' offset semantics: a positive offset
// forgets every update with a smaller id; a negative one keeps only the last
// -offset updates.
func (s *Server) confirmLocked(offset int) {
	switch {
	case offset > 0:
		i := 0
		for i < len(s.updates) && s.updates[i].UpdateID < offset {
			i++
		}
		s.updates = s.updates[i:]
	case offset < 0:
		if keep := -offset; keep < len(s.updates) {
			s.updates = s.updates[len(s.updates)-keep:]
		}
	}
}

func (s *Server) takeLocked(limit int) []Update {
	if len(s.pollAllowed) > 0 {
		keep := s.updates[:0]
		for _, u := range s.updates {
			if s.pollAllowed[updateKind(u)] {
				keep = append(keep, u)
			} // else dropped, as Telegram drops what the bot did not ask for
		}
		s.updates = keep
	}
	n := min(limit, len(s.updates))
	return append([]Update{}, s.updates[:n]...)
}

// getUpdates implements long polling: it answers at once when updates are
// pending or timeout is 0; otherwise it holds the request until an update
// arrives (woken through s.hub, not by polling), the timeout passes, a
// newer getUpdates replaces it (409, as in Telegram), the client goes away
// or the server closes.
func getUpdates(s *Server, r *request) (any, *APIError) {
	offset := r.intArg("offset", 0, -1<<31, 1<<31-1)
	limit := r.intArg("limit", 100, 1, 100)
	timeout := r.intArg("timeout", 0, 0, maxPollTimeout)
	allowed, apiErr := allowedUpdates(r)
	if apiErr != nil {
		return nil, apiErr
	}

	s.mu.Lock()
	if r.has("allowed_updates") {
		s.pollAllowed = allowed // kept until a call names them again
	}
	if s.hook != nil {
		s.mu.Unlock()
		return nil, errDesc(409, DescWebhookActive)
	}
	s.confirmLocked(offset)
	if ups := s.takeLocked(limit); len(ups) > 0 || timeout == 0 {
		s.mu.Unlock()
		return ups, nil
	}
	// Like the Bot API server, only a call that is about to wait
	// terminates the one already waiting.
	if s.poll != nil {
		close(s.poll.conflict)
	}
	me := &pollWaiter{conflict: make(chan struct{})}
	s.poll = me
	s.hub.NotifyLocked() // observers (tests) may wait for the bot to be polling
	s.mu.Unlock()

	deadline := time.NewTimer(time.Duration(timeout) * time.Second)
	defer deadline.Stop()
	release := func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.poll == me {
			s.poll = nil
		}
	}
	for {
		s.mu.Lock()
		ups := s.takeLocked(limit)
		wake := s.hub.ChangedLocked()
		s.mu.Unlock()
		if len(ups) > 0 {
			release()
			return ups, nil
		}
		select {
		case <-wake:
		case <-me.conflict:
			return nil, errDesc(409, DescConflict)
		case <-deadline.C:
			release()
			return []Update{}, nil
		case <-r.ctx.Done():
			release()
			return []Update{}, nil
		case <-s.hub.Closing():
			release()
			return []Update{}, nil
		}
	}
}
