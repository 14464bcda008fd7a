package dispatch

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"

	"switchboard/domain"
)

// Master is a registered master.
type Master struct {
	UserID   int64
	Username string // Telegram username, for admins' messages
	Name     string // Telegram first name
	Lang     string // language to write to them in
	// TimeZone is the zone they chose with /timezone; empty: not chosen.
	TimeZone string
	City     string
	District string
	Skills   []string // lower-case
	Active   bool
	// BlockedAt is set while commission is overdue (zero: not blocked).
	BlockedAt   time.Time
	LastOfferAt time.Time
	CreatedAt   time.Time
}

// MasterStats is what /master shows beside the profile.
type MasterStats struct {
	Offers map[OfferState]int
	// Orders by state among those assigned to the master.
	Orders map[OrderState]int
	// Owed is unpaid commission; Overdue the part past its deadline.
	Owed, Overdue int64
	// NextDue is the earliest deadline of unpaid commission (zero: none).
	NextDue time.Time
}

// Order is one admin's order.
type Order struct {
	ID          int64
	CreatedBy   int64
	City        string
	District    string
	Skill       string // lower-case
	Price       int64  // whole currency units
	Description string
	// Contact is the customer's: personal data, shown only to the
	// assigned master and to admins, and cleared by retention a while
	// after the order ended (ContactsPruned).
	Contact Contact
	Visit   Visit
	State   OrderState
	Round   int
	// MasterID is the assigned master; zero while searching (and again
	// once a master gave the order back).
	MasterID int64
	// Unassignable is set when admins were told nobody is left.
	Unassignable     time.Time
	AssignedAt       time.Time
	DoneAt           time.Time
	ClosedAt         time.Time
	CancelledAt      time.Time
	Commission       int64 // set at DONE
	CommissionDueAt  time.Time
	CommissionPaidAt time.Time
	CreatedAt        time.Time
	// The assigned master's steps (zero: not yet).
	EnRouteAt, ArrivedAt time.Time
	// Photos of the finished work the master sent on to the admins.
	Photos int
	// ContactsPruned is when retention cleared Contact (zero: not yet).
	ContactsPruned time.Time
	// CustomerToken is the order's link's (LinkPayload); CustomerID the
	// Telegram user who opened it (zero: nobody yet), contact data like
	// Contact; ETA is when the master on the way said they would arrive.
	CustomerToken string
	CustomerID    int64
	ETA           time.Time
	// LateTold is when the admins were told the master had not arrived
	// by the end of the visit window (zero: not told).
	LateTold time.Time
}

// Contact is who the master visits and where; every field may be empty.
type Contact struct {
	Address string
	Name    string
	Phone   string
}

// Empty reports whether the order names nobody and nowhere.
func (c Contact) Empty() bool { return c == Contact{} }

// Visit is when the master is expected, in the city's local time exactly as
// the admin wrote it (no zone). The zero Visit: none given.
type Visit struct {
	// Date is the day at midnight UTC (only its year, month and day
	// mean anything); zero: no visit given.
	Date time.Time
	// From and To are times of day since midnight; To == 0: no window.
	From, To time.Duration
}

// Given reports whether the order has a visit date.
func (v Visit) Given() bool { return !v.Date.IsZero() }

// Window reports whether the visit has a time window.
func (v Visit) Window() bool { return v.To > 0 }

// Offer is one order offered to one master.
type Offer struct {
	ID          int64
	OrderID     int64
	MasterID    int64
	Round       int
	State       OfferState
	SentAt      time.Time
	ExpiresAt   time.Time
	ViewedAt    time.Time
	RespondedAt time.Time
	// ChatID and MessageID locate the master's offer message (zero: not
	// sent yet, or sending failed).
	ChatID    int64
	MessageID int
}

// OrderList is /orders: the first lines of each section, the open orders
// (SEARCHING, ASSIGNED) before the DONE ones, each oldest first, and how
// many orders each section has in all, which may be more than it lists.
type OrderList struct {
	Lines      []OrderLine
	Open, Done int
}

// OrderLine is one row of /orders: the order and its open offer, if any.
type OrderLine struct {
	Order  Order
	Offer  *Offer  // the open offer (SENT or VIEWED), nil if none
	Master *Master // the open offer's master, or the assigned one
	// Rating is the customer's rating of a finished order; nil if none.
	Rating *Rating
}

