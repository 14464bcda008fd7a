package storage

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"switchboard/domain"
	"switchboard/domain/dispatch"
)

// Orders is the orders aggregate: the admins' orders and the offers that
// distribution makes of each to one master at a time (offers.go), the
// masters' answers and steps, the expiry watchdog's statement and the
// autoclose job's. It implements dispatch.Orders.
type Orders struct{ *db }

// Orders is the store of the dispatch orders and their offers.
func (s *Store) Orders() *Orders { return &Orders{s.db} }

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
	customerToken                                            pgtype.Text
	customerID                                               pgtype.Int8
	eta, lateTold                                            pgtype.Timestamptz
}

func (s *orderScan) dest() []any {
	return []any{&s.id, &s.createdBy, &s.city, &s.district, &s.skill, &s.price, &s.description, &s.state,
		&s.round, &s.unassignable, &s.masterID, &s.assigned, &s.done, &s.closed, &s.cancelled,
		&s.commission, &s.commissionDue, &s.commissionPaid, &s.created,
		&s.address, &s.name, &s.phone, &s.visitDate, &s.visitFrom, &s.visitTo, &s.enRoute, &s.arrived, &s.photos,
		&s.contactsPruned, &s.customerToken, &s.customerID, &s.eta, &s.lateTold}
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
		CustomerToken:  s.customerToken.String, CustomerID: s.customerID.Int64, ETA: tsValue(s.eta),
		LateTold: tsValue(s.lateTold),
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

// orderValues are the arguments Create stores a new order's optional
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

// A message to an order's customer is recorded as it is delivered: a
// reply to it is about that order.
// A message to an order's customer, and a relayed text to either side, is
// recorded as it is delivered: a reply to it is about that order. One
// hook per kind, each its own CTE (named after it), as delivery requires.
var (
	customerSentHook = orderMessageHook(domain.KindCustomer)
	relaySentHook    = orderMessageHook(domain.KindRelay)
)

func orderMessageHook(kind string) string {
	return kind + `_sent AS (
    INSERT INTO order_messages (chat_id, message_id, order_id)
    SELECT done.chat_id, done.message_id, done.ref FROM done
    WHERE done.kind = '` + kind + `' AND NOT done.edit AND done.message_id IS NOT NULL
      AND EXISTS (SELECT 1 FROM orders WHERE id = done.ref)
    ON CONFLICT DO NOTHING
)`
}

func scanOrder(row pgx.Row) (dispatch.Order, error) {
	var s orderScan
	if err := row.Scan(s.dest()...); err != nil {
		return dispatch.Order{}, err
	}
	return s.order(), nil
}

// orderByID reads order id on q, a pool or the transaction that changed it.
func orderByID(ctx context.Context, q rowQuerier, id int64) (dispatch.Order, error) {
	return scanOrder(q.QueryRow(ctx, `SELECT `+orderColumns+` FROM orders WHERE id = $1`, id))
}

// Create stores a new SEARCHING order, owed its first distribution
// step (it has no offer): if the step the service takes at once is lost,
// the replicas' recheck of owed orders takes it.
//
// An order is created once per source message: the same message again
// (its update run a second time after a replica died before the update's
// done-mark) returns the order it created, untold.
func (s *Orders) Create(ctx context.Context, n dispatch.NewOrder, tell domain.Render[dispatch.Changed]) (dispatch.Order, error) {
	var o dispatch.Order
	var srcChat *int64
	var srcID *int
	if n.Source != (domain.MessageRef{}) {
		srcChat, srcID = &n.Source.Chat, &n.Source.ID
	}
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		var err error
		o, err = scanOrder(tx.QueryRow(ctx, `
INSERT INTO orders (created_by, city, district, skill, price, description,
                    address, customer_name, customer_phone, visit_date, visit_from, visit_to,
                    source_chat_id, source_message_id, customer_token)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, NULLIF($15, ''))
ON CONFLICT (source_chat_id, source_message_id) WHERE source_chat_id IS NOT NULL DO NOTHING
RETURNING `+orderColumns, append(append([]any{n.CreatedBy, n.City, n.District, n.Skill, n.Price, n.Description}, orderValues(n)...), srcChat, srcID, n.CustomerToken)...))
		if errors.Is(err, pgx.ErrNoRows) {
			o, err = scanOrder(tx.QueryRow(ctx, `SELECT `+orderColumns+` FROM orders WHERE source_chat_id = $1 AND source_message_id = $2`,
				srcChat, srcID))
			return err
		}
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

// Get returns one order or domain.ErrNotFound.
func (s *Orders) Get(ctx context.Context, id int64) (dispatch.Order, error) {
	o, err := orderByID(ctx, s.pool, id)
	if err != nil {
		return o, fmt.Errorf("order %d: %w", id, interpretError(err))
	}
	return o, nil
}

// Open lists up to limit open orders (SEARCHING, ASSIGNED), then up to
// limit DONE ones, each oldest first, each with its open offer (at most
// one: offers_open_order) and the master of that offer, else the assigned
// master; and how many orders each of the two sections has. One query:
// the totals are counted over the same rows the lines are taken from, so
// they agree with them.
func (s *Orders) Open(ctx context.Context, limit int) (dispatch.OrderList, error) {
	rows, err := s.pool.Query(ctx, `
WITH listed AS (
    SELECT id, state = 'DONE' AS done, count(*) OVER w AS total, row_number() OVER (w ORDER BY id) AS place
    FROM orders
    WHERE state IN ('SEARCHING', 'ASSIGNED', 'DONE')
    WINDOW w AS (PARTITION BY state = 'DONE')
)
SELECT `+orderColumnsO+`, `+offerColumnsF+`, `+masterColumns+`, l.done, l.total
FROM listed l
JOIN orders o ON o.id = l.id
LEFT JOIN offers f ON f.order_id = o.id AND f.state IN `+openOffer+`
LEFT JOIN masters m ON m.user_id = COALESCE(f.master_id, o.master_id)
LEFT JOIN users u ON u.id = m.user_id
WHERE l.place <= $1
ORDER BY l.done, o.id`, limit)
	if err != nil {
		return dispatch.OrderList{}, fmt.Errorf("open orders: %w", err)
	}
	defer rows.Close()
	var (
		orow  orderScan
		frow  offerScan
		mrow  masterScan
		done  bool
		total int
		out   dispatch.OrderList
	)
	dest := slices.Concat(orow.dest(), frow.dest(), mrow.dest(), []any{&done, &total})
	for rows.Next() {
		mrow.skills = nil // a fresh slice per row: Scan may reuse the last one
		if err := rows.Scan(dest...); err != nil {
			return dispatch.OrderList{}, fmt.Errorf("open orders: %w", err)
		}
		if done {
			out.Done = total
		} else {
			out.Open = total
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
		out.Lines = append(out.Lines, line)
	}
	if err := rows.Err(); err != nil {
		return dispatch.OrderList{}, fmt.Errorf("open orders: %w", err)
	}
	return out, nil
}

// Complete moves ASSIGNED → DONE with the commission
// ceil(price × ratePercent / 100), computed in numeric, due after deadline;
// with masterID not zero only if the order is that master's. ok false, with
// the order as it is, if that did not hold.
func (s *Orders) Complete(ctx context.Context, id, masterID int64, ratePercent float64, deadline time.Duration, tell domain.Render[dispatch.Changed]) (dispatch.Order, bool, error) {
	return s.orderChange(ctx, "complete", id, masterID, tell, func(tx pgx.Tx) (dispatch.Order, error) {
		return scanOrder(tx.QueryRow(ctx, `
UPDATE orders SET state = 'DONE', done_at = now(), updated_at = now(),
    commission = ceil(price * $2::float8::numeric / 100)::bigint,
    commission_due_at = now() + $3 * interval '1 microsecond'
WHERE id = $1 AND state = 'ASSIGNED' AND ($4::bigint = 0 OR master_id = $4)
RETURNING `+orderColumns, id, ratePercent, micros(deadline), masterID))
	})
}

// Cancel moves SEARCHING or ASSIGNED → CANCELLED and withdraws its
// open offer in one transaction; ok false, with the order as it is, if it
// was in neither state.
//
// Locks are taken in Accept's order, offer before order, so a cancel racing
// an accept waits instead of deadlocking. The withdrawal runs again after
// the order's update: an NextOffer holding the order may have committed a
// new offer while the update waited for it.
func (s *Orders) Cancel(ctx context.Context, id, customerID int64, tell domain.Render[dispatch.Changed]) (dispatch.Order, []dispatch.Offer, bool, error) {
	const withdraw = `UPDATE offers SET state = 'WITHDRAWN', responded_at = now()
WHERE order_id = $1 AND state IN ` + openOffer
	// $2: the customer who cancels (0: an admin), only until their master
	// is on the way.
	const cancellable = `state IN ('SEARCHING', 'ASSIGNED')
  AND ($2 = 0 OR (customer_id = $2 AND en_route_at IS NULL AND arrived_at IS NULL))`
	var o dispatch.Order
	var withdrawn []dispatch.Offer
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		early, err := collectOffers(tx.Query(ctx, withdraw+`
  AND EXISTS (SELECT 1 FROM orders WHERE id = $1 AND `+cancellable+`)
RETURNING `+offerColumns, id, customerID))
		if err != nil {
			return err
		}
		o, err = scanOrder(tx.QueryRow(ctx, `
UPDATE orders SET state = 'CANCELLED', cancelled_at = now(), updated_at = now()
WHERE id = $1 AND `+cancellable+`
RETURNING `+orderColumns, id, customerID))
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
		o, err = s.Get(ctx, id)
		return o, nil, false, err
	}
	if err != nil {
		return o, nil, false, fmt.Errorf("cancel order %d: %w", id, err)
	}
	return o, withdrawn, true, nil
}

// searchingOrders, owedOrders and parkedOrders are Searching's
// queries, one per dispatch.Pass. The first two walk orders_searching;
// owedOrders reads on each row what dispatch.StepFacts.Owed reads: no
// open offer, and no unassignable report unless parked. Nothing marks an
// order when its offer ends, so an expiry or a decline writes no row of
// orders; the price is this walk, once a second. parkedOrders, the pass
// after every sweep, reads the few parked orders through orders_parked.
//
// $2..$4 are the dispatch.Gate: an order of a city outside its working
// hours is left out, so the recheck does not step it every second all
// night; it is still owed, and the first recheck after opening takes it.
//
// owedOrders ($5: dispatch.OwedRecheck) leaves out an order whose offer
// ended (was answered or expired: responded_at) within the last recheck
// period: the replica that ended it is taking its step now. Taken as
// well, every expiry's order was stepped two or three times at once by
// the passes after other offers ended and by the recheck (the step finding
// the order held, or reporting it unassignable again), which doubled the
// dispatch bench's steps and its expiry lag. If that step failed, the next
// recheck after the second takes the order. It also leaves out, for
// dispatch.FollowUpHeld ($7), an order whose offer another replica ($6 is
// the asker) expired while that replica's liveness lock is held: its
// follow-up is queued there, and a dead replica's is taken at once.
const (
	openNow = `
  AND CASE WHEN lower(o.city) = ANY ($2::text[]) THEN lower(o.city) <> ALL ($3::text[]) ELSE NOT $4::boolean END`
	searchingOrders = `
SELECT o.id FROM orders o
WHERE o.state = 'SEARCHING'
  AND NOT EXISTS (SELECT 1 FROM offers f WHERE f.order_id = o.id AND f.state IN ` + openOffer + `)` + openNow + `
ORDER BY o.id LIMIT $1`
	parkedOrders = `
SELECT o.id FROM orders o
WHERE o.state = 'SEARCHING' AND o.parked
  AND NOT EXISTS (SELECT 1 FROM offers f WHERE f.order_id = o.id AND f.state IN ` + openOffer + `)` + openNow + `
ORDER BY o.id LIMIT $1`
)

// owedOrders: see searchingOrders (a var: liveFollowers is built).
var owedOrders = `
WITH ` + liveFollowers + `
SELECT o.id FROM orders o
WHERE o.state = 'SEARCHING' AND (o.unassignable_at IS NULL OR o.parked)
  AND NOT EXISTS (SELECT 1 FROM offers f WHERE f.order_id = o.id
                  AND (f.state IN ` + openOffer + ` OR f.responded_at > now() - $5 * interval '1 microsecond'
                       OR f.ended_by IS DISTINCT FROM $6 AND f.responded_at > now() - $7 * interval '1 microsecond'
                          AND substring(f.ended_by FROM '#([0-9]{1,10})$')::bigint IN (SELECT n FROM live)))` + openNow + `
ORDER BY o.id LIMIT $1`

// nonNil passes a nil list as an empty SQL array, not NULL (with which
// ANY and ALL answer NULL).
func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// Searching lists SEARCHING orders with no open offer, oldest
// first, those pass reads; see dispatch.Pass.
func (s *Orders) Searching(ctx context.Context, limit int, pass dispatch.Pass, by string, gate dispatch.Gate) ([]int64, error) {
	args := []any{limit, nonNil(gate.Configured), nonNil(gate.Closed), gate.DefaultClosed}
	var q string
	switch pass {
	case dispatch.PassAll:
		q = searchingOrders
	case dispatch.PassParked:
		q = parkedOrders
	default:
		q, args = owedOrders, append(args, micros(dispatch.OwedRecheck), by, micros(dispatch.FollowUpHeld))
	}
	ids, err := queryAll(ctx, s.pool, pgx.RowTo[int64], q, args...)
	if err != nil {
		return nil, fmt.Errorf("searching orders: %w", err)
	}
	return ids, nil
}

// Autoclose moves DONE orders done at least after ago to CLOSED and
// returns their ids, ascending.
func (s *Orders) Autoclose(ctx context.Context, after time.Duration, tell domain.Render[dispatch.Changed]) ([]int64, error) {
	var ids []int64
	err := s.withTx(ctx, func(tx pgx.Tx) error {
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

// assignedOffer is the accepted offer of the order's master (nil when the
// order has none): the message the assigned master's steps edit. A master
// accepts an order at most once (distribution passes over one who gave it
// back), so there is at most one.
func assignedOffer(ctx context.Context, tx pgx.Tx, orderID, masterID int64) (*dispatch.Offer, error) {
	if masterID == 0 {
		return nil, nil
	}
	f, err := scanOffer(tx.QueryRow(ctx, `SELECT `+offerColumns+` FROM offers
WHERE order_id = $1 AND master_id = $2 AND state = 'ACCEPTED' ORDER BY id DESC LIMIT 1`, orderID, masterID))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("accepted offer of order %d: %w", orderID, err)
	}
	return &f, nil
}

// stepSQL sets each step's mark, only on an order ASSIGNED to the master
// ($2) whose step is not done; arriving marks the way there too if the
// master skipped it.
var stepSQL = map[dispatch.Step]string{
	dispatch.StepEnRoute: `
UPDATE orders SET en_route_at = now(), updated_at = now()
WHERE id = $1 AND master_id = $2 AND state = 'ASSIGNED' AND en_route_at IS NULL AND arrived_at IS NULL
RETURNING ` + orderColumns,
	dispatch.StepArrived: `
UPDATE orders SET arrived_at = now(), en_route_at = COALESCE(en_route_at, now()), updated_at = now()
WHERE id = $1 AND master_id = $2 AND state = 'ASSIGNED' AND arrived_at IS NULL
RETURNING ` + orderColumns,
}

// MarkStep sets the assigned master's step on the order; see
// dispatch.Orders.
func (s *Orders) MarkStep(ctx context.Context, orderID, masterID int64, step dispatch.Step, tell domain.Render[dispatch.Changed]) (dispatch.Order, bool, error) {
	q, ok := stepSQL[step]
	if !ok {
		return dispatch.Order{}, false, fmt.Errorf("mark step %q: unknown step", step)
	}
	return s.masterChange(ctx, "mark "+string(step), q, orderID, masterID, tell)
}

// EnRoute is the assigned master's On my way with their ETA (0: none);
// see dispatch.Orders.
func (s *Orders) EnRoute(ctx context.Context, orderID, masterID int64, eta time.Duration, tell domain.Render[dispatch.Changed]) (dispatch.Order, bool, error) {
	return s.orderChange(ctx, "mark en route", orderID, masterID, tell, func(tx pgx.Tx) (dispatch.Order, error) {
		return scanOrder(tx.QueryRow(ctx, `
UPDATE orders SET en_route_at = now(), eta_at = CASE WHEN $3 > 0 THEN now() + $3 * interval '1 microsecond' END, updated_at = now()
WHERE id = $1 AND master_id = $2 AND state = 'ASSIGNED' AND en_route_at IS NULL AND arrived_at IS NULL
RETURNING `+orderColumns, orderID, masterID, micros(eta)))
	})
}

// Unarrived lists ASSIGNED orders with a visit window, their master not
// arrived and their lateness not told; see dispatch.Orders. The window's
// end is the city's local time, which the service reads (it knows the
// cities' zones), so this reads every such order, the earliest visit
// first; they are few (assigned, not yet arrived).
func (s *Orders) Unarrived(ctx context.Context, limit int) ([]dispatch.Order, error) {
	list, err := queryAll(ctx, s.pool, func(r pgx.CollectableRow) (dispatch.Order, error) { return scanOrder(r) }, `
SELECT `+orderColumns+` FROM orders
WHERE state = 'ASSIGNED' AND arrived_at IS NULL AND late_told_at IS NULL AND visit_to IS NOT NULL
ORDER BY visit_date, visit_to, id
LIMIT $1`, limit)
	if err != nil {
		return nil, fmt.Errorf("unarrived orders: %w", err)
	}
	return list, nil
}

// MarkLate records order id's lateness as told; see dispatch.Orders.
func (s *Orders) MarkLate(ctx context.Context, id int64, tell domain.Render[dispatch.Changed]) (dispatch.Order, bool, error) {
	return s.orderChange(ctx, "mark late", id, 0, tell, func(tx pgx.Tx) (dispatch.Order, error) {
		return scanOrder(tx.QueryRow(ctx, `
UPDATE orders SET late_told_at = now(), updated_at = now()
WHERE id = $1 AND state = 'ASSIGNED' AND arrived_at IS NULL AND late_told_at IS NULL
RETURNING `+orderColumns, id))
	})
}

// Join makes userID the customer of the order with the link token; see
// dispatch.Orders. A link opened again by its customer tells them again;
// an order whose contacts retention cleared opens for nobody.
//
// messageID (0: unknown) is the /start message, recorded on the order:
// what a join tells rides in its transaction (tellTx), not under the
// update's outbox origin, so the same message handled again is found here
// and tells nothing, while a new /start by the customer is a new join.
func (s *Orders) Join(ctx context.Context, token string, userID int64, messageID int, tell domain.Render[dispatch.Changed]) (dispatch.Order, error) {
	var o dispatch.Order
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		var err error
		o, err = scanOrder(tx.QueryRow(ctx, `
UPDATE orders SET customer_id = $2, customer_joined_at = COALESCE(customer_joined_at, now()),
    customer_joined_by = NULLIF($3::bigint, 0), updated_at = now()
WHERE customer_token = $1 AND (customer_id IS NULL OR customer_id = $2) AND contacts_pruned_at IS NULL
  AND ($3::bigint = 0 OR customer_id IS DISTINCT FROM $2 OR customer_joined_by IS DISTINCT FROM $3::bigint)
RETURNING `+orderColumns, token, userID, int64(messageID)))
		if errors.Is(err, pgx.ErrNoRows) {
			var (
				other int64
				again bool
				row   orderScan
			)
			err = tx.QueryRow(ctx, `SELECT COALESCE(customer_id, 0), $2::bigint <> 0 AND customer_joined_by IS NOT DISTINCT FROM $2::bigint,
       `+orderColumns+` FROM orders WHERE customer_token = $1`, token, int64(messageID)).
				Scan(append([]any{&other, &again}, row.dest()...)...)
			switch {
			case errors.Is(err, pgx.ErrNoRows):
				return dispatch.ErrLinkInvalid
			case err != nil:
				return err
			case other == userID && again:
				// This /start joined already: its update runs again.
				o = row.order()
				return nil
			case other != 0 && other != userID:
				return dispatch.ErrLinkTaken
			}
			return dispatch.ErrLinkInvalid // retention closed it
		}
		if err != nil {
			return err
		}
		c := dispatch.Changed{Order: o}
		if c.Assigned, err = assignedOffer(ctx, tx, o.ID, o.MasterID); err != nil {
			return err
		}
		return tellTx(ctx, tx, tell, c)
	})
	if err != nil {
		return o, fmt.Errorf("join an order by its link: %w", err)
	}
	return o, nil
}

// Reissue gives order id a new link token and unlinks its customer; see
// dispatch.Orders. The same press (pressID) handled again finds the link
// it gave and returns the order as it is, telling nobody.
func (s *Orders) Reissue(ctx context.Context, id int64, token, pressID string, tell domain.Render[dispatch.Changed]) (dispatch.Order, error) {
	var o dispatch.Order
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		var was int64
		var by string
		if err := tx.QueryRow(ctx, `SELECT COALESCE(customer_id, 0), COALESCE(link_reissued_by, '') FROM orders WHERE id = $1 FOR UPDATE`,
			id).Scan(&was, &by); err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				return domain.ErrNotFound
			}
			return err
		}
		var err error
		if pressID != "" && by == pressID {
			o, err = orderByID(ctx, tx, id)
			return err
		}
		o, err = scanOrder(tx.QueryRow(ctx, `
UPDATE orders SET customer_token = $2, customer_id = NULL, customer_joined_at = NULL, customer_joined_by = NULL,
    link_reissued_by = NULLIF($3, ''), updated_at = now()
WHERE id = $1
RETURNING `+orderColumns, id, token, pressID))
		if err != nil {
			return err
		}
		c := dispatch.Changed{Order: o}
		if was != 0 {
			if c.Customer, err = customerOf(ctx, tx, was); err != nil {
				return err
			}
		}
		return tellTx(ctx, tx, tell, c)
	})
	if err != nil {
		return o, fmt.Errorf("reissue the link of order %d: %w", id, err)
	}
	return o, nil
}

