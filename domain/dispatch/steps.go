package dispatch

import (
	"context"
	"fmt"
	"time"

	"switchboard/domain"
)

// The assigned master's buttons. Each carries the master's accepted offer
// (its message is the one they press on); who may press is decided here and
// again by the statement, which names the order's master and its state, so
// a foreign, repeated or late press changes nothing.

// accepted returns the master's accepted offer: domain.ErrNotFound if there
// is none such (an unknown id, or an offer that was never accepted: not a
// button the bot made), ErrForbidden if it is another master's.
func (s *Service) accepted(ctx context.Context, offerID, masterID int64) (Offer, error) {
	f, err := s.deps.Orders.Offer(ctx, offerID)
	if err != nil {
		return Offer{}, err
	}
	if f.MasterID != masterID {
		return Offer{}, ErrForbidden
	}
	if f.State != Accepted {
		return Offer{}, fmt.Errorf("offer %d is %s: %w", f.ID, f.State, domain.ErrNotFound)
	}
	return f, nil
}

// Assigned is the order of the master's accepted offer, for their message's
// buttons that change nothing (the confirmation of Done or Can't do it, and
// Back from it), authorized like the steps: domain.ErrNotFound and
// ErrForbidden as accepted; ErrOrderState, with the order as it is, when it
// is no longer assigned to them (done, cancelled, given back).
func (s *Service) Assigned(ctx context.Context, offerID, masterID int64) (Order, error) {
	f, err := s.accepted(ctx, offerID, masterID)
	if err != nil {
		return Order{}, err
	}
	o, err := s.deps.Orders.Get(ctx, f.OrderID)
	if err != nil {
		return Order{}, err
	}
	if o.State != Assigned || o.MasterID != masterID {
		return o, ErrOrderState
	}
	return o, nil
}

// Step is the assigned master's On my way (StepEnRoute) or Arrived
// (StepArrived) button: the mark is set on the order, their message shows
// it and the live log says so. ErrOrderState, with the order as it is, when
// the order is no longer assigned to them or the step is done already.
func (s *Service) Step(ctx context.Context, offerID, masterID int64, step Step) (Order, error) {
	return s.StepWithETA(ctx, offerID, masterID, step, 0)
}

// StepWithETA is Step; with On my way, eta (one of ETAs, or 0 for none)
// is when the master expects to arrive, which the customer is told.
func (s *Service) StepWithETA(ctx context.Context, offerID, masterID int64, step Step, eta time.Duration) (Order, error) {
	kind := map[Step]EventKind{StepEnRoute: EventMasterEnRoute, StepArrived: EventMasterArrived}[step]
	if kind == "" {
		return Order{}, fmt.Errorf("dispatch: unknown step %q", step)
	}
	if eta != 0 && (step != StepEnRoute || !ValidETA(eta)) {
		return Order{}, fmt.Errorf("dispatch: ETA %s with step %q", eta, step)
	}
	note := map[Step]CustomerNote{StepEnRoute: CustomerEnRoute, StepArrived: CustomerArrived}[step]
	return s.masterChangeTelling(ctx, offerID, masterID, kind, note, func(orderID int64, tell domain.Render[Changed]) (Order, bool, error) {
		if step == StepEnRoute {
			return s.deps.Orders.EnRoute(ctx, orderID, masterID, eta, tell)
		}
		return s.deps.Orders.MarkStep(ctx, orderID, masterID, step, tell)
	})
}

// masterChange makes a change the assigned master asks for from their
// offer's buttons: write changes the order in one statement, the admins are
// told kind and the master's message shows the assignment as it now is.
// ErrOrderState, with the order as it is, when it is no longer assigned to
// them.
func (s *Service) masterChange(ctx context.Context, offerID, masterID int64, kind EventKind,
	write func(orderID int64, tell domain.Render[Changed]) (Order, bool, error)) (Order, error) {
	return s.masterChangeTelling(ctx, offerID, masterID, kind, "", write)
}

// masterChangeTelling is masterChange that tells the order's customer
// note.
func (s *Service) masterChangeTelling(ctx context.Context, offerID, masterID int64, kind EventKind, note CustomerNote,
	write func(orderID int64, tell domain.Render[Changed]) (Order, bool, error)) (Order, error) {
	f, err := s.accepted(ctx, offerID, masterID)
	if err != nil {
		return Order{}, err
	}
	st := s.newStory()
	o, ok, err := write(f.OrderID, st.tell(func(c Changed) {
		m, _ := masterOf(c, masterID)
		st.event(Event{Kind: kind, OrderID: c.Order.ID, OfferID: f.ID, MasterID: masterID, Master: known(m)})
		if c.Assigned != nil {
			st.assigned(s.assignment(m, c.Order, *c.Assigned, true))
		}
		if note != "" {
			st.customer(c, note)
		}
	}))
	return st.orderMoved(o, ok, err)
}

// Finish is the assigned master's Done button: ASSIGNED → DONE exactly as
// /done (the same statement and commission), their message shows the
// commission due and invites a photo of the work. ErrOrderState, with the
// order as it is, when it is no longer assigned to them.
func (s *Service) Finish(ctx context.Context, offerID, masterID int64) (Order, error) {
	f, err := s.accepted(ctx, offerID, masterID)
	if err != nil {
		return Order{}, err
	}
	o, _, err := s.complete(ctx, f.OrderID, masterID)
	return o, err
}

// GiveBack is the assigned master's Can't do it button: ASSIGNED →
// SEARCHING in one statement, their message loses the address and contact,
// the admins are told, and the order is offered on at once. The master who
// gave it back is never offered it again (their accepted offer stays, and
// distribution passes over masters holding one). ErrOrderState, with the
// order as it is, when it is no longer assigned to them.
func (s *Service) GiveBack(ctx context.Context, offerID, masterID int64) (Order, error) {
	if err := checkOrder(Assigned, Searching); err != nil {
		return Order{}, err
	}
	o, err := s.masterChangeTelling(ctx, offerID, masterID, EventOrderReturned, CustomerReturned, func(orderID int64, tell domain.Render[Changed]) (Order, bool, error) {
		return s.deps.Orders.Return(ctx, orderID, masterID, tell)
	})
	if err != nil {
		return o, err
	}
	s.m.orders.WithLabelValues(string(Searching)).Inc()
	s.distributeOrder(ctx, o.ID)
	return o, nil
}

// Photo passes a photo of the finished work (a Telegram file id, with the
// master's caption) to the admins: it belongs to the master's order done
// latest within PhotoWindow. ErrNotMaster for a user who is none;
// ErrNoDoneOrder when no order was done within the window; ErrPhotoLimit
// (with the order) when it has MaxPhotos already. The photo's message
// (messageID) handled again after a crash is counted and forwarded once.
func (s *Service) Photo(ctx context.Context, masterID int64, messageID int, fileID, caption string) (Order, error) {
	if _, err := s.master(ctx, masterID); err != nil {
		return Order{}, err
	}
	st := s.newStory()
	o, ok, err := s.deps.Orders.RecordPhoto(ctx, masterID, messageID, PhotoWindow, MaxPhotos, st.tell(func(c Changed) {
		m, _ := masterOf(c, masterID)
		st.photo(m, c.Order, fileID, caption)
		st.customerPhoto(c, fileID)
	}))
	switch {
	case err != nil:
		return Order{}, err
	case !ok && o.ID == 0:
		return Order{}, ErrNoDoneOrder
	case !ok:
		return o, ErrPhotoLimit
	}
	return o, nil
}