// NewOrder is what /order asks for.
type NewOrder struct {
	CreatedBy int64
	// Source is the admin's /order message: an order is created once per
	// message, however often its update runs (zero: no key, as in tests).
	Source      domain.MessageRef
	City        string
	District    string
	Skill       string
	Price       int64
	Description string
	Contact     Contact
	Visit       Visit
	// CustomerToken is the order's link's (NewCustomerToken).
	CustomerToken string
}

// Outcome is what one distribution step did for an order.
type Outcome int

// Distribution outcomes.
const (
	// Offered: an offer was created (Orders.NextOffer returns it).
	Offered Outcome = iota
	// Busy: the order has an open offer, or another replica holds it.
	Busy
	// NotSearching: the order is no longer SEARCHING.
	NotSearching
	// Unassignable: both rounds used up, reported now for the first time.
	Unassignable
	// StillUnassignable: as Unassignable, already reported.
	StillUnassignable
	// AfterHours: the order's city is outside its working hours; the
	// order stays owed a step and is offered when the city opens.
	AfterHours
	// Taken: NextOwedOffer found the order no longer owed a step (no open
	// offer, reported unassignable and not parked since: StepFacts.Owed):
	// another step settled it after this one was sent, and this one wrote
	// nothing.
	Taken
)

// Debt is a master's unpaid commission.
type Debt struct {
	MasterID int64
	Amount   int64
	Orders   []int64
	// Overdue is the part past its deadline.
	Overdue int64
}

// Changed is what one state change changed, as its messages are rendered
// inside its transaction: the rows it moved and the masters they name.
type Changed struct {
	Order  Order   // the order it moved, if any
	Offers []Offer // the offers it moved (created, answered, expired, withdrawn)
	// Assigned is the accepted offer of the master the order is (or was,
	// until this change) assigned to: its message shows the address and
	// contact, and the change edits it. Nil if there is none.
	Assigned *Offer
	Debts    []Debt  // commission blocked or settled
	Closed   []int64 // orders autoclose closed
	// WasBlocked: SettleCommission lifted a block.
	WasBlocked bool
	// Rating is the rating Rate recorded, or Comment commented (Order is
	// the order rated).
	Rating *Rating
	// Masters are the masters of Order, Offers, Assigned and Debts, read
	// in the same transaction (a master missing here was not found).
	Masters map[int64]Master
	// Orders are the orders of Offers other than Order, read in the same
	// transaction: an expiry's closing edit says what the offer was.
	Orders map[int64]Order
	// Customer is Order's customer, read in the same transaction (nil:
	// none); for a reissued link, the one it no longer is.
	Customer *Customer
	// Shared is, for OnTheWay, the master's share (Where.Share) whose
	// position Order's customer was shown last (0: none).
	Shared int
}

// Pass is which searching orders a distribution pass reads.
type Pass int

const (
	// PassOwed: those owed a step (StepFacts.Owed), less those whose offer
	// ended within the last OwedRecheck (the replica that ended it is
	// taking their step) and those whose offer another live replica
	// expired within FollowUpHeld (its follow-up is that replica's).
	PassOwed Pass = iota
	// PassParked: those of them parked (StepFacts.Parked): what the end of
	// some master's offer may unblock.
	PassParked
	// PassAll: every one, unassignable ones included.
	PassAll
)

// The ports below are what the workflow needs from storage. Every state
// change is one conditional statement naming the old state, and writes the
// messages its Render renders in the same transaction (domain.Render).

