package dispatch

import (
	"switchboard/domain"
)

// story collects what a state change tells people while the repository
// renders it inside the change's transaction (its Render), and the events to
// log as JSON once the change committed.
type story struct {
	s      *Service
	events []Event
	msgs   []domain.Message
}

func (s *Service) newStory() *story { return &story{s: s} }

// event adds a line of the live log.
func (st *story) event(e Event) {
	if e.At.IsZero() {
		e.At = st.s.deps.Clock.Now()
	}
	st.events = append(st.events, e)
	st.msgs = append(st.msgs, st.s.deps.Notifier.Event(e)...)
}

// note adds a message to a master.
func (st *story) note(n Note) {
	st.msgs = append(st.msgs, st.s.deps.Notifier.Note(n)...)
}

// offer adds a new offer's message.
func (st *story) offer(m Master, o Order, f Offer) {
	st.msgs = append(st.msgs, st.s.deps.Notifier.Offer(m, o, f)...)
}

// closed adds the edit of an ended offer's message. The edit names the
// message by its key, so it finds it even when the offer was still waiting
// in the outbox as it ended (a chat's rows go out in order).
func (st *story) closed(m Master, o Order, f Offer) {
	if m.UserID != 0 {
		st.msgs = append(st.msgs, st.s.deps.Notifier.Closed(m, o, f)...)
	}
}

// assigned adds the edit of the assigned master's message.
func (st *story) assigned(a Assignment) {
	if a.Master.UserID != 0 {
		st.msgs = append(st.msgs, st.s.deps.Notifier.Assigned(a)...)
	}
}

// photo adds a photo of the finished work for the admins.
func (st *story) photo(m Master, o Order, fileID, caption string) {
	st.msgs = append(st.msgs, st.s.deps.Notifier.Photo(m, o, fileID, caption)...)
}

// tell is the Render for a repository call: fill renders the story from
// what the change changed. A Render may run more than once if the caller
// retries, so each run starts afresh.
func (st *story) tell(fill func(Changed)) domain.Render[Changed] {
	return func(c Changed) []domain.Message {
		st.events, st.msgs = nil, nil
		fill(c)
		return st.msgs
	}
}

// contain tells one item's part of the story with fn, keeping a panic in
// it to that item (where and id name it): what fn added is left out, and
// the change commits without it. An expired offer whose closing edit
// cannot be rendered keeps its buttons, whose press is refused as the
// offer is closed.
func (st *story) contain(where string, id int64, fn func()) {
	msgs, events := len(st.msgs), len(st.events)
	if st.s.m.panics.Contain(st.s.log, where, id, fn) != nil {
		st.msgs, st.events = st.msgs[:msgs], st.events[:events]
	}
}

// offerEvents is the Render of a master's offer changing (pressed, or
// taken back undelivered): the events kinds, each naming the offer, its
// order and the master.
func (st *story) offerEvents(masterID int64, kinds ...EventKind) domain.Render[Changed] {
	return st.offerEventsTelling(masterID, "", kinds...)
}

// offerEventsTelling is offerEvents that also tells the order's customer
// note (an acceptance: their master is found).
func (st *story) offerEventsTelling(masterID int64, note CustomerNote, kinds ...EventKind) domain.Render[Changed] {
	return st.tell(func(c Changed) {
		m, _ := masterOf(c, masterID)
		f := c.Offers[0]
		for _, k := range kinds {
			st.event(Event{Kind: k, OrderID: f.OrderID, OfferID: f.ID, MasterID: masterID, Master: known(m)})
		}
		if note != "" && c.Order.ID == f.OrderID {
			st.customer(c, note)
		}
	})
}

// logged writes the story's events to the JSON log: call it once the
// change committed.
func (st *story) logged() {
	for _, e := range st.events {
		st.s.log.Info("dispatch_event", "event", string(e.Kind), "order", e.OrderID, "offer", e.OfferID, "master", e.MasterID)
	}
}

// orderMoved ends a change of an order's state told through st, from the
// statement's result: its error as it is; ErrOrderState, with the order as
// the statement found it, where the order was no longer in the state the
// change needs; else the order, the story's events logged. Cancel, /done
// and the assigned master's steps end so.
func (st *story) orderMoved(o Order, ok bool, err error) (Order, error) {
	if err != nil {
		return Order{}, err
	}
	if !ok {
		return o, ErrOrderState
	}
	st.logged()
	return o, nil
}

// orderOf is c's order with that id, or an order known only by id.
func orderOf(c Changed, id int64) Order {
	if c.Order.ID == id {
		return c.Order
	}
	if o, ok := c.Orders[id]; ok {
		return o
	}
	return Order{ID: id}
}

// masterOf is c's master with that id, or a master known only by id.
func masterOf(c Changed, id int64) (Master, bool) {
	m, ok := c.Masters[id]
	return m, ok
}
