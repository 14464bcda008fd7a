package storage

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
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

// SaveMaster registers a master or updates their city, district and
// skills; created is true on insert. A user that does not exist is
// domain.ErrNotFound.
func (s *Store) SaveMaster(ctx context.Context, userID int64, city, district string, skills []string) (dispatch.Master, bool, error) {
	if skills == nil {
		skills = []string{}
	}
	var created bool
	var ms masterScan
	err := s.WithTx(ctx, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, `
WITH m AS (
    INSERT INTO masters AS m (user_id, city, district, skills) VALUES ($1, $2, $3, $4)
    ON CONFLICT (user_id) DO UPDATE SET
        city = EXCLUDED.city, district = EXCLUDED.district, skills = EXCLUDED.skills, updated_at = now()
    RETURNING m.*, (m.xmax = 0) AS created
)
SELECT `+masterColumns+`, m.created FROM m JOIN users u ON u.id = m.user_id`,
			userID, city, district, skills).Scan(append(ms.dest(), &created)...)
		if err != nil {
			return err
		}
		return reviveOrders(ctx, tx, userID)
	})
	if err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "23503" { // foreign_key_violation: no such user
			err = domain.ErrNotFound
		}
		return dispatch.Master{}, false, fmt.Errorf("save master %d: %w", userID, err)
	}
	return ms.master(), created, nil
}

// reviveOrders marks the unassignable orders that master may now take as
// owed a step (waiting), in the transaction that made them a candidate:
// registered, moved, resumed or unblocked. The service also wakes a pass
// at once; the mark is what a lost wake-up leaves behind.
func reviveOrders(ctx context.Context, tx pgx.Tx, master int64) error {
	_, err := tx.Exec(ctx, `
UPDATE orders o SET waiting = true
FROM masters m
WHERE m.user_id = $1 AND m.active AND m.blocked_at IS NULL
  AND o.state = 'SEARCHING' AND o.unassignable_at IS NOT NULL AND NOT o.waiting
  AND lower(o.city) = lower(m.city) AND lower(o.district) = lower(m.district) AND o.skill = ANY (m.skills)
  AND NOT EXISTS (SELECT 1 FROM offers f WHERE f.order_id = o.id AND f.master_id = m.user_id AND f.state IN ('DECLINED', 'ACCEPTED'))`, master)
	if err != nil {
		return fmt.Errorf("orders master %d may take: %w", master, err)
	}
	return nil
}

// Master returns a master or domain.ErrNotFound.
func (s *Store) Master(ctx context.Context, userID int64) (dispatch.Master, error) {
	m, err := scanMaster(s.pool.QueryRow(ctx, `SELECT `+masterColumns+masterFrom+`WHERE m.user_id = $1`, userID))
	if err != nil {
		return m, fmt.Errorf("master %d: %w", userID, interpretError(err))
	}
	return m, nil
}

// MasterByUsername finds a master by Telegram username, case-insensitively
// (a leading @ is ignored); domain.ErrNotFound if none.
func (s *Store) MasterByUsername(ctx context.Context, username string) (dispatch.Master, error) {
	username = strings.TrimPrefix(strings.TrimSpace(username), "@")
	if username == "" { // users without a username store '': never a match
		return dispatch.Master{}, fmt.Errorf("master @%s: %w", username, domain.ErrNotFound)
	}
	// A username moves between accounts only rarely; the latest holder wins.
	m, err := scanMaster(s.pool.QueryRow(ctx, `SELECT `+masterColumns+masterFrom+`
WHERE lower(u.username) = lower($1) ORDER BY u.updated_at DESC, u.id LIMIT 1`, username))
	if err != nil {
		return m, fmt.Errorf("master @%s: %w", username, interpretError(err))
	}
	return m, nil
}

// MasterStats counts the master's offers by state and their assigned
// orders by state (every state present, zero if none), with the unpaid
// commission. A user who is not a master gets zeros.
func (s *Store) MasterStats(ctx context.Context, userID int64) (dispatch.MasterStats, error) {
	st := dispatch.MasterStats{
		Offers: make(map[dispatch.OfferState]int, len(dispatch.OfferStates)),
		Orders: make(map[dispatch.OrderState]int, len(dispatch.OrderStates)),
	}
	for _, k := range dispatch.OfferStates {
		st.Offers[k] = 0
	}
	for _, k := range dispatch.OrderStates {
		st.Orders[k] = 0
	}
	b := &pgx.Batch{}
	b.Queue(`SELECT state, count(*) FROM offers WHERE master_id = $1 GROUP BY state`, userID).Query(func(rows pgx.Rows) error {
		var state string
		var n int
		_, err := pgx.ForEachRow(rows, []any{&state, &n}, func() error {
			st.Offers[dispatch.OfferState(state)] = n
			return nil
		})
		return err
	})
	b.Queue(`SELECT state, count(*) FROM orders WHERE master_id = $1 GROUP BY state`, userID).Query(func(rows pgx.Rows) error {
		var state string
		var n int
		_, err := pgx.ForEachRow(rows, []any{&state, &n}, func() error {
			st.Orders[dispatch.OrderState(state)] = n
			return nil
		})
		return err
	})
	var next pgtype.Timestamptz
	b.Queue(`SELECT COALESCE(sum(commission), 0)::bigint,
       COALESCE(sum(commission) FILTER (WHERE commission_due_at <= now()), 0)::bigint,
       min(commission_due_at)
FROM orders o WHERE o.master_id = $1 AND `+unpaid("o"), userID).QueryRow(func(row pgx.Row) error {
		return row.Scan(&st.Owed, &st.Overdue, &next)
	})
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return st, fmt.Errorf("stats of master %d: %w", userID, err)
	}
	st.NextDue = tsValue(next)
	return st, nil
}