// Masters is the masters: registration and the masters' own commands
// (dispatch.go), the commission job and /paid (distribute.go, dispatch.go);
// storage.Masters implements it.
type Masters interface {
	// Save registers or updates a master (city, district, skills);
	// true if the master is new. The user must exist.
	Save(ctx context.Context, userID int64, city, district string, skills []string) (Master, bool, error)
	// Get returns a master; domain.ErrNotFound if the user is none.
	Get(ctx context.Context, userID int64) (Master, error)
	// ByUsername finds a master by Telegram username (without @,
	// case-insensitive); domain.ErrNotFound if none.
	ByUsername(ctx context.Context, username string) (Master, error)
	Stats(ctx context.Context, userID int64) (MasterStats, error)
	// SetActive sets active; false if it already was so. domain.ErrNotFound
	// if the user is not a master.
	SetActive(ctx context.Context, userID int64, active bool) (bool, error)
	// Roster lists masters (offset, limit) by city, district and id,
	// each with their Record, and counts them all: /masters.
	Roster(ctx context.Context, offset, limit int) ([]RosterLine, int, error)

	// Commission: the overdue job (distribute.go) and /paid (dispatch.go).

	// BlockOverdue blocks every unblocked master owing commission past its
	// deadline and, in the same transaction, withdraws every open offer of
	// a blocked master (SENT, VIEWED → WITHDRAWN, each statement naming the
	// old state): the masters it blocked, with what they owe, and the
	// offers it withdrew (Changed.Debts, Changed.Offers). Run again, or on
	// another replica at once, it blocks and withdraws nothing twice.
	BlockOverdue(ctx context.Context, tell domain.Render[Changed]) ([]Debt, []Offer, error)
	// SettleCommission marks all the master's unpaid commission paid and
	// unblocks them, for the admin's message by; what was settled, and
	// whether they were blocked. by handled again settles nothing more and
	// returns what it settled.
	SettleCommission(ctx context.Context, masterID int64, by domain.MessageRef, tell domain.Render[Changed]) (Debt, bool, error)
}