// Return is the assigned master giving the order back, ASSIGNED →
// SEARCHING; see dispatch.Orders. The master's accepted offer stays
// ACCEPTED: distribution passes over masters holding one for the order.
func (s *Orders) Return(ctx context.Context, orderID, masterID int64, tell domain.Render[dispatch.Changed]) (dispatch.Order, bool, error) {
	return s.masterChange(ctx, "return", `
UPDATE orders SET state = 'SEARCHING', master_id = NULL, assigned_at = NULL, round = 1, unassignable_at = NULL,
    parked = false, en_route_at = NULL, arrived_at = NULL, updated_at = now()
WHERE id = $1 AND master_id = $2 AND state = 'ASSIGNED'
RETURNING `+orderColumns, orderID, masterID, tell)
}

// masterChange runs a master's conditional statement on their order ($1
// the order, $2 the master) and writes what tell renders with it, the
// master's accepted offer as Changed.Assigned; ok false, with the order
// as it is, when the statement changed nothing.
func (s *Orders) masterChange(ctx context.Context, what, sql string, orderID, masterID int64, tell domain.Render[dispatch.Changed]) (dispatch.Order, bool, error) {
	return s.orderChange(ctx, what, orderID, masterID, tell, func(tx pgx.Tx) (dispatch.Order, error) {
		return scanOrder(tx.QueryRow(ctx, sql, orderID, masterID))
	})
}