// SetMasterActive pauses or resumes a master; false if they already were so,
// domain.ErrNotFound if the user is not a master.
func (s *Store) SetMasterActive(ctx context.Context, userID int64, active bool) (bool, error) {
	var changed bool
	err := s.WithTx(ctx, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, `
WITH m AS (
    UPDATE masters SET active = $2, updated_at = now() WHERE user_id = $1 AND active <> $2 RETURNING user_id
)
SELECT EXISTS (SELECT 1 FROM m) FROM masters WHERE user_id = $1`, userID, active).Scan(&changed)
		if err != nil || !changed || !active {
			return err
		}
		return reviveOrders(ctx, tx, userID)
	})
	if err != nil {
		return false, fmt.Errorf("set master %d active=%t: %w", userID, active, interpretError(err))
	}
	return changed, nil
}

// CreateOrder stores a new SEARCHING order, owed its first distribution
// step (waiting): if the step the service takes at once is lost, the
// replicas' recheck of waiting orders takes it.
func (s *Store) CreateOrder(ctx context.Context, n dispatch.NewOrder, tell domain.Render[dispatch.Changed]) (dispatch.Order, error) {
	var o dispatch.Order
	err := s.WithTx(ctx, func(tx pgx.Tx) error {
		var err error
		o, err = scanOrder(tx.QueryRow(ctx, `
INSERT INTO orders (created_by, city, district, skill, price, description, waiting,
                    address, customer_name, customer_phone, visit_date, visit_from, visit_to)
VALUES ($1, $2, $3, $4, $5, $6, true, $7, $8, $9, $10, $11, $12)
RETURNING `+orderColumns, append([]any{n.CreatedBy, n.City, n.District, n.Skill, n.Price, n.Description}, orderValues(n)...)...))
		if err != nil {
			return err
		}
		return tellTx(ctx, tx, tell, dispatch.Changed{Order: o})
	})
	if err != nil {
		return o, fmt.Errorf("create order: %w", err)
	}
	return o, nil
}

// Order returns one order or domain.ErrNotFound.
func (s *Store) Order(ctx context.Context, id int64) (dispatch.Order, error) {
	o, err := scanOrder(s.pool.QueryRow(ctx, `SELECT `+orderColumns+` FROM orders WHERE id = $1`, id))
	if err != nil {
		return o, fmt.Errorf("order %d: %w", id, interpretError(err))
	}
	return o, nil
}

// OpenOrders lists SEARCHING, ASSIGNED and DONE orders, oldest first, each
// with its open offer (at most one: offers_open_order) and the master of
// that offer, else the assigned master; one query.
func (s *Store) OpenOrders(ctx context.Context, limit int) ([]dispatch.OrderLine, error) {
	rows, err := s.pool.Query(ctx, `
SELECT `+orderColumnsO+`, `+offerColumnsF+`, `+masterColumns+`
FROM orders o
LEFT JOIN offers f ON f.order_id = o.id AND f.state IN `+openOffer+`
LEFT JOIN masters m ON m.user_id = COALESCE(f.master_id, o.master_id)
LEFT JOIN users u ON u.id = m.user_id
WHERE o.state IN ('SEARCHING', 'ASSIGNED', 'DONE')
ORDER BY o.id
LIMIT $1`, limit)
	if err != nil {
		return nil, fmt.Errorf("open orders: %w", err)
	}
	defer rows.Close()
	var (
		orow orderScan
		frow offerScan
		mrow masterScan
	)
	dest := slices.Concat(orow.dest(), frow.dest(), mrow.dest())
	var out []dispatch.OrderLine
	for rows.Next() {
		mrow.skills = nil // a fresh slice per row: Scan may reuse the last one
		if err := rows.Scan(dest...); err != nil {
			return nil, fmt.Errorf("open orders: %w", err)
		}
		line := dispatch.OrderLine{Order: orow.order()}
		if frow.id.Valid {
			f := frow.offer()
			line.Offer = &f
		}
		if mrow.userID.Valid {
			m := mrow.master()
			line.Master = &m
		}
		out = append(out, line)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("open orders: %w", err)
	}
	return out, nil
}