// Orders is the orders and their offers: the admins' order commands, the
// assigned master's buttons, distribution, the offer buttons, the expiry
// watchdog and autoclose; storage.Orders implements it.
type Orders interface {
	// The admins' order commands (dispatch.go).

	Create(ctx context.Context, o NewOrder, tell domain.Render[Changed]) (Order, error)
	// Get returns one order; domain.ErrNotFound if none.
	Get(ctx context.Context, id int64) (Order, error)
	// Open lists up to limit open orders (SEARCHING, ASSIGNED), then up
	// to limit DONE ones, each oldest first, with each section's total.
	Open(ctx context.Context, limit int) (OrderList, error)
	// Complete moves ASSIGNED → DONE and sets the commission
	// (ceil(price × ratePercent / 100)) due after deadline; with masterID
	// not zero only if the order is assigned to that master. ok false
	// (with the order as it is) if that did not hold. Changed.Assigned is
	// the assigned master's accepted offer.
	Complete(ctx context.Context, id, masterID int64, ratePercent float64, deadline time.Duration, tell domain.Render[Changed]) (Order, bool, error)
	// Cancel moves SEARCHING or ASSIGNED → CANCELLED and withdraws its
	// open offer in the same transaction; ok false (with the order as it
	// is) if the order was in neither state. Changed.Assigned is the
	// assigned master's accepted offer, if any.
	// With customerID not zero, only that customer's order, and only until
	// its master is on the way.
	Cancel(ctx context.Context, id, customerID int64, tell domain.Render[Changed]) (o Order, withdrawn []Offer, ok bool, err error)

	// The customer (customer.go).

	// Join makes userID the customer of the order with the link token,
	// unless another user is: ErrLinkTaken; ErrLinkInvalid when no order
	// has it. Opened again by its customer, the order is told again,
	// unless by the same message (messageID, not 0) that joined it last:
	// that is its update run again, and the order is returned untold.
	Join(ctx context.Context, token string, userID int64, messageID int, tell domain.Render[Changed]) (Order, error)
	// Reissue gives the order a new link token and unlinks its customer
	// (Changed.Customer: the one unlinked, if any); domain.ErrNotFound.
	// The press that gave the current link (pressID, not "") handled
	// again returns the order as it is, untold.
	Reissue(ctx context.Context, id int64, token, pressID string, tell domain.Render[Changed]) (Order, error)
	// EnRoute is the assigned master's On my way with their ETA: as
	// MarkStep(StepEnRoute), and the order's ETA set.
	EnRoute(ctx context.Context, orderID, masterID int64, eta time.Duration, tell domain.Render[Changed]) (Order, bool, error)
	// Unarrived lists up to limit ASSIGNED orders with a visit window
	// whose master has not arrived and whose lateness was not told.
	Unarrived(ctx context.Context, limit int) ([]Order, error)
	// MarkLate records that order id's lateness is told, once: ok false
	// (nothing told) if it was told already, or the master arrived, or the
	// order is no longer ASSIGNED.
	MarkLate(ctx context.Context, id int64, tell domain.Render[Changed]) (Order, bool, error)
	// RelayTarget is the order a message of the bot's (chatID, messageID)
	// was about: the customer's status or notes, a relayed text, or the
	// assigned master's order message; false if none, or
	// domain.ErrNotYetRecorded if it may be a message still being
	// delivered, whose record is to come.
	RelayTarget(ctx context.Context, chatID, messageID int64) (int64, bool, error)
	// Relay records r, sent by senderID as their message src, and writes
	// what render makes of it for the other side (from: the sender, to:
	// the reader, read in the same transaction) — once per src: again, it
	// writes nothing. The order as it is.
	Relay(ctx context.Context, r Relayed, senderID int64, src domain.MessageRef, render func(c Changed, from, to Customer) []domain.Message) (Order, error)
	// OnTheWay is the order masterID is on the way to (ASSIGNED to them,
	// en route, not arrived, with a customer; the one they set off to
	// last), locked, its change told by tell with the share its customer
	// was shown last (Changed.Shared), share recorded as that from now on;
	// ok false (nothing told, nothing recorded) if there is none.
	OnTheWay(ctx context.Context, masterID int64, share int, tell domain.Render[Changed]) (Order, bool, error)
	// Thread is order id's relayed texts, oldest first.
	Thread(ctx context.Context, id int64) ([]Relayed, error)

	// The assigned master's buttons (steps.go).

	// MarkStep records the assigned master's step on the order: one
	// conditional statement, only while the order is ASSIGNED to masterID
	// and the step is not done yet (Arrived also marks EnRoute if it was
	// skipped). ok false, with the order as it is, otherwise.
	MarkStep(ctx context.Context, orderID, masterID int64, step Step, tell domain.Render[Changed]) (Order, bool, error)
	// Return is the assigned master giving the order back: ASSIGNED
	// → SEARCHING in one conditional statement (master, steps and
	// round and unassignable report reset: owed a step), only while it is assigned to masterID;
	// ok false, with the order as it is, otherwise. Changed.Assigned is
	// the master's accepted offer.
	Return(ctx context.Context, orderID, masterID int64, tell domain.Render[Changed]) (Order, bool, error)
	// RecordPhoto counts a photo of the finished work the master sends on
	// to the admins: the master's order done latest within `within` that
	// has fewer than max photos. The order, and false if there is none
	// (Order.ID zero: no recent order; else it has max photos already).
	// messageID is the photo's message: a message counted already is
	// reported recorded again, neither counted nor forwarded twice.
	RecordPhoto(ctx context.Context, masterID int64, messageID int, within time.Duration, max int, tell domain.Render[Changed]) (Order, bool, error)

	// Ratings (ratings.go).

	// Rate records a rating of the order by its customer, customerID, of
	// its assigned master, once, if the order is DONE or CLOSED: one
	// conditional statement naming the customer, so replicas handling the
	// same press record it once and a customer unlinked meanwhile records
	// nothing. ok false, with the order's rating as it stands (zero: none,
	// the order is not finished), when it recorded nothing; ErrNotCustomer
	// if the order is not customerID's; domain.ErrNotFound if there is no
	// such order. tell renders Changed{Order, Rating} in its transaction.
	Rate(ctx context.Context, orderID, customerID int64, stars int, comment string, tell domain.Render[Changed]) (Rating, bool, error)
	// Comment gives the rating of the order the comment, if the order is
	// customerID's and its rating has none yet: one conditional statement,
	// so the same reply handled twice writes it once. ok false, with the
	// order's rating as it stands (zero: none), when it wrote nothing;
	// domain.ErrNotFound if there is no such order. tell renders
	// Changed{Order, Rating} in its transaction.
	Comment(ctx context.Context, orderID, customerID int64, comment string, tell domain.Render[Changed]) (Rating, bool, error)
	// Ratings returns the ratings of those of the orders that have one.
	Ratings(ctx context.Context, orderIDs []int64) (map[int64]Rating, error)

	// Distribution (distribute.go): Searching in storage/orders.go,
	// NextOffer in storage/offers.go, which asks policy.go what each step
	// does.

	// Searching lists SEARCHING orders with no open offer, oldest
	// first, those pass reads. Every change that leaves an order without
	// an open offer (creation, an expiry, a decline) leaves it owed
	// (StepFacts.Owed) with no mark to write; one that may give an
	// unassignable order a candidate (a master registered, moved, resumed
	// or unblocked) parks it in its own transaction; only a step that
	// settles the order (an offer, the unassignable report) makes it not
	// owed. Orders of a city gate keeps closed are left out.
	// by is the claimer asking (Config.Claimer), for PassOwed.
	Searching(ctx context.Context, limit int, pass Pass, by string, gate Gate) ([]int64, error)
	// NextOffer is one distribution step for an order, in one transaction
	// holding the order's row (Busy if another transaction holds it: the
	// order's offers then say whether a step is still owed; AfterHours,
	// still owed, if gate keeps its city closed now): pick
	// the candidate best ranked by ratings (RankOf), idle longest among
	// equals, in the order's round and create the offer
	// expiring after sla; with nobody left in round 1 move to round 2 and
	// pick again; with nobody left in round 2 mark the order unassignable.
	// Creating an offer clears the unassignable mark.
	// A new offer's messages (the offer, its live-log line) commit with
	// it, so an offer never exists unseen; tell also renders the
	// unassignable report (Changed with no offer).
	NextOffer(ctx context.Context, orderID int64, sla time.Duration, gate Gate, tell domain.Render[Changed]) (Offer, Order, Outcome, error)
	// NextOwedOffer is NextOffer for an order taken up because it was
	// owed a step (its offer's expiry, the owed-orders recheck): an order
	// that, once held, has no open offer and is not owed (StepFacts.Owed)
	// was settled by another step since, and the step ends there (Taken)
	// instead of searching again for the candidate that step found or the
	// absence it reported.
	NextOwedOffer(ctx context.Context, orderID int64, sla time.Duration, gate Gate, tell domain.Render[Changed]) (Offer, Order, Outcome, error)

	// The offer buttons and the expiry watchdog (dispatch.go, watchdog.go).

	// Offer returns one offer; domain.ErrNotFound if none.
	Offer(ctx context.Context, id int64) (Offer, error)
	// AcceptOffer is the one conditional statement: the offer moves to ACCEPTED
	// only if it is the master's, open and not past expires_at, and the
	// master is not blocked, their row held against a block until the
	// transaction ends; and its order SEARCHING → ASSIGNED in the same
	// transaction; ok false if anything did not hold (nothing changed).
	AcceptOffer(ctx context.Context, offerID, masterID int64, tell domain.Render[Changed]) (Offer, Order, bool, error)
	// DeclineOffer moves the master's open offer to DECLINED; ok false otherwise.
	DeclineOffer(ctx context.Context, offerID, masterID int64, tell domain.Render[Changed]) (Offer, bool, error)
	// ViewOffer moves the master's SENT offer not yet past expires_at to VIEWED;
	// ok false otherwise (an offer already VIEWED is returned with ok false
	// too).
	ViewOffer(ctx context.Context, offerID, masterID int64, tell domain.Render[Changed]) (Offer, bool, error)
	// ExpireOffers is the watchdog's statement: every SENT or VIEWED offer
	// with expires_at <= now() becomes EXPIRED, and exactly those return.
	// by is the claimer taking their follow-up steps (Config.Claimer): the
	// owed-orders recheck of other replicas leaves those orders to it
	// while it lives, for up to FollowUpHeld.
	ExpireOffers(ctx context.Context, by string, tell domain.Render[Changed]) ([]Offer, error)
	// NextOfferExpiry is the earliest expires_at of an open offer (false: none).
	NextOfferExpiry(ctx context.Context) (time.Time, bool, error)

	// The autoclose job (distribute.go).

	// Autoclose moves DONE orders older than after to CLOSED.
	Autoclose(ctx context.Context, after time.Duration, tell domain.Render[Changed]) ([]int64, error)
}