// orderChange is dispatchChange for a statement that moves an order
// (update): what changed is the order and the accepted offer of master (0:
// of the order's master), and a refused change returns the order as it is.
func (s *Orders) orderChange(ctx context.Context, what string, id, master int64, tell domain.Render[dispatch.Changed],
	update func(pgx.Tx) (dispatch.Order, error)) (dispatch.Order, bool, error) {
	return dispatchChange(ctx, s.db, what+" order", id, func(tx pgx.Tx) (dispatch.Order, dispatch.Changed, error) {
		o, err := update(tx)
		if err != nil {
			return o, dispatch.Changed{}, err
		}
		m := master
		if m == 0 {
			m = o.MasterID
		}
		c := dispatch.Changed{Order: o}
		c.Assigned, err = assignedOffer(ctx, tx, o.ID, m)
		return o, c, err
	}, func(ctx context.Context) (dispatch.Order, error) { return s.Get(ctx, id) }, tell)
}

// RecordPhoto counts a photo of the finished work on the master's order
// done latest within `within`, while it has fewer than max; see
// dispatch.Orders.
func (s *Orders) RecordPhoto(ctx context.Context, masterID int64, messageID int, within time.Duration, max int, tell domain.Render[dispatch.Changed]) (dispatch.Order, bool, error) {
	var o dispatch.Order
	var ok bool
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		// The order, and whether this message's photo was counted on it.
		var row orderScan
		var counted bool
		err := tx.QueryRow(ctx, `
SELECT `+orderColumns+`, NULLIF($3, 0) = ANY (photo_messages) IS TRUE FROM orders
WHERE master_id = $1 AND state IN ('DONE', 'CLOSED') AND done_at > now() - $2 * interval '1 microsecond'
ORDER BY done_at DESC, id DESC LIMIT 1
FOR NO KEY UPDATE`, masterID, micros(within), messageID).Scan(append(row.dest(), &counted)...)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		o = row.order()
		if counted {
			// Counted and forwarded when this message was first handled.
			ok = true
			return nil
		}
		if o.Photos >= max {
			return nil
		}
		if o, err = scanOrder(tx.QueryRow(ctx, `
UPDATE orders SET photos = photos + 1, updated_at = now(),
    photo_messages = CASE WHEN $2 = 0 THEN photo_messages ELSE photo_messages || $2::bigint END
WHERE id = $1
RETURNING `+orderColumns, o.ID, messageID)); err != nil {
			return err
		}
		ok = true
		return tellTx(ctx, tx, tell, dispatch.Changed{Order: o})
	})
	if err != nil {
		return dispatch.Order{}, false, fmt.Errorf("record photo of master %d: %w", masterID, err)
	}
	return o, ok, nil
}

