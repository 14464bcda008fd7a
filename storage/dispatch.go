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

// The dispatch workflow's stores: Orders (orders.go and offers.go,
// dispatch.Orders) and Masters (masters.go, dispatch.Masters), with what
// they share here (the columns, tellTx, why the system's own transitions
// commit asynchronously).
var (
	_ dispatch.Orders  = (*Orders)(nil)
	_ dispatch.Masters = (*Masters)(nil)
)

// Columns of each entity in the order its scanner reads them. The masters
// read joins users (m, u) for the names and the language.
const (
	offerColumns = `id, order_id, master_id, round, state, sent_at, expires_at, viewed_at, responded_at, chat_id, message_id`
	orderColumns = `id, created_by, city, district, skill, price, description, state, round, unassignable_at, master_id,
assigned_at, done_at, closed_at, cancelled_at, commission, commission_due_at, commission_paid_at, created_at,
address, customer_name, customer_phone, visit_date, visit_from, visit_to, en_route_at, arrived_at, photos,
contacts_pruned_at, customer_token, customer_id, eta_at, late_told_at`
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

// errNoop rolls a transaction back when a conditional statement found the
// row elsewhere: the method then reports ok=false, not an error.
var errNoop = errors.New("storage: nothing to do")

// dispatchAsync: the transitions the system makes on its own, an offer's
// expiry (ExpireOffers) and a distribution step (NextOffer: an offer
// created, a round moved on, an order parked or reported unassignable),
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
	orders := make([]int64, 0, len(c.Offers))
	for _, f := range c.Offers {
		if f.OrderID != c.Order.ID {
			orders = append(orders, f.OrderID)
		}
	}
	slices.Sort(orders)
	orders = slices.Compact(orders)
	if len(orders) > 0 {
		var err error
		c.Orders, err = readByID(ctx, tx, `SELECT `+orderColumns+` FROM orders WHERE id = ANY ($1)`, orders,
			scanOrder, func(o dispatch.Order) int64 { return o.ID })
		if err != nil {
			return fmt.Errorf("orders of the change: %w", err)
		}
	}
	if c.Assigned != nil {
		ids = append(ids, c.Assigned.MasterID)
	}
	if len(ids) > 0 {
		var err error
		c.Masters, err = readByID(ctx, tx, `SELECT `+masterColumns+masterFrom+`WHERE m.user_id = ANY ($1)`, ids,
			scanMaster, func(m dispatch.Master) int64 { return m.UserID })
		if err != nil {
			return fmt.Errorf("masters of the change: %w", err)
		}
	}
	if c.Customer == nil && c.Order.CustomerID != 0 {
		cu, err := customerOf(ctx, tx, c.Order.CustomerID)
		if err != nil {
			return fmt.Errorf("customer of the change: %w", err)
		}
		c.Customer = cu
	}
	return enqueueTx(ctx, tx, tell(c))
}

// customerOf reads an order's customer as their messages are written (nil
// if they are no longer a user).
func customerOf(ctx context.Context, tx pgx.Tx, userID int64) (*dispatch.Customer, error) {
	var cu dispatch.Customer
	err := tx.QueryRow(ctx, `SELECT u.id, coalesce(u.first_name, ''), `+masterLang+`, coalesce(u.time_zone, '') FROM users u WHERE u.id = $1`, userID).
		Scan(&cu.UserID, &cu.FirstName, &cu.Lang, &cu.Zone)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &cu, nil
}

// dispatchChange runs one of a master's or an admin's conditional
// statements on the dispatch tables (step: the statement, returning the
// row it moved and what changed) in a transaction with what tell renders
// of it. A statement that matched nothing (pgx.ErrNoRows) changed nothing:
// asIs reads the row as it is, and ok is false. what and id name the
// change in an error.
func dispatchChange[T any](ctx context.Context, s *db, what string, id int64, step func(pgx.Tx) (T, dispatch.Changed, error),
	asIs func(context.Context) (T, error), tell domain.Render[dispatch.Changed]) (T, bool, error) {
	var v T
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		var c dispatch.Changed
		var err error
		if v, c, err = step(tx); err != nil {
			return err
		}
		return tellTx(ctx, tx, tell, c)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		v, err = asIs(ctx)
		return v, false, err
	}
	if err != nil {
		return v, false, fmt.Errorf("%s %d: %w", what, id, err)
	}
	return v, true, nil
}

// readByID reads the rows query returns for ids ($1), scanned by scan,
// into a map by their id (key).
func readByID[T any](ctx context.Context, tx pgx.Tx, query string, ids []int64, scan func(pgx.Row) (T, error), key func(T) int64) (map[int64]T, error) {
	list, err := queryAll(ctx, tx, func(r pgx.CollectableRow) (T, error) { return scan(r) }, query, ids)
	if err != nil {
		return nil, err
	}
	out := make(map[int64]T, len(list))
	for _, v := range list {
		out[key(v)] = v
	}
	return out, nil
}