// CompleteOrder moves ASSIGNED → DONE with the commission
// ceil(price × ratePercent / 100), computed in numeric, due after deadline;
// with masterID not zero only if the order is that master's. ok false, with
// the order as it is, if that did not hold.
func (s *Store) CompleteOrder(ctx context.Context, id, masterID int64, ratePercent float64, deadline time.Duration, tell domain.Render[dispatch.Changed]) (dispatch.Order, bool, error) {
	var o dispatch.Order
	err := s.WithTx(ctx, func(tx pgx.Tx) error {
		var err error
		o, err = scanOrder(tx.QueryRow(ctx, `
UPDATE orders SET state = 'DONE', done_at = now(), updated_at = now(),
    commission = ceil(price * $2::float8::numeric / 100)::bigint,
    commission_due_at = now() + $3 * interval '1 microsecond'
WHERE id = $1 AND state = 'ASSIGNED' AND ($4::bigint = 0 OR master_id = $4)
RETURNING `+orderColumns, id, ratePercent, micros(deadline), masterID))
		if err != nil {
			return err
		}
		c := dispatch.Changed{Order: o}
		if c.Assigned, err = assignedOffer(ctx, tx, o.ID, o.MasterID); err != nil {
			return err
		}
		return tellTx(ctx, tx, tell, c)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		o, err = s.Order(ctx, id)
		return o, false, err
	}
	if err != nil {
		return o, false, fmt.Errorf("complete order %d: %w", id, err)
	}
	return o, true, nil
}

// CancelOrder moves SEARCHING or ASSIGNED → CANCELLED and withdraws its
// open offer in one transaction; ok false, with the order as it is, if it
// was in neither state.
//
// Locks are taken in Accept's order, offer before order, so a cancel racing
// an accept waits instead of deadlocking. The withdrawal runs again after
// the order's update: an NextOffer holding the order may have committed a
// new offer while the update waited for it.
func (s *Store) CancelOrder(ctx context.Context, id int64, tell domain.Render[dispatch.Changed]) (dispatch.Order, []dispatch.Offer, bool, error) {
	const withdraw = `UPDATE offers SET state = 'WITHDRAWN', responded_at = now()
WHERE order_id = $1 AND state IN ` + openOffer
	var o dispatch.Order
	var withdrawn []dispatch.Offer
	err := s.WithTx(ctx, func(tx pgx.Tx) error {
		early, err := collectOffers(tx.Query(ctx, withdraw+`
  AND EXISTS (SELECT 1 FROM orders WHERE id = $1 AND state IN ('SEARCHING', 'ASSIGNED'))
RETURNING `+offerColumns, id))
		if err != nil {
			return err
		}
		o, err = scanOrder(tx.QueryRow(ctx, `
UPDATE orders SET state = 'CANCELLED', cancelled_at = now(), updated_at = now()
WHERE id = $1 AND state IN ('SEARCHING', 'ASSIGNED')
RETURNING `+orderColumns, id))
		if errors.Is(err, pgx.ErrNoRows) {
			return errNoop
		}
		if err != nil {
			return err
		}
		late, err := collectOffers(tx.Query(ctx, withdraw+` RETURNING `+offerColumns, id))
		if err != nil {
			return err
		}
		withdrawn = append(early, late...)
		c := dispatch.Changed{Order: o, Offers: withdrawn}
		if c.Assigned, err = assignedOffer(ctx, tx, o.ID, o.MasterID); err != nil {
			return err
		}
		return tellTx(ctx, tx, tell, c)
	})
	if errors.Is(err, errNoop) {
		o, err = s.Order(ctx, id)
		return o, nil, false, err
	}
	if err != nil {
		return o, nil, false, fmt.Errorf("cancel order %d: %w", id, err)
	}
	return o, withdrawn, true, nil
}

// searchingOrders and waitingOrders are SearchingOrders' two queries.
// They are two texts, not one with `($2 OR o.waiting)`: a prepared
// statement's generic plan cannot use the partial index orders_waiting
// for that, and the pass after every expiry then read every SEARCHING
// order (10 000 in the dispatch bench, several passes a second) to find
// the few waiting ones.
//
// $2..$4 are the dispatch.Gate: an order of a city outside its working
// hours is left out, so the recheck does not step it every second all
// night; it is still waiting, and the first recheck after opening takes it.
const (
	openNow = `
  AND CASE WHEN lower(o.city) = ANY ($2::text[]) THEN lower(o.city) <> ALL ($3::text[]) ELSE NOT $4::boolean END`
	searchingOrders = `
SELECT o.id FROM orders o
WHERE o.state = 'SEARCHING'
  AND NOT EXISTS (SELECT 1 FROM offers f WHERE f.order_id = o.id AND f.state IN ` + openOffer + `)` + openNow + `
ORDER BY o.id LIMIT $1`
	waitingOrders = `
SELECT o.id FROM orders o
WHERE o.state = 'SEARCHING' AND o.waiting
  AND NOT EXISTS (SELECT 1 FROM offers f WHERE f.order_id = o.id AND f.state IN ` + openOffer + `)` + openNow + `
ORDER BY o.id LIMIT $1`
)

// nonNil passes a nil list as an empty SQL array, not NULL (with which
// ANY and ALL answer NULL).
func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// SearchingOrders lists SEARCHING orders with no open offer, oldest first;
// all false: only those waiting for a busy master.
func (s *Store) SearchingOrders(ctx context.Context, limit int, all bool, gate dispatch.Gate) ([]int64, error) {
	q := waitingOrders
	if all {
		q = searchingOrders
	}
	rows, err := s.pool.Query(ctx, q, limit, nonNil(gate.Configured), nonNil(gate.Closed), gate.DefaultClosed)
	if err != nil {
		return nil, fmt.Errorf("searching orders: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("searching orders: %w", err)
	}
	return ids, nil
}

// eligibleWhere selects the masters order $4's round $5 still has to go
// through: place ($1, $2) and skill ($3) match, active, not blocked, not
// offered this order in this round, and never declined it (a decline is
// final; an offer that expired unanswered may come again in round 2), nor
// accepted it (a master who took it and gave it back is never offered it
// again).
const eligibleWhere = `
WHERE m.active AND m.blocked_at IS NULL
  AND lower(m.city) = lower($1) AND lower(m.district) = lower($2) AND $3 = ANY (m.skills)
  AND NOT EXISTS (SELECT 1 FROM offers f WHERE f.order_id = $4 AND f.master_id = m.user_id
                  AND (f.round = $5 OR f.state = 'DECLINED'))
  AND NOT EXISTS (SELECT 1 FROM offers f WHERE f.order_id = $4 AND f.master_id = m.user_id AND f.state = 'ACCEPTED')`

// candidateWhere: those of them free now (no open offer).
const candidateWhere = eligibleWhere + `
  AND NOT EXISTS (SELECT 1 FROM offers f WHERE f.master_id = m.user_id AND f.state IN ` + openOffer + `)`

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

// NextOffer is one distribution step for an order; see
// dispatch.Repository. Holding the order's row, it locks the chosen
// master's row too (FOR NO KEY UPDATE, the lock its UPDATE takes, which
// unlike FOR UPDATE does not conflict with the key-share locks of foreign
// key checks), skipping rows other transactions hold. A candidate skipped
// only because it is locked makes the step Busy rather than move the round
// on or report the order unassignable.
//
// Nothing here trusts another transaction to finish its work: an order
// owed a step carries orders.waiting, written by the change that left it
// without an offer, and only a step that settles the order (an offer, the
// unassignable report) clears it. A step that finds the order's row held
// by another transaction leaves the flag to that transaction: if the
// holder settles the order it clears it, and if the holder is an expiry
// or a decline it sets it. A step that rolls back leaves it as it was.
// So the replicas' recheck of waiting orders finds every order a lost or
// skipped step left behind.
func (s *Store) NextOffer(ctx context.Context, orderID int64, sla time.Duration, gate dispatch.Gate, tell domain.Render[dispatch.Changed]) (dispatch.Offer, dispatch.Order, dispatch.Outcome, error) {
	var (
		f   dispatch.Offer
		o   dispatch.Order
		out dispatch.Outcome
	)
	err := s.WithTx(ctx, func(tx pgx.Tx) error {
		var err error
		f, o, out, err = offerStep(ctx, tx, orderID, sla, gate, tell)
		return err
	})
	if err != nil {
		return dispatch.Offer{}, o, out, fmt.Errorf("offer order %d: %w", orderID, err)
	}
	if out != dispatch.Offered {
		f = dispatch.Offer{}
	}
	return f, o, out, nil
}

// offerStep is NextOffer's transaction: it reads the facts, asks the
// dispatch policy what they mean, and writes that.
func offerStep(ctx context.Context, tx pgx.Tx, orderID int64, sla time.Duration, gate dispatch.Gate, tell domain.Render[dispatch.Changed]) (dispatch.Offer, dispatch.Order, dispatch.Outcome, error) {
	o, locked, err := lockOrder(ctx, tx, orderID)
	if err != nil {
		return dispatch.Offer{}, o, 0, err
	}
	if plan, done := dispatch.Admit(o, locked, gate); done {
		return dispatch.Offer{}, o, plan.Outcome, setWaiting(ctx, tx, o.ID, plan)
	}
	facts, err := stepFacts(ctx, tx, o.ID)
	if err != nil {
		return dispatch.Offer{}, o, 0, err
	}
	if plan, done := dispatch.Hold(o, facts); done {
		return dispatch.Offer{}, o, plan.Outcome, setWaiting(ctx, tx, o.ID, plan)
	}
	// A pick can name a master whose open offer of another order
	// committed while the pick ran: a row updated meanwhile is rechecked
	// against its new version, but the NOT EXISTS on offers still reads
	// the statement's older snapshot. The insert then finds the conflict
	// (offers_open_master) and inserts nothing; the next pick, a new
	// statement, sees that offer.
	for attempt := 0; ; attempt++ {
		round, p, err := pickRound(ctx, tx, o, facts)
		if err != nil {
			return dispatch.Offer{}, o, 0, fmt.Errorf("pick candidate: %w", err)
		}
		plan := dispatch.Decide(o, facts, round, p, attempt)
		switch plan.Outcome {
		case dispatch.Busy:
			return dispatch.Offer{}, o, plan.Outcome, setWaiting(ctx, tx, o.ID, plan)
		case dispatch.Offered:
			f, moved, ok, err := insertOffer(ctx, tx, o, plan, sla)
			if err != nil || !ok {
				if err != nil {
					return dispatch.Offer{}, o, 0, err
				}
				continue
			}
			return f, moved, plan.Outcome, tellTx(ctx, tx, tell, dispatch.Changed{Order: moved, Offers: []dispatch.Offer{f}})
		default:
			o, err = markUnassignable(ctx, tx, o, plan)
			if err != nil || plan.Outcome != dispatch.Unassignable {
				return dispatch.Offer{}, o, plan.Outcome, err
			}
			return dispatch.Offer{}, o, plan.Outcome, tellTx(ctx, tx, tell, dispatch.Changed{Order: o})
		}
	}
}

// lockOrder reads an order holding its row; locked false (with the row
// as it is) if another transaction holds it.
func lockOrder(ctx context.Context, tx pgx.Tx, orderID int64) (dispatch.Order, bool, error) {
	o, err := scanOrder(tx.QueryRow(ctx, `SELECT `+orderColumns+` FROM orders WHERE id = $1 FOR UPDATE SKIP LOCKED`, orderID))
	if !errors.Is(err, pgx.ErrNoRows) {
		return o, err == nil, err
	}
	// Locked by another transaction, or no such order.
	o, err = scanOrder(tx.QueryRow(ctx, `SELECT `+orderColumns+` FROM orders WHERE id = $1`, orderID))
	return o, false, interpretError(err)
}

// stepFacts reads what the policy needs of a locked order. Every write of
// the step comes after this statement, which also makes the transaction
// commit asynchronously (dispatchAsync).
func stepFacts(ctx context.Context, tx pgx.Tx, orderID int64) (dispatch.StepFacts, error) {
	var f dispatch.StepFacts
	err := tx.QueryRow(ctx, `
SELECT EXISTS (SELECT 1 FROM offers WHERE order_id = $1 AND state IN `+openOffer+`),
       EXISTS (SELECT 1 FROM offers WHERE order_id = $1 AND round = 1),
       (SELECT waiting FROM orders WHERE id = $1)
FROM `+asyncCommit, orderID).Scan(&f.Open, &f.OfferedInRound1, &f.Waiting)
	return f, err
}

// setWaiting writes the plan's waiting mark, if it changes one.
func setWaiting(ctx context.Context, tx pgx.Tx, orderID int64, plan dispatch.StepPlan) error {
	if !plan.SetWaiting {
		return nil
	}
	_, err := tx.Exec(ctx, `UPDATE orders SET waiting = $2 WHERE id = $1 AND waiting <> $2`, orderID, plan.Waiting)
	return err
}

// pickRound picks a candidate in the order's round, and in the next one
// if the policy escalates.
func pickRound(ctx context.Context, tx pgx.Tx, o dispatch.Order, facts dispatch.StepFacts) (int, dispatch.Pick, error) {
	p, err := pick(ctx, tx, o, o.Round)
	if err != nil {
		return o.Round, p, err
	}
	round, again := dispatch.Escalate(o.Round, facts, p)
	if again {
		p, err = pick(ctx, tx, o, round)
	}
	return round, p, err
}

// pick returns the candidate idle longest in round, locking their row
// (Pick.Master zero if none); Pick.Busy when a master the round has not
// reached yet is locked or busy with another order's offer: the round is
// not over, the order waits for them (the offer's end wakes distribution).
func pick(ctx context.Context, tx pgx.Tx, o dispatch.Order, round int) (dispatch.Pick, error) {
	var p dispatch.Pick
	args := []any{o.City, o.District, o.Skill, o.ID, round}
	err := tx.QueryRow(ctx, `SELECT m.user_id FROM masters m`+candidateWhere+`
ORDER BY m.last_offer_at NULLS FIRST, m.user_id
LIMIT 1
FOR NO KEY UPDATE OF m SKIP LOCKED`, args...).Scan(&p.Master)
	if !errors.Is(err, pgx.ErrNoRows) {
		return p, err
	}
	err = tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM masters m`+eligibleWhere+`)`, args...).Scan(&p.Busy)
	return p, err
}

// insertOffer offers the order to the plan's master and settles the order
// as the plan says; ok false if a racing transaction's open offer (of this
// order or this master) made the insert write nothing.
func insertOffer(ctx context.Context, tx pgx.Tx, o dispatch.Order, plan dispatch.StepPlan, sla time.Duration) (dispatch.Offer, dispatch.Order, bool, error) {
	// ON CONFLICT without a target takes every unique index as an arbiter,
	// the partial offers_open_order and offers_open_master included (a
	// target names only one): a racing transaction's open offer makes
	// this insert nothing instead of failing the transaction.
	f, err := scanOffer(tx.QueryRow(ctx, `
INSERT INTO offers (order_id, master_id, round, expires_at)
VALUES ($1, $2, $3, now() + $4 * interval '1 microsecond')
ON CONFLICT DO NOTHING
RETURNING `+offerColumns, o.ID, plan.Master, plan.Round, micros(sla)))
	if errors.Is(err, pgx.ErrNoRows) {
		return f, o, false, nil
	}
	if err != nil {
		return f, o, false, fmt.Errorf("insert offer: %w", err)
	}
	if _, err := tx.Exec(ctx, `UPDATE masters SET last_offer_at = now() WHERE user_id = $1`, plan.Master); err != nil {
		return f, o, false, err
	}
	if plan.Settle {
		o, err = scanOrder(tx.QueryRow(ctx, `UPDATE orders SET round = $2, unassignable_at = NULL, waiting = false, updated_at = now()
WHERE id = $1 RETURNING `+orderColumns, o.ID, plan.Round))
	}
	return f, o, err == nil, err
}

// markUnassignable writes the plan for an order nobody is left for: its
// round moved on, and its unassignable mark. The order as it is after.
func markUnassignable(ctx context.Context, tx pgx.Tx, o dispatch.Order, plan dispatch.StepPlan) (dispatch.Order, error) {
	if plan.Round != o.Round {
		if _, err := tx.Exec(ctx, `UPDATE orders SET round = $2, updated_at = now() WHERE id = $1 AND round = $3`,
			o.ID, plan.Round, o.Round); err != nil {
			return o, err
		}
	}
	if plan.MarkUnassignable {
		if _, err := tx.Exec(ctx, `UPDATE orders SET unassignable_at = coalesce(unassignable_at, now()), waiting = false,
updated_at = now() WHERE id = $1`, o.ID); err != nil {
			return o, err
		}
	}
	return scanOrder(tx.QueryRow(ctx, `SELECT `+orderColumns+` FROM orders WHERE id = $1`, o.ID))
}

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

// Offer returns one offer or domain.ErrNotFound.
func (s *Store) Offer(ctx context.Context, id int64) (dispatch.Offer, error) {
	f, err := scanOffer(s.pool.QueryRow(ctx, `SELECT `+offerColumns+` FROM offers WHERE id = $1`, id))
	if err != nil {
		return f, fmt.Errorf("offer %d: %w", id, interpretError(err))
	}
	return f, nil
}

// offerAsIs is what a refused offer transition returns: the offer as it
// is now (zero if there is none), ok false.
func (s *Store) offerAsIs(ctx context.Context, id int64) (dispatch.Offer, bool, error) {
	f, err := s.Offer(ctx, id)
	if errors.Is(err, domain.ErrNotFound) {
		return dispatch.Offer{}, false, nil
	}
	return f, false, err
}

// AcceptOffer is the one conditional statement on the offer (the master's, open,
// expires_at > now()) and, in the same transaction, the order's SEARCHING →
// ASSIGNED; if either finds nothing, the transaction rolls back and ok is
// false, with the offer and its order as they are (zero if no such offer).
func (s *Store) AcceptOffer(ctx context.Context, offerID, masterID int64, tell domain.Render[dispatch.Changed]) (dispatch.Offer, dispatch.Order, bool, error) {
	var f dispatch.Offer
	var o dispatch.Order
	err := s.WithTx(ctx, func(tx pgx.Tx) error {
		var err error
		f, err = scanOffer(tx.QueryRow(ctx, `
UPDATE offers SET state = 'ACCEPTED', responded_at = now()
WHERE id = $1 AND master_id = $2 AND state IN `+openOffer+` AND expires_at > now()
RETURNING `+offerColumns, offerID, masterID))
		if errors.Is(err, pgx.ErrNoRows) {
			return errNoop
		}
		if err != nil {
			return err
		}
		o, err = scanOrder(tx.QueryRow(ctx, `
UPDATE orders SET state = 'ASSIGNED', master_id = $2, assigned_at = now(), updated_at = now()
WHERE id = $1 AND state = 'SEARCHING'
RETURNING `+orderColumns, f.OrderID, masterID))
		if errors.Is(err, pgx.ErrNoRows) {
			return errNoop
		}
		if err != nil {
			return err
		}
		return tellTx(ctx, tx, tell, dispatch.Changed{Order: o, Offers: []dispatch.Offer{f}})
	})
	if errors.Is(err, errNoop) {
		f, _, err := s.offerAsIs(ctx, offerID)
		if err != nil || f.ID == 0 {
			return f, dispatch.Order{}, false, err
		}
		o, err := s.Order(ctx, f.OrderID)
		return f, o, false, err
	}
	if err != nil {
		return dispatch.Offer{}, dispatch.Order{}, false, fmt.Errorf("accept offer %d: %w", offerID, err)
	}
	return f, o, true, nil
}

// DeclineOffer moves the master's open offer to DECLINED and marks its order
// owed a step (waiting), in one statement; ok false otherwise, with the
// offer as it is.
func (s *Store) DeclineOffer(ctx context.Context, offerID, masterID int64, tell domain.Render[dispatch.Changed]) (dispatch.Offer, bool, error) {
	return s.answerOffer(ctx, "decline", `
WITH f AS (
    UPDATE offers SET state = 'DECLINED', responded_at = now()
    WHERE id = $1 AND master_id = $2 AND state IN `+openOffer+`
    RETURNING *
), o AS (
    -- even where it reads true already: see markWaiting
    UPDATE orders SET waiting = true FROM f
    WHERE orders.id = f.order_id AND orders.state = 'SEARCHING'
)
SELECT `+offerColumns+` FROM f`, offerID, masterID, tell)
}

// markWaiting marks the SEARCHING orders of offers that just ended as owed
// a distribution step, in the ending transaction, after the offers (the
// order Accept and Decline lock them in).
//
// It writes even where waiting reads true already: a step holding the
// order may be clearing it, having seen the offer this transaction ends
// as still open; an UPDATE whose snapshot skipped the row as "already
// waiting" would never wait for that step, and the order would be left
// with neither an offer nor the flag.
func markWaiting(ctx context.Context, tx pgx.Tx, ended []dispatch.Offer) error {
	ids := make([]int64, 0, len(ended))
	for _, f := range ended {
		ids = append(ids, f.OrderID)
	}
	slices.Sort(ids)
	_, err := tx.Exec(ctx, `UPDATE orders SET waiting = true WHERE id = ANY ($1) AND state = 'SEARCHING'`, ids)
	if err != nil {
		return fmt.Errorf("mark orders waiting: %w", err)
	}
	return nil
}

// ViewOffer moves the master's SENT offer to VIEWED; ok false otherwise, with
// the offer as it is.
func (s *Store) ViewOffer(ctx context.Context, offerID, masterID int64, tell domain.Render[dispatch.Changed]) (dispatch.Offer, bool, error) {
	return s.answerOffer(ctx, "view", `
UPDATE offers SET state = 'VIEWED', viewed_at = now()
WHERE id = $1 AND master_id = $2 AND state = 'SENT' AND expires_at > now()
RETURNING `+offerColumns, offerID, masterID, tell)
}

// answerOffer runs a master's conditional statement on their offer and
// writes what tell renders with it; ok false, with the offer as it is,
// when the statement changed nothing.
func (s *Store) answerOffer(ctx context.Context, what, sql string, offerID, masterID int64, tell domain.Render[dispatch.Changed]) (dispatch.Offer, bool, error) {
	var f dispatch.Offer
	err := s.WithTx(ctx, func(tx pgx.Tx) error {
		var err error
		if f, err = scanOffer(tx.QueryRow(ctx, sql, offerID, masterID)); err != nil {
			return err
		}
		return tellTx(ctx, tx, tell, dispatch.Changed{Offers: []dispatch.Offer{f}})
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return s.offerAsIs(ctx, offerID)
	}
	if err != nil {
		return f, false, fmt.Errorf("%s offer %d: %w", what, offerID, err)
	}
	return f, true, nil
}

// ExpireOffers is the seed's watchdog statement (its predicate is the
// offers_due index's); exactly the offers it moved return, and their
// orders are marked owed a step (waiting) in the same transaction.
//
// It commits asynchronously (see dispatchAsync): an expiry lost in a
// database crash leaves its offer open and past expires_at, so no Accept
// can take it and the next sweep expires it again, writing the closing
// edit and live-log line that were lost with it.
func (s *Store) ExpireOffers(ctx context.Context, tell domain.Render[dispatch.Changed]) ([]dispatch.Offer, error) {
	var offers []dispatch.Offer
	err := s.WithTx(ctx, func(tx pgx.Tx) error {
		var err error
		offers, err = collectOffers(tx.Query(ctx, `
UPDATE offers f SET state = 'EXPIRED', responded_at = now()
`+asyncFrom+`
WHERE f.state IN `+openOffer+` AND f.expires_at <= now()
RETURNING `+offerColumnsF))
		if err != nil || len(offers) == 0 {
			return err
		}
		if err := markWaiting(ctx, tx, offers); err != nil {
			return err
		}
		return tellTx(ctx, tx, tell, dispatch.Changed{Offers: offers})
	})
	if err != nil {
		return nil, fmt.Errorf("expire offers: %w", err)
	}
	return offers, nil
}

// NextOfferExpiry is the earliest expires_at of an open offer (false: none).
func (s *Store) NextOfferExpiry(ctx context.Context) (time.Time, bool, error) {
	var next pgtype.Timestamptz
	if err := s.pool.QueryRow(ctx, `SELECT min(expires_at) FROM offers WHERE state IN `+openOffer).Scan(&next); err != nil {
		return time.Time{}, false, fmt.Errorf("next offer expiry: %w", err)
	}
	return tsValue(next), next.Valid, nil
}

// BlockOverdueMasters blocks every unblocked master owing commission past its
// deadline and returns them, by id, with all they owe. It locks the
// masters first and re-reads the debts in a later statement, so a
// settlement committed meanwhile is seen and its master is not blocked;
// a second run (here or on another replica) finds them blocked already.
func (s *Store) BlockOverdueMasters(ctx context.Context, tell domain.Render[dispatch.Changed]) ([]dispatch.Debt, error) {
	var out []dispatch.Debt
	err := s.WithTx(ctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `
SELECT m.user_id FROM masters m
WHERE m.blocked_at IS NULL
  AND EXISTS (SELECT 1 FROM orders o WHERE o.master_id = m.user_id AND `+unpaid("o")+` AND o.commission_due_at <= now())
ORDER BY m.user_id
FOR NO KEY UPDATE OF m`)
		if err != nil {
			return err
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil || len(ids) == 0 {
			return err
		}
		rows, err = tx.Query(ctx, `
WITH blocked AS (
    UPDATE masters m SET blocked_at = now(), updated_at = now()
    WHERE m.user_id = ANY ($1) AND m.blocked_at IS NULL
      AND EXISTS (SELECT 1 FROM orders o WHERE o.master_id = m.user_id AND `+unpaid("o")+` AND o.commission_due_at <= now())
    RETURNING m.user_id
)
SELECT b.user_id, sum(o.commission)::bigint,
       COALESCE(sum(o.commission) FILTER (WHERE o.commission_due_at <= now()), 0)::bigint,
       array_agg(o.id ORDER BY o.id)
FROM blocked b JOIN orders o ON o.master_id = b.user_id AND `+unpaid("o")+`
GROUP BY b.user_id ORDER BY b.user_id`, ids)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (dispatch.Debt, error) {
			var d dispatch.Debt
			err := row.Scan(&d.MasterID, &d.Amount, &d.Overdue, &d.Orders)
			return d, err
		})
		if err != nil || len(out) == 0 {
			return err
		}
		return tellTx(ctx, tx, tell, dispatch.Changed{Debts: out})
	})
	if err != nil {
		return nil, fmt.Errorf("block overdue masters: %w", err)
	}
	return out, nil
}

// SettleCommission marks all the master's unpaid commission paid and
// unblocks them; it returns what was settled (Overdue: the part past its
// deadline) and whether they were blocked. domain.ErrNotFound if the user
// is not a master.
func (s *Store) SettleCommission(ctx context.Context, masterID int64, tell domain.Render[dispatch.Changed]) (dispatch.Debt, bool, error) {
	d := dispatch.Debt{MasterID: masterID}
	var wasBlocked bool
	err := s.WithTx(ctx, func(tx pgx.Tx) error {
		// The master's row first, as BlockOverdueMasters locks it: one of the two
		// waits for the other.
		var blocked pgtype.Timestamptz
		if err := tx.QueryRow(ctx, `SELECT blocked_at FROM masters WHERE user_id = $1 FOR NO KEY UPDATE`, masterID).
			Scan(&blocked); err != nil {
			return interpretError(err)
		}
		wasBlocked = blocked.Valid
		rows, err := tx.Query(ctx, `
UPDATE orders SET commission_paid_at = now(), updated_at = now()
WHERE master_id = $1 AND `+unpaid("orders")+`
RETURNING id, commission, commission_due_at <= now()`, masterID)
		if err != nil {
			return err
		}
		var id, amount int64
		var overdue bool
		if _, err := pgx.ForEachRow(rows, []any{&id, &amount, &overdue}, func() error {
			d.Orders = append(d.Orders, id)
			d.Amount += amount
			if overdue {
				d.Overdue += amount
			}
			return nil
		}); err != nil {
			return err
		}
		slices.Sort(d.Orders)
		if wasBlocked {
			if _, err = tx.Exec(ctx, `UPDATE masters SET blocked_at = NULL, updated_at = now()
WHERE user_id = $1 AND blocked_at IS NOT NULL`, masterID); err != nil {
				return err
			}
			if err := reviveOrders(ctx, tx, masterID); err != nil {
				return err
			}
		}
		return tellTx(ctx, tx, tell, dispatch.Changed{Debts: []dispatch.Debt{d}, WasBlocked: wasBlocked})
	})
	if err != nil {
		return dispatch.Debt{MasterID: masterID}, false, fmt.Errorf("settle commission of master %d: %w", masterID, err)
	}
	return d, wasBlocked, nil
}

// AutocloseOrders moves DONE orders done at least after ago to CLOSED and
// returns their ids, ascending.
func (s *Store) AutocloseOrders(ctx context.Context, after time.Duration, tell domain.Render[dispatch.Changed]) ([]int64, error) {
	var ids []int64
	err := s.WithTx(ctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `
UPDATE orders SET state = 'CLOSED', closed_at = now(), updated_at = now()
WHERE state = 'DONE' AND done_at <= now() - $1 * interval '1 microsecond'
RETURNING id`, micros(after))
		if err != nil {
			return err
		}
		if ids, err = pgx.CollectRows(rows, pgx.RowTo[int64]); err != nil || len(ids) == 0 {
			return err
		}
		slices.Sort(ids)
		return tellTx(ctx, tx, tell, dispatch.Changed{Closed: ids})
	})
	if err != nil {
		return nil, fmt.Errorf("autoclose orders: %w", err)
	}
	return ids, nil
}