// RelayTarget is the order a message of the bot's was about; see
// dispatch.Orders. Telegram shows a message as it answers the send and the
// delivery hook records it only after, so a quick reply can find nothing.
// Then a send that records one (kind customer or relay) out to the chat
// under a live claim may be the message replied to:
// domain.ErrNotYetRecorded, which the inbox retries. Which message the row
// becomes is unknown until it is recorded, so any such row counts, and a
// reply to another of the bot's messages waits a retry too. That ends by
// itself, as claims lapse with the outbox's lease (10 s) while the inbox
// tries for about a minute, so no attempt count is needed here. A chat
// kept busy with such rows past the inbox's last attempt fails the update
// and its sender is told to send it again: answered by the memory chat
// instead, a relay would be lost unsaid. The look shares the statement
// and runs only when nothing is found.
func (s *Orders) RelayTarget(ctx context.Context, chatID, messageID int64) (int64, bool, error) {
	var id *int64
	var unrecorded bool
	err := s.pool.QueryRow(ctx, `
SELECT t.order_id, CASE WHEN t.order_id IS NULL THEN EXISTS (
    SELECT 1 FROM outbox o
    WHERE o.chat_id = $1 AND o.state = 'pending' AND o.claimed_until > now()
      AND o.kind IN ($3, $4) AND NOT o.edit) ELSE false END
FROM (SELECT (
    SELECT order_id FROM order_messages WHERE chat_id = $1 AND message_id = $2
    UNION ALL
    SELECT order_id FROM offers WHERE chat_id = $1 AND message_id = $2 AND state = 'ACCEPTED'
    LIMIT 1) AS order_id) t`, chatID, messageID, domain.KindCustomer, domain.KindRelay).Scan(&id, &unrecorded)
	switch {
	case err != nil:
		return 0, false, fmt.Errorf("the order of message %d in chat %d: %w", messageID, chatID, err)
	case id != nil:
		return *id, true, nil
	case unrecorded:
		return 0, false, fmt.Errorf("the order of message %d in chat %d: %w", messageID, chatID, domain.ErrNotYetRecorded)
	}
	return 0, false, nil
}

