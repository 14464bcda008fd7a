package dispatch

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"regexp"
	"time"
)

// The customer: the person an order's work is for. An admin forwards them
// the order's link (t.me/<bot>?start=o_<token>); the first Telegram user
// to open it becomes the order's customer, and from then on each change of
// the order is told to them (one status message edited, a short note
// where a change needs their attention). A master never learns the
// customer's Telegram identity, nor the customer the master's: each sees
// the other's first name only.

// Customer is an order's customer as their messages are written.
type Customer struct {
	UserID    int64
	FirstName string
	Lang      string
	Zone      string // IANA name; "" for the city's
}

// CustomerNote names what a change tells the customer beside the edit of
// their status message ("" only the edit).
type CustomerNote string

// Notes to the customer.
const (
	CustomerJoined    CustomerNote = "joined"    // the status message, sent anew
	CustomerAssigned  CustomerNote = "assigned"  // a master took the order
	CustomerEnRoute   CustomerNote = "en_route"  // the master is on the way, with the ETA
	CustomerArrived   CustomerNote = "arrived"   // the master is there
	CustomerDone      CustomerNote = "done"      // the work is done: confirm and rate
	CustomerCancelled CustomerNote = "cancelled" // cancelled by the admins
	CustomerWithdrawn CustomerNote = "withdrawn" // cancelled by the customer
	CustomerReturned  CustomerNote = "returned"  // the master gave it back: another is sought
	CustomerRevoked   CustomerNote = "revoked"   // the admins reissued the link: no longer theirs
	CustomerRated     CustomerNote = "rated"     // their rating is recorded
	CustomerPhoto     CustomerNote = "photo"     // the master's photo of the finished work
	CustomerLate      CustomerNote = "late"      // the visit window ended before the master arrived
)

// CustomerUpdate is one change as the customer reads it.
type CustomerUpdate struct {
	Customer Customer
	Order    Order
	// MasterName is the assigned master's first name ("" while none).
	MasterName string
	Note       CustomerNote
	// Rating is the order's rating, once given (0: none).
	Rating int
	// Photo is the Telegram file id of the work's photo (CustomerPhoto).
	Photo string
}

// ETAs a master may give with On my way.
var ETAs = []time.Duration{15 * time.Minute, 30 * time.Minute, time.Hour}

// ValidETA reports whether d is one of ETAs.
func ValidETA(d time.Duration) bool {
	for _, e := range ETAs {
		if d == e {
			return true
		}
	}
	return false
}

// Errors of the customer's link.
var (
	// ErrLinkInvalid: no order has that link (reissued, or mistyped).
	ErrLinkInvalid = errors.New("no order has this link")
	// ErrLinkTaken: another person opened the link first.
	ErrLinkTaken = errors.New("the order's link was opened by someone else")
	// ErrNotCustomer: the user is not the order's customer.
	ErrNotCustomer = errors.New("not the order's customer")
)

// tokenRx is a link token as NewCustomerToken makes it (and Telegram's
// start parameter allows: A-Z, a-z, 0-9, _ and -).
var tokenRx = regexp.MustCompile(`^[A-Za-z0-9_-]{22}$`)

// NewCustomerToken is an order link's token: 128 random bits, base64url.
func NewCustomerToken() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("order link token: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// LinkPayload is the start parameter of an order's link; OrderToken reads
// it back.
func LinkPayload(token string) string { return "o_" + token }

// OrderToken is the token of a start parameter that is an order's link.
func OrderToken(payload string) (string, bool) {
	if len(payload) < 2 || payload[:2] != "o_" || !tokenRx.MatchString(payload[2:]) {
		return "", false
	}
	return payload[2:], true
}

// JoinOrder makes the user the customer of the order whose link they
// opened, and sends them its status. Opening it again shows it again.
// ErrLinkInvalid, ErrLinkTaken.
func (s *Service) JoinOrder(ctx context.Context, userID int64, token string) (Order, error) {
	st := s.newStory()
	o, err := s.deps.Orders.Join(ctx, token, userID, st.tell(func(c Changed) {
		st.event(Event{Kind: EventCustomerJoined, OrderID: c.Order.ID, MasterID: c.Order.MasterID})
		st.customer(c, CustomerJoined)
	}))
	if err != nil {
		return o, err
	}
	st.logged()
	return o, nil
}

// ReissueLink is the admin's Reissue: the order gets a new link and the
// old one opens nothing; a customer who opened the old one is no longer
// the order's (and is told).
func (s *Service) ReissueLink(ctx context.Context, orderID int64) (Order, error) {
	token, err := NewCustomerToken()
	if err != nil {
		return Order{}, err
	}
	st := s.newStory()
	o, err := s.deps.Orders.Reissue(ctx, orderID, token, st.tell(func(c Changed) {
		if c.Customer != nil {
			st.event(Event{Kind: EventLinkReissued, OrderID: c.Order.ID})
			st.customer(c, CustomerRevoked)
		}
	}))
	if err != nil {
		return o, err
	}
	st.logged()
	return o, nil
}

// CustomerCancel is the customer's Cancel, until the master is on the
// way: as /cancel, and the master and the admins are told. ErrNotCustomer;
// ErrOrderState (with the order as it is) once it is too late.
func (s *Service) CustomerCancel(ctx context.Context, orderID, userID int64) (Order, error) {
	return s.cancel(ctx, orderID, userID)
}


// customerPhoto passes the work's photo on to c's order's customer.
func (st *story) customerPhoto(c Changed, fileID string) {
	if c.Customer == nil || c.Customer.UserID == 0 {
		return
	}
	u := CustomerUpdate{Customer: *c.Customer, Order: c.Order, Note: CustomerPhoto, Photo: fileID}
	if m, ok := masterOf(c, c.Order.MasterID); ok {
		u.MasterName = m.Name
	}
	st.msgs = append(st.msgs, st.s.deps.Notifier.Customer(u)...)
}

// customer adds the customer's edit and note about c's order, if it has a
// customer.
func (st *story) customer(c Changed, note CustomerNote) {
	if c.Customer == nil || c.Customer.UserID == 0 {
		return
	}
	u := CustomerUpdate{Customer: *c.Customer, Order: c.Order, Note: note}
	if m, ok := masterOf(c, c.Order.MasterID); ok {
		u.MasterName = m.Name
	}
	if c.Rating != nil {
		u.Rating = c.Rating.Stars
	}
	st.msgs = append(st.msgs, st.s.deps.Notifier.Customer(u)...)
}

// CustomerOrder is the order for its customer's buttons: ErrNotCustomer
// for anyone else (domain.ErrNotFound for no order).
func (s *Service) CustomerOrder(ctx context.Context, orderID, userID int64) (Order, error) {
	o, err := s.deps.Orders.Get(ctx, orderID)
	if err != nil {
		return Order{}, err
	}
	if o.CustomerID == 0 || o.CustomerID != userID {
		return Order{}, fmt.Errorf("order %d: %w", orderID, ErrNotCustomer)
	}
	return o, nil
}

// Cancellable reports whether the customer may still cancel o: until the
// master is on the way.
func (o Order) Cancellable() bool {
	return (o.State == Searching || o.State == Assigned) && o.EnRouteAt.IsZero() && o.ArrivedAt.IsZero()
}