// EventKind names a live-log event.
type EventKind string

// Live-log events, in the admin chat and in the JSON log.
const (
	EventOrderCreated     EventKind = "order_created"
	EventOfferSent        EventKind = "offer_sent"
	EventOfferViewed      EventKind = "offer_viewed"
	EventOfferAccepted    EventKind = "offer_accepted"
	EventOfferDeclined    EventKind = "offer_declined"
	EventOfferExpired     EventKind = "offer_expired"
	EventOfferWithdrawn   EventKind = "offer_withdrawn"
	EventOrderAssigned    EventKind = "order_assigned"
	EventUnassignable     EventKind = "order_unassignable"
	EventOrderDone        EventKind = "order_done"
	EventOrderCancelled   EventKind = "order_cancelled"
	EventOrderClosed      EventKind = "order_closed"
	EventMasterBlocked    EventKind = "master_blocked"
	EventCommissionPaid   EventKind = "commission_paid"
	EventOfferUndelivered EventKind = "offer_undelivered"
	EventMasterEnRoute    EventKind = "master_en_route"
	EventMasterArrived    EventKind = "master_arrived"
	EventOrderReturned    EventKind = "order_returned"
	EventOrderRated       EventKind = "order_rated"
	EventRatingCommented  EventKind = "rating_commented"
	EventCustomerJoined   EventKind = "customer_joined"
	EventLinkReissued     EventKind = "link_reissued"
	EventCustomerCancel   EventKind = "customer_cancelled"
	EventMasterLate       EventKind = "master_late"
)