// Relay records a relayed text and writes its message to the other side;
// see dispatch.Orders. The order's row is locked so that its customer and
// master are read as they are when the text goes: a text is never
// relayed to a master who just gave the order back.
func (s *Orders) Relay(ctx context.Context, r dispatch.Relayed, senderID int64, src domain.MessageRef,
	render func(c dispatch.Changed, from, to dispatch.Customer) []domain.Message) (dispatch.Order, error) {
	var o dispatch.Order
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		var err error
		o, err = scanOrder(tx.QueryRow(ctx, `SELECT `+orderColumns+` FROM orders WHERE id = $1 FOR UPDATE`, r.OrderID))
		if err != nil {
			return err
		}
		if o.State != dispatch.Assigned || o.CustomerID == 0 || o.MasterID == 0 {
			return dispatch.ErrRelayClosed
		}
		customer, master := o.CustomerID, o.MasterID
		if (r.FromMaster && senderID != master) || (!r.FromMaster && senderID != customer) {
			return dispatch.ErrNotCustomer
		}
		tag, err := tx.Exec(ctx, `
INSERT INTO order_relays (order_id, from_master, sender_id, source_chat, source_id, text) VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (source_chat, source_id) DO NOTHING`, o.ID, r.FromMaster, senderID, src.Chat, src.ID, r.Text)
		if err != nil || tag.RowsAffected() == 0 {
			return err // relayed already: its update ran again
		}
		from, to := customer, master
		if r.FromMaster {
			from, to = master, customer
		}
		f, err := customerOf(ctx, tx, from)
		if err != nil {
			return err
		}
		t, err := customerOf(ctx, tx, to)
		if err != nil || f == nil || t == nil {
			return err
		}
		return enqueueTx(ctx, tx, render(dispatch.Changed{Order: o}, *f, *t))
	})
	if err != nil {
		return o, fmt.Errorf("relay on order %d: %w", r.OrderID, err)
	}
	return o, nil
}

