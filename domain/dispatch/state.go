package dispatch

import (
	"errors"

	"switchboard/domain"
)

// OrderState is where an order is.
type OrderState string

// Order states (docs/ARCHITECTURE.md "Dispatch").
const (
	Searching OrderState = "SEARCHING"
	Assigned  OrderState = "ASSIGNED"
	Done      OrderState = "DONE"
	Closed    OrderState = "CLOSED"
	Cancelled OrderState = "CANCELLED"
)

// OrderStates lists every order state in workflow order.
var OrderStates = []OrderState{Searching, Assigned, Done, Closed, Cancelled}

// OfferState is where an offer to one master is.
type OfferState string

// Offer states. Withdrawn is ours: the order was cancelled while the offer
// was open, or its master was blocked for commission (WithdrawnByBlock
// tells which).
const (
	Sent      OfferState = "SENT"
	Viewed    OfferState = "VIEWED"
	Accepted  OfferState = "ACCEPTED"
	Declined  OfferState = "DECLINED"
	Expired   OfferState = "EXPIRED"
	Withdrawn OfferState = "WITHDRAWN"
)

// OfferStates lists every offer state in workflow order.
var OfferStates = []OfferState{Sent, Viewed, Accepted, Declined, Expired, Withdrawn}

var orderTransitions = domain.NewTransitions(ErrIllegalTransition, "order", map[OrderState][]OrderState{
	Searching: {Assigned, Cancelled},        // a master accepted; an admin cancelled
	Assigned:  {Done, Cancelled, Searching}, // /done or the master's Done; /cancel; the master gave it back
	Done:      {Closed},                     // autoclose
})

// An offer moves to Accepted only while its master is not blocked: a
// blocked master takes no new work (Service.Accept, Orders.AcceptOffer),
// and the block withdraws their open offers (Service.Commission).
var offerTransitions = domain.NewTransitions(ErrIllegalTransition, "offer", map[OfferState][]OfferState{
	Sent:   {Viewed, Accepted, Declined, Expired, Withdrawn},
	Viewed: {Accepted, Declined, Expired, Withdrawn},
})

// ErrIllegalTransition is returned for a change the tables do not allow.
var ErrIllegalTransition = errors.New("illegal dispatch state transition")

// CanOrder reports whether the order table allows from → to.
func CanOrder(from, to OrderState) bool { return orderTransitions.Can(from, to) }

// CanOffer reports whether the offer table allows from → to.
func CanOffer(from, to OfferState) bool { return offerTransitions.Can(from, to) }

func checkOrder(from, to OrderState) error { return orderTransitions.Check(from, to) }

func checkOffer(from, to OfferState) error { return offerTransitions.Check(from, to) }

// Open reports whether the offer still waits for the master.
func (s OfferState) Open() bool { return s == Sent || s == Viewed }

// WithdrawnByBlock reports whether an offer of o that is WITHDRAWN was
// withdrawn because its master was blocked for commission, not because o
// was cancelled. A cancel withdraws in the transaction that cancels the
// order, and a block leaves the order to the next master, so an offer
// withdrawn from an order that is not cancelled was the block's. One
// withdrawn by a block from an order cancelled since reads as cancelled,
// which it then is; so does one whose order's state is not known.
func WithdrawnByBlock(o Order) bool { return o.State != "" && o.State != Cancelled }