// Event is one line of the live log.
type Event struct {
	Kind     EventKind
	OrderID  int64
	OfferID  int64
	MasterID int64
	Master   *Master // when known, for a readable name
	Round    int
	Amount   int64 // commission events
	// ByMaster: the master reported it (order_done by the Done button).
	ByMaster bool
	// Unblocked: the payment (commission_paid) lifted the master's block.
	Unblocked bool
	// Blocked: the master's block withdrew the offer (offer_withdrawn).
	Blocked bool
	At      time.Time
	// Rating is order_rated's rating, and rating_commented's with its
	// comment.
	Rating *Rating
}

// NoteKind names a message to a master that is not an offer.
type NoteKind string

// Messages to masters.
const (
	NoteOrderDone NoteKind = "order_done" // commission owed and its deadline
	NoteCancelled NoteKind = "cancelled"  // the order you were assigned was cancelled
	NoteBlocked   NoteKind = "blocked"    // commission overdue: no offers until /paid
	NoteUnblocked NoteKind = "unblocked"  // commission settled, block lifted
	NotePaid      NoteKind = "paid"       // commission settled (not blocked)
)

// Note is a message to a master.
type Note struct {
	Kind   NoteKind
	Master Master
	Order  *Order
	Amount int64
	Orders int // NotePaid: how many orders the payment settled
}

// Step is a mark the assigned master sets on their order.
type Step string

// The assigned master's steps, in the order they come.
const (
	StepEnRoute Step = "en_route" // set off to the customer
	StepArrived Step = "arrived"  // at the customer's
)

// Assignment is the assigned master's message about their order, rendered
// for the order as it is: ASSIGNED (the address, contact, visit and the
// step buttons), DONE, CANCELLED, or given back (SEARCHING, or another
// master's).
type Assignment struct {
	Master Master
	Order  Order
	Offer  Offer // the master's accepted offer: its message is edited
	// Commission terms, for the texts that quote them.
	CommissionRate     float64
	CommissionDeadline time.Duration
	// PhotoWindow is how long after DONE a photo of the work reaches the
	// admins.
	PhotoWindow time.Duration
	// Pressed: the master's own press caused it, so a message the outbox
	// no longer knows is posted anew.
	Pressed bool
}

// Notifier renders what the workflow tells people (the bot implements it).
// It only renders: the messages go to the outbox, written with the state
// change that causes them where the repository takes them (a new offer), else
// right after it, and the bot's senders deliver them under Telegram's limits.
type Notifier interface {
	// Offer is the offer message with Accept, Decline and Details.
	Offer(m Master, o Order, f Offer) []domain.Message
	// Closed edits the master's offer message to show how the offer ended
	// (EXPIRED, WITHDRAWN).
	Closed(m Master, o Order, f Offer) []domain.Message
	// Note is a message to a master.
	Note(n Note) []domain.Message
	// Event is a line of the admins' live log (none without an admin chat).
	Event(e Event) []domain.Message
	// Assigned edits the assigned master's message to show the order as it
	// is (see Assignment).
	Assigned(a Assignment) []domain.Message
	// Photo sends a photo of the finished work (a Telegram file id) with
	// the master's caption to the admins (none without an admin chat).
	Photo(m Master, o Order, fileID, caption string) []domain.Message
	// Customer tells the order's customer of a change: their status
	// message edited, and a note where the change needs their attention.
	Customer(u CustomerUpdate) []domain.Message
	// Relay is a text from the order's customer to its master, or back.
	Relay(n RelayNote) []domain.Message
}