// OnTheWay is the order masterID is on the way to; see dispatch.Orders.
// The row lock orders a position against Arrived: a position read before
// the master arrived is written before the stop that Arrived writes.
func (s *Orders) OnTheWay(ctx context.Context, masterID int64, share int, tell domain.Render[dispatch.Changed]) (dispatch.Order, bool, error) {
	return dispatchChange(ctx, s.db, "the way of master", masterID, func(tx pgx.Tx) (dispatch.Order, dispatch.Changed, error) {
		var sc orderScan
		var shared *int
		err := tx.QueryRow(ctx, `
SELECT `+orderColumns+`, where_share FROM orders
WHERE master_id = $1 AND state = 'ASSIGNED' AND en_route_at IS NOT NULL AND arrived_at IS NULL AND customer_id IS NOT NULL
ORDER BY en_route_at DESC, id DESC LIMIT 1 FOR UPDATE`, masterID).Scan(append(sc.dest(), &shared)...)
		if err != nil {
			return dispatch.Order{}, dispatch.Changed{}, err
		}
		o := sc.order()
		c := dispatch.Changed{Order: o}
		if shared != nil {
			c.Shared = *shared
		}
		if c.Shared != share {
			// Once a share: its moves, every few seconds, write nothing.
			if _, err := tx.Exec(ctx, `UPDATE orders SET where_share = $2 WHERE id = $1`, o.ID, share); err != nil {
				return o, c, err
			}
		}
		return o, c, nil
	}, func(context.Context) (dispatch.Order, error) { return dispatch.Order{}, nil }, tell)
}

// Thread is order id's relayed texts; see dispatch.Orders.
func (s *Orders) Thread(ctx context.Context, id int64) ([]dispatch.Relayed, error) {
	list, err := queryAll(ctx, s.pool, func(r pgx.CollectableRow) (dispatch.Relayed, error) {
		var x dispatch.Relayed
		err := r.Scan(&x.OrderID, &x.FromMaster, &x.Text, &x.At)
		return x, err
	}, `SELECT order_id, from_master, text, sent_at FROM order_relays WHERE order_id = $1 ORDER BY id`, id)
	if err != nil {
		return nil, fmt.Errorf("thread of order %d: %w", id, err)
	}
	return list, nil
}
