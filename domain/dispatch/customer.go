package dispatch

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"switchboard/domain"
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
	CustomerCommented CustomerNote = "commented" // their rating's comment is recorded
	CustomerPhoto     CustomerNote = "photo"     // the master's photo of the finished work
	CustomerLate      CustomerNote = "late"      // the visit window ended before the master arrived
	CustomerWhere     CustomerNote = "where"     // the master's location on the way (CustomerUpdate.Where)
)

// CustomerUpdate is one change as the customer reads it.
type CustomerUpdate struct {
	Customer Customer
	Order    Order
	// MasterName is the assigned master's first name ("" while none).
	MasterName string
	Note       CustomerNote
	// Rating is the order's rating, once given (0: none), and Comment its
	// comment ("": none).
	Rating  int
	Comment string
	// Photo is the Telegram file id of the work's photo (CustomerPhoto).
	Photo string
	// Where is the master's location (CustomerWhere).
	Where *Where
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
// opened with message messageID (their /start), and sends them its
// status. Opening it again shows it again; the same message handled again
// (its replica died before the update's done-mark) tells nobody anything.
// ErrLinkInvalid, ErrLinkTaken.
func (s *Service) JoinOrder(ctx context.Context, userID int64, token string, messageID int) (Order, error) {
	st := s.newStory()
	o, err := s.deps.Orders.Join(ctx, token, userID, messageID, st.tell(func(c Changed) {
		st.event(Event{Kind: EventCustomerJoined, OrderID: c.Order.ID, MasterID: c.Order.MasterID})
		st.customer(c, CustomerJoined)
		if c.Assigned != nil {
			// The master's message now says they can write to the customer.
			m, _ := masterOf(c, c.Order.MasterID)
			st.assigned(s.assignment(m, c.Order, *c.Assigned, false))
		}
	}))
	if err != nil {
		return o, err
	}
	st.logged()
	return o, nil
}

// ReissueLink is the admin's Reissue: the order gets a new link and the
// old one opens nothing; a customer who opened the old one is no longer
// the order's (and is told). pressID names the press (the callback
// query's id): the same press handled again keeps the link it gave, the
// one the admin was shown, rather than issue another.
func (s *Service) ReissueLink(ctx context.Context, orderID int64, pressID string) (Order, error) {
	token, err := NewCustomerToken()
	if err != nil {
		return Order{}, err
	}
	st := s.newStory()
	o, err := s.deps.Orders.Reissue(ctx, orderID, token, pressID, st.tell(func(c Changed) {
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
	st.tellCustomer(c, CustomerPhoto, func(u *CustomerUpdate) { u.Photo = fileID })
}

// customer adds the customer's edit and note about c's order, if it has a
// customer.
func (st *story) customer(c Changed, note CustomerNote) {
	st.tellCustomer(c, note, nil)
}

// tellCustomer writes what c's order's customer is told of note (none
// without a customer): the update with the master's first name and the
// rating as c carries them, completed by with.
func (st *story) tellCustomer(c Changed, note CustomerNote, with func(*CustomerUpdate)) {
	if c.Customer == nil || c.Customer.UserID == 0 {
		return
	}
	u := CustomerUpdate{Customer: *c.Customer, Order: c.Order, Note: note}
	if m, ok := masterOf(c, c.Order.MasterID); ok {
		u.MasterName = m.Name
	}
	if c.Rating != nil {
		u.Rating, u.Comment = c.Rating.Stars, c.Rating.Comment
	}
	if with != nil {
		with(&u)
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

// MaxRelay bounds a text relayed between the customer and the master:
// short questions and answers, not documents.
const MaxRelay = 1000

// Relayed is one text the customer and the assigned master sent each other.
type Relayed struct {
	OrderID    int64
	FromMaster bool
	Text       string
	At         time.Time
}

// RelayNote is a relayed text as its reader gets it.
type RelayNote struct {
	Order Order
	// To is the reader: the customer (ToMaster false) or the master.
	ToMaster bool
	To       int64
	Lang     string
	// From is the sender's first name, the only thing of them shown.
	From string
	Text string
}

// Errors of a relay.
var (
	// ErrRelayClosed: the order is done, cancelled or given back: nothing
	// is relayed any more.
	ErrRelayClosed = errors.New("the order no longer relays messages")
	// ErrRelayTooLong: the text is longer than MaxRelay.
	ErrRelayTooLong = errors.New("the text is too long to relay")
)

// RelayOutcome is what Relay made of a reply to the bot's message.
type RelayOutcome int

// Relay's outcomes.
const (
	// RelayIgnored: the reply is to nothing about an order; the text is
	// someone else's business.
	RelayIgnored RelayOutcome = iota
	// RelayPassed: the text goes to the order's other side (or was
	// refused, with Relay's error).
	RelayPassed
	// RelayCommented: the order is finished, and the customer's text is
	// their rating's comment (or was refused, with Relay's error).
	RelayCommented
)

// Relay passes a text from an order's customer to its assigned master,
// or back, when the sender replied to one of the bot's messages about the
// order (chatID, replyTo): the other side sees the sender's first name
// only. Once the order is done (DONE or CLOSED), the customer's reply is
// the comment on their rating instead (see comment). ErrNotCustomer for a
// sender who is neither side; ErrRelayClosed after Done (for the master),
// a cancel or a give-back; ErrRelayTooLong; domain.ErrNotYetRecorded
// (RelayIgnored) while the message replied to may be one still being
// delivered, for the update to run again. The sender's message (chatID,
// messageID) is relayed once, however often its update runs.
func (s *Service) Relay(ctx context.Context, senderID, chatID int64, replyTo, messageID int, text string) (Order, RelayOutcome, error) {
	orderID, ok, err := s.deps.Orders.RelayTarget(ctx, chatID, int64(replyTo))
	if err != nil || !ok {
		return Order{}, RelayIgnored, err
	}
	o, err := s.deps.Orders.Get(ctx, orderID)
	if err != nil {
		return Order{}, RelayPassed, err
	}
	fromMaster := o.MasterID != 0 && senderID == o.MasterID
	if !fromMaster && (o.CustomerID == 0 || senderID != o.CustomerID) {
		return o, RelayPassed, fmt.Errorf("order %d: %w", o.ID, ErrNotCustomer)
	}
	if !fromMaster && (o.State == Done || o.State == Closed) {
		if strings.TrimSpace(text) == "" {
			// Telegram sends no blank text; were one to come, it is no
			// comment.
			return o, RelayIgnored, nil
		}
		return o, RelayCommented, s.comment(ctx, o, senderID, text)
	}
	if o.State != Assigned || o.CustomerID == 0 {
		return o, RelayPassed, ErrRelayClosed
	}
	if len([]rune(text)) > MaxRelay {
		return o, RelayPassed, ErrRelayTooLong
	}
	r := Relayed{OrderID: o.ID, FromMaster: fromMaster, Text: text}
	o, err = s.deps.Orders.Relay(ctx, r, senderID, domain.MessageRef{Chat: chatID, ID: messageID}, func(c Changed, from, to Customer) []domain.Message {
		return s.deps.Notifier.Relay(RelayNote{Order: c.Order, ToMaster: !fromMaster, To: to.UserID, Lang: to.Lang, From: from.FirstName, Text: text})
	})
	return o, RelayPassed, err
}

// Thread is what the customer and the master of order id sent each other,
// oldest first, for the admins.
func (s *Service) Thread(ctx context.Context, id int64) (Order, []Relayed, error) {
	o, err := s.deps.Orders.Get(ctx, id)
	if err != nil {
		return Order{}, nil, err
	}
	rs, err := s.deps.Orders.Thread(ctx, id)
	return o, rs, err
}
