package storage

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"switchboard/domain"
	"switchboard/domain/dispatch"
)

// An offer's delivery records its message, which later edits and the
// master's buttons name.
var _ = onDelivered(domain.KindOffer, `
offer_sent AS (
    UPDATE offers f SET chat_id = done.chat_id, message_id = done.message_id
    FROM done WHERE done.kind = 'offer' AND NOT done.edit AND f.id = done.ref AND done.message_id IS NOT NULL
)`)

// The dispatch workflow's repository (dispatch.Repository).
var _ dispatch.Repository = (*Store)(nil)

// Columns of each entity in the order its scanner reads them. The masters
// read joins users (m, u) for the names and the language.
const (
	offerColumns = `id, order_id, master_id, round, state, sent_at, expires_at, viewed_at, responded_at, chat_id, message_id`
	orderColumns = `id, created_by, city, district, skill, price, description, state, round, unassignable_at, master_id,
assigned_at, done_at, closed_at, cancelled_at, commission, commission_due_at, commission_paid_at, created_at,
address, customer_name, customer_phone, visit_date, visit_from, visit_to, en_route_at, arrived_at, photos,
contacts_pruned_at`
	// masterLang follows domain.User.Lang: /lang, else Telegram's, else English.
	masterLang    = `CASE WHEN u.language <> '' THEN u.language WHEN u.telegram_language <> '' THEN u.telegram_language ELSE 'en' END`
	masterColumns = `m.user_id, u.username, u.first_name, ` + masterLang + `, u.time_zone,
m.city, m.district, m.skills, m.active, m.blocked_at, m.last_offer_at, m.created_at`
	masterFrom = ` FROM masters m JOIN users u ON u.id = m.user_id `
	// openOffer is the SQL spelling of dispatch.OfferState.Open; it matches the
	// predicate of the partial indexes offers_open_* and offers_due.
	openOffer = `('SENT', 'VIEWED')`
)

// unpaid selects the orders (of table alias a) whose commission is owed.
func unpaid(a string) string {
	return a + `.state IN ('DONE', 'CLOSED') AND ` + a + `.commission IS NOT NULL AND ` + a + `.commission_paid_at IS NULL`
}

// prefixed qualifies every column of a list with a table alias.
func prefixed(alias, columns string) string {
	cols := strings.Split(columns, ",")
	for i, c := range cols {
		cols[i] = alias + "." + strings.TrimSpace(c)
	}
	return strings.Join(cols, ", ")
}

var (
	offerColumnsF = prefixed("f", offerColumns)
	orderColumnsO = prefixed("o", orderColumns)
)

// micros passes a duration to SQL as `$n * interval '1 microsecond'`.
func micros(d time.Duration) int64 { return d.Microseconds() }

func tsValue(t pgtype.Timestamptz) time.Time {
	if !t.Valid {
		return time.Time{}
	}
	return t.Time.UTC()
}

// offerScan reads an offer's columns; every field is nullable so that it
// also reads the LEFT JOINed open offer of OpenOrders.
type offerScan struct {
	id, orderID, masterID, chatID, messageID pgtype.Int8
	round                                    pgtype.Int4
	state                                    pgtype.Text
	sentAt, expiresAt, viewedAt, respondedAt pgtype.Timestamptz
}

func (s *offerScan) dest() []any {
	return []any{&s.id, &s.orderID, &s.masterID, &s.round, &s.state, &s.sentAt, &s.expiresAt,
		&s.viewedAt, &s.respondedAt, &s.chatID, &s.messageID}
}

func (s *offerScan) offer() dispatch.Offer {
	return dispatch.Offer{
		ID: s.id.Int64, OrderID: s.orderID.Int64, MasterID: s.masterID.Int64, Round: int(s.round.Int32),
		State: dispatch.OfferState(s.state.String), SentAt: tsValue(s.sentAt), ExpiresAt: tsValue(s.expiresAt),
		ViewedAt: tsValue(s.viewedAt), RespondedAt: tsValue(s.respondedAt),
		ChatID: s.chatID.Int64, MessageID: int(s.messageID.Int64),
	}
}

func scanOffer(row pgx.Row) (dispatch.Offer, error) {
	var s offerScan
	if err := row.Scan(s.dest()...); err != nil {
		return dispatch.Offer{}, err
	}
	return s.offer(), nil
}

// offerState returns the constant for a state read from the driver's
// buffer, so that reading an offer allocates nothing but its slot.
func offerState(b []byte) dispatch.OfferState {
	for _, st := range dispatch.OfferStates {
		if string(b) == string(st) {
			return st
		}
	}
	return dispatch.OfferState(b)
}

