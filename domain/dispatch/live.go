package dispatch

import (
	"context"
	"errors"
	"fmt"

	"switchboard/domain"
)

// The master's whereabouts: a master on the way to an order may share
// their location with the bot, and the order's customer sees it — a live
// location moved as the master moves, stopped when the master arrives (or
// the order leaves them: done, cancelled, given back, its link reissued),
// or a still point. Only the position passes: nothing of the master's
// Telegram identity.

// Where is a location the master shared, as it reaches the customer
// (CustomerWhere).
type Where struct {
	Location domain.Location
	// Share is the master's message that shares it, Edit the date of the
	// edit that moved it (0: the share itself): with the position they
	// name one update, relayed once however often it runs (two moves
	// within a second share an edit date, not a position).
	Share int
	Edit  int64
	// Started: the share itself (a new live location or a still point),
	// which the customer is told of in words beside the map.
	Started bool
}

// Origin names the position for the outbox, which writes it once.
func (w Where) Origin(orderID, customerID int64) string {
	l := w.Location
	return fmt.Sprintf("where:%d:%d:%d:%d:%g,%g:%t", orderID, customerID, w.Share, w.Edit, l.Lat, l.Lon, l.Stop)
}

// ErrNotOnTheWay: the master is on the way to no order with a customer
// (not on the way yet, or arrived), so a location they share goes to
// nobody.
var ErrNotOnTheWay = errors.New("not on the way to an order with a customer")

// ShareLocation relays a location masterID shared to the customer of the
// order they are on the way to (On my way pressed, Arrived not yet): a
// live location the customer sees move, or stopped where it is
// (w.Location.Stop: the master stopped sharing). With more than one such
// order, the one the master set off to last. The first position of a share
// the customer has not seen starts it (Where.Started), whichever update of
// the share it is. ErrNotOnTheWay when there is none.
func (s *Service) ShareLocation(ctx context.Context, masterID int64, w Where) (Order, error) {
	st := s.newStory()
	o, ok, err := s.deps.Orders.OnTheWay(ctx, masterID, w.Share, st.tell(func(c Changed) {
		if c.Shared != w.Share && !w.Location.Stop {
			// A share the customer has not seen (begun before On my way,
			// when it went to nobody) starts with its first move here:
			// words and the map, not a map out of nowhere.
			w.Started = true
		}
		st.whereabouts(c, w)
	}))
	switch {
	case err != nil:
		return o, fmt.Errorf("share the location of master %d: %w", masterID, err)
	case !ok:
		return o, ErrNotOnTheWay
	}
	return o, nil
}

// whereabouts passes w on to c's order's customer.
func (st *story) whereabouts(c Changed, w Where) {
	st.tellCustomer(c, CustomerWhere, func(u *CustomerUpdate) { u.Where = &w })
}

// EndsWhereabouts reports whether u ends what the customer sees of the
// master's location: the master is there, or the order is no longer
// theirs to come to while they were on the way. (A give-back clears the
// order's steps, so it always ends them.)
func (u CustomerUpdate) EndsWhereabouts() bool {
	o := u.Order
	switch u.Note {
	case CustomerArrived, CustomerReturned:
		return true
	case CustomerDone, CustomerCancelled, CustomerRevoked:
		return !o.EnRouteAt.IsZero() && o.ArrivedAt.IsZero()
	}
	return false
}