// Errors the bot turns into answers.
var (
	// ErrNotMaster: the user has not registered with /master.
	ErrNotMaster = errors.New("not a master")
	// ErrForbidden: the offer is another master's.
	ErrForbidden = errors.New("not your offer")
	// ErrOfferClosed: the offer is no longer open (see its State), or it
	// is past expires_at and waits for the watchdog.
	ErrOfferClosed = errors.New("offer no longer open")
	// ErrBlocked: the master is blocked for overdue commission and takes
	// no new work until it is paid; the offer is as it was, or withdrawn.
	ErrBlocked = errors.New("master blocked for commission")
	// ErrOrderState: the order is not in a state the command acts on
	// (for a master's step: not assigned to them, or the step is done).
	ErrOrderState = errors.New("order in another state")
	// ErrNoDoneOrder: a photo came from a master with no order done
	// within the photo window.
	ErrNoDoneOrder = errors.New("no order done recently")
	// ErrPhotoLimit: the order has MaxPhotos photos already.
	ErrPhotoLimit = errors.New("photo limit reached")
)

// inputError refuses the input with key: arg is the part of it at fault
// ("" for none), and the limit the key is about goes with it.
func inputError(key, arg string) *domain.InputError {
	limits := map[string]int{
		"dispatch.error_place_long":    MaxPlace,
		"dispatch.error_skill_long":    MaxSkill,
		"dispatch.error_skills_many":   MaxSkills,
		"order.error_price":            MaxPrice,
		"order.error_description_long": MaxDescription,
		"order.error_address":          MaxAddress,
		"order.error_name":             MaxName,
		"order.error_phone":            MaxPhoneDigits,
		"rating.error_stars":           MaxStars,
		"rating.error_comment_long":    MaxRatingComment,
	}
	return &domain.InputError{Key: key, Args: map[string]any{"Arg": arg, "Max": limits[key], "Min": MinPhoneDigits}}
}

// Limits on input.
const (
	MaxPlace       = 100
	MaxSkill       = 50
	MaxSkills      = 10
	MaxDescription = 2000
	MaxPrice       = 100_000_000
	MaxAddress     = 300
	MaxName        = 100
	MaxPhoneLen    = 40
	MinPhoneDigits = 5
	MaxPhoneDigits = 20
	// MaxPhotos bounds the photos of one order passed to the admins.
	MaxPhotos = 10
	// PhotoWindow is how long after an order is done its master's photos
	// go to the admins.
	PhotoWindow = time.Hour
)

// Config is the workflow's part of the configuration.
type Config struct {
	OfferSLA           time.Duration // OFFER_SLA (2m)
	CommissionRate     float64       // COMMISSION_RATE, percent; 0 means none
	CommissionDeadline time.Duration // COMMISSION_DEADLINE (3h)
	AutocloseAfter     time.Duration // AUTOCLOSE_AFTER (24h)
	// Workers bound the follow-up of one sweep (message edits and
	// redistribution) done at once (8).
	Workers int
	// Claimer is the name this replica's claims carry (REPLICA_NAME#n,
	// its liveness lock's key after the '#'); an expiry's follow-up is
	// claimed in its name. Empty: no claim, the follow-up is left to this
	// replica for OwedRecheck only.
	Claimer string
	// Calendar holds each city's time zone and working hours
	// (DISPATCH_TIMEZONE, DISPATCH_HOURS, DISPATCH_CITIES): offers go out
	// only while the order's city is open, and every time shown about a
	// city is in its zone. The zero Calendar is UTC, open around the clock.
	Calendar Calendar
}

func (c Config) withDefaults() Config {
	domain.OrDefault(&c.OfferSLA, 2*time.Minute)
	domain.OrDefault(&c.CommissionDeadline, 3*time.Hour)
	domain.OrDefault(&c.AutocloseAfter, 24*time.Hour)
	domain.OrDefault(&c.Workers, 8)
	return c
}

// Deps are the workflow's collaborators.
type Deps struct {
	Orders   Orders
	Masters  Masters
	Notifier Notifier
	Clock    clockwork.Clock
	// CalendarClock is what working hours are read on (Clock if nil). A
	// test or demo moves it alone (CLOCK_START): the expiry timer and the
	// time left on an offer compare the database's times with Clock.
	CalendarClock clockwork.Clock
	Log           *slog.Logger
	Registerer    prometheus.Registerer
}