// collectOffers reads every row of a query returning offerColumns with one
// scan target for all rows: a watchdog sweep of 100 000 offers allocates
// only the slice, which doubles as it grows.
func collectOffers(rows pgx.Rows, err error) ([]dispatch.Offer, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var s offerScan
	var state pgtype.DriverBytes // valid until the next row: copied out below
	dest := s.dest()
	dest[4] = &state
	var out []dispatch.Offer
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return nil, err
		}
		if len(out) == cap(out) {
			out = slices.Grow(out, max(8, len(out)))
		}
		f := s.offer()
		f.State = offerState(state)
		out = append(out, f)
	}
	return out, rows.Err()
}

type orderScan struct {
	id, createdBy, price, masterID, commission               pgtype.Int8
	city, district, skill, description, state                pgtype.Text
	round, photos                                            pgtype.Int4
	unassignable, assigned, done, closed, cancelled, created pgtype.Timestamptz
	commissionDue, commissionPaid                            pgtype.Timestamptz
	address, name, phone                                     pgtype.Text
	visitDate                                                pgtype.Date
	visitFrom, visitTo                                       pgtype.Time
	enRoute, arrived, contactsPruned                         pgtype.Timestamptz
}

func (s *orderScan) dest() []any {
	return []any{&s.id, &s.createdBy, &s.city, &s.district, &s.skill, &s.price, &s.description, &s.state,
		&s.round, &s.unassignable, &s.masterID, &s.assigned, &s.done, &s.closed, &s.cancelled,
		&s.commission, &s.commissionDue, &s.commissionPaid, &s.created,
		&s.address, &s.name, &s.phone, &s.visitDate, &s.visitFrom, &s.visitTo, &s.enRoute, &s.arrived, &s.photos,
		&s.contactsPruned}
}

func (s *orderScan) order() dispatch.Order {
	o := dispatch.Order{
		ID: s.id.Int64, CreatedBy: s.createdBy.Int64, City: s.city.String, District: s.district.String,
		Skill: s.skill.String, Price: s.price.Int64, Description: s.description.String,
		State: dispatch.OrderState(s.state.String), Round: int(s.round.Int32), MasterID: s.masterID.Int64,
		Unassignable: tsValue(s.unassignable), AssignedAt: tsValue(s.assigned), DoneAt: tsValue(s.done),
		ClosedAt: tsValue(s.closed), CancelledAt: tsValue(s.cancelled), Commission: s.commission.Int64,
		CommissionDueAt: tsValue(s.commissionDue), CommissionPaidAt: tsValue(s.commissionPaid),
		CreatedAt: tsValue(s.created),
		Contact:   dispatch.Contact{Address: s.address.String, Name: s.name.String, Phone: s.phone.String},
		EnRouteAt: tsValue(s.enRoute), ArrivedAt: tsValue(s.arrived), Photos: int(s.photos.Int32),
		ContactsPruned: tsValue(s.contactsPruned),
	}
	if s.visitDate.Valid {
		d := s.visitDate.Time
		o.Visit.Date = time.Date(d.Year(), d.Month(), d.Day(), 0, 0, 0, 0, time.UTC)
	}
	if s.visitFrom.Valid && s.visitTo.Valid {
		o.Visit.From = time.Duration(s.visitFrom.Microseconds) * time.Microsecond
		o.Visit.To = time.Duration(s.visitTo.Microseconds) * time.Microsecond
	}
	return o
}

// orderValues are the arguments CreateOrder stores a new order's optional
// fields from: NULL for what was not given.
func orderValues(n dispatch.NewOrder) []any {
	text := func(s string) pgtype.Text { return pgtype.Text{String: s, Valid: s != ""} }
	var day pgtype.Date
	var from, to pgtype.Time
	if n.Visit.Given() {
		day = pgtype.Date{Time: n.Visit.Date, Valid: true}
	}
	if n.Visit.Window() {
		from = pgtype.Time{Microseconds: n.Visit.From.Microseconds(), Valid: true}
		to = pgtype.Time{Microseconds: n.Visit.To.Microseconds(), Valid: true}
	}
	return []any{text(n.Contact.Address), text(n.Contact.Name), text(n.Contact.Phone), day, from, to}
}

func scanOrder(row pgx.Row) (dispatch.Order, error) {
	var s orderScan
	if err := row.Scan(s.dest()...); err != nil {
		return dispatch.Order{}, err
	}
	return s.order(), nil
}

type masterScan struct {
	userID                               pgtype.Int8
	username, name, lang, city, district pgtype.Text
	zone                                 pgtype.Text
	skills                               []string
	active                               pgtype.Bool
	blocked, lastOffer, created          pgtype.Timestamptz
}

func (s *masterScan) dest() []any {
	return []any{&s.userID, &s.username, &s.name, &s.lang, &s.zone, &s.city, &s.district, &s.skills, &s.active,
		&s.blocked, &s.lastOffer, &s.created}
}

func (s *masterScan) master() dispatch.Master {
	return dispatch.Master{
		UserID: s.userID.Int64, Username: s.username.String, Name: s.name.String, Lang: s.lang.String, TimeZone: s.zone.String,
		City: s.city.String, District: s.district.String, Skills: s.skills, Active: s.active.Bool,
		BlockedAt: tsValue(s.blocked), LastOfferAt: tsValue(s.lastOffer), CreatedAt: tsValue(s.created),
	}
}

func scanMaster(row pgx.Row) (dispatch.Master, error) {
	var s masterScan
	if err := row.Scan(s.dest()...); err != nil {
		return dispatch.Master{}, err
	}
	return s.master(), nil
}

// errNoop rolls a transaction back when a conditional statement found the
// row elsewhere: the method then reports ok=false, not an error.
var errNoop = errors.New("storage: nothing to do")

// dispatchAsync: the transitions the system makes on its own, an offer's
// expiry (ExpireOffers) and a distribution step (NextOffer: an offer
// created, a round moved on, an order marked waiting or unassignable),
// commit asynchronously: they do not wait for the disk, so a sweep's lag
// is not a WAL flush queued behind every other commit's, and an offer's
// insert, whose trigger NOTIFYs, does not hold PostgreSQL's database-wide
// notify lock through a flush (which the memory chat's commits queue on).
// A database crash can lose the last fraction of a second of them. That
// is safe because
//
//   - what is lost is redone: an expiry by the next sweep (the offer stays
//     open and past due, so no Accept takes it meanwhile), a distribution
//     step by the next distribution pass (the order is SEARCHING with no
//     open offer);
//   - nothing they wrote reaches Telegram before it is on disk, so nothing
//     is sent twice: their messages are outbox rows, and a sender only
//     sends a row it has claimed, in a transaction that updates the row
//     and commits synchronously. That commit's WAL record comes after the
//     transition's (which it saw committed), and flushing WAL to one point
//     flushes everything before it; so by the time a row is sent, the
//     transition that wrote it is durable, and a transition that a crash
//     lost had sent nothing;
//   - a later synchronous commit flushes them likewise, so what survives a
//     crash is a prefix: an Accept that returned never survives without
//     the offer it accepted.
//
// The master's and admins' own actions (Accept, Decline, View, /order,
// /cancel, /done, /paid) stay synchronous: their handlers answer at once,
// outside the outbox, and a change they confirmed must not be lost.

// tellTx renders a dispatch change's messages inside its transaction,
// with the masters and orders it names read there too, and writes them to
// the outbox.
func tellTx(ctx context.Context, tx pgx.Tx, tell domain.Render[dispatch.Changed], c dispatch.Changed) error {
	if tell == nil {
		return nil
	}
	var ids []int64
	if c.Order.MasterID != 0 {
		ids = append(ids, c.Order.MasterID)
	}
	for _, f := range c.Offers {
		ids = append(ids, f.MasterID)
	}
	for _, d := range c.Debts {
		ids = append(ids, d.MasterID)
	}
	var orders []int64
	for _, f := range c.Offers {
		if f.OrderID != c.Order.ID && !slices.Contains(orders, f.OrderID) {
			orders = append(orders, f.OrderID)
		}
	}
	if len(orders) > 0 {
		rows, err := tx.Query(ctx, `SELECT `+orderColumns+` FROM orders WHERE id = ANY ($1)`, orders)
		if err != nil {
			return fmt.Errorf("orders of the change: %w", err)
		}
		os, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (dispatch.Order, error) { return scanOrder(r) })
		if err != nil {
			return fmt.Errorf("orders of the change: %w", err)
		}
		c.Orders = make(map[int64]dispatch.Order, len(os))
		for _, o := range os {
			c.Orders[o.ID] = o
		}
	}
	if c.Assigned != nil {
		ids = append(ids, c.Assigned.MasterID)
	}
	if len(ids) > 0 {
		rows, err := tx.Query(ctx, `SELECT `+masterColumns+masterFrom+`WHERE m.user_id = ANY ($1)`, ids)
		if err != nil {
			return fmt.Errorf("masters of the change: %w", err)
		}
		ms, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (dispatch.Master, error) { return scanMaster(r) })
		if err != nil {
			return fmt.Errorf("masters of the change: %w", err)
		}
		c.Masters = make(map[int64]dispatch.Master, len(ms))
		for _, m := range ms {
			c.Masters[m.UserID] = m
		}
	}
	return enqueueTx(ctx, tx, tell(c))
}
