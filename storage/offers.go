package storage

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"switchboard/domain"
	"switchboard/domain/dispatch"
)

// An offer's delivery records its message, which later edits and the
// master's buttons name.
const offerSentHook = `
offer_sent AS (
    UPDATE offers f SET chat_id = done.chat_id, message_id = done.message_id
    FROM done WHERE done.kind = 'offer' AND NOT done.edit AND f.id = done.ref AND done.message_id IS NOT NULL
)`

// offerScan reads an offer's columns; every field is nullable so that it
// also reads the LEFT JOINed open offer of Open.
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

// NextOffer is one distribution step for an order; see
// dispatch.Orders. What the step does is the dispatch policy's
// (dispatch.Admit, Hold, Escalate, Decide); this reads the facts it takes
// and runs the statements of the plan it returns. Holding the order's
// row, it locks the chosen master's row too (FOR NO KEY UPDATE, the lock
// its UPDATE takes, which unlike FOR UPDATE does not conflict with the
// key-share locks of foreign key checks), skipping rows other transactions
// hold. A candidate skipped only because it is locked makes the step Busy
// rather than move the round on or report the order unassignable.
//
// Nothing here trusts another transaction to finish its work: whether an
// order is owed a step is read from its offers (dispatch.StepFacts.Owed):
// a SEARCHING order with no open offer is owed one unless it was reported
// unassignable since its last offer ended or is parked (orders.parked: a
// step found a master busy, or after the report a master who may take it
// came or a step found the city closed). So an expiry or a decline writes
// nothing on orders, and the replicas' recheck of owed orders finds every
// order a lost or skipped step left behind.
func (s *Orders) NextOffer(ctx context.Context, orderID int64, sla time.Duration, gate dispatch.Gate, tell domain.Render[dispatch.Changed]) (dispatch.Offer, dispatch.Order, dispatch.Outcome, error) {
	return s.nextOffer(ctx, orderID, sla, gate, tell, false)
}

// NextOwedOffer is NextOffer that ends with dispatch.Taken, having written
// nothing, when the order it holds has no open offer and is not owed a
// step: only a step's unassignable report settles such an order, and it
// came after whatever sent this step.
func (s *Orders) NextOwedOffer(ctx context.Context, orderID int64, sla time.Duration, gate dispatch.Gate, tell domain.Render[dispatch.Changed]) (dispatch.Offer, dispatch.Order, dispatch.Outcome, error) {
	return s.nextOffer(ctx, orderID, sla, gate, tell, true)
}

func (s *Orders) nextOffer(ctx context.Context, orderID int64, sla time.Duration, gate dispatch.Gate, tell domain.Render[dispatch.Changed], owed bool) (dispatch.Offer, dispatch.Order, dispatch.Outcome, error) {
	var (
		f   dispatch.Offer
		o   dispatch.Order
		out dispatch.Outcome
	)
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		var err error
		f, o, out, err = offerStep(ctx, tx, orderID, sla, gate, tell, owed)
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
// dispatch policy what they mean, and writes that; owed: NextOwedOffer's.
func offerStep(ctx context.Context, tx pgx.Tx, orderID int64, sla time.Duration, gate dispatch.Gate, tell domain.Render[dispatch.Changed], owed bool) (dispatch.Offer, dispatch.Order, dispatch.Outcome, error) {
	o, locked, err := lockOrder(ctx, tx, orderID)
	if err != nil {
		return dispatch.Offer{}, o, 0, err
	}
	if plan, done := dispatch.Admit(o, locked, gate); done {
		return dispatch.Offer{}, o, plan.Outcome, park(ctx, tx, o.ID, plan)
	}
	facts, err := stepFacts(ctx, tx, o.ID)
	if err != nil {
		return dispatch.Offer{}, o, 0, err
	}
	if owed && !facts.Open && !facts.Owed(o) {
		return dispatch.Offer{}, o, dispatch.Taken, nil
	}
	if plan, done := dispatch.Hold(o, facts); done {
		return dispatch.Offer{}, o, plan.Outcome, nil
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
			return dispatch.Offer{}, o, plan.Outcome, park(ctx, tx, o.ID, plan)
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
	o, err = orderByID(ctx, tx, orderID)
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
       (SELECT parked FROM orders WHERE id = $1)
FROM `+asyncCommit, orderID).Scan(&f.Open, &f.OfferedInRound1, &f.Parked)
	return f, err
}

// park marks the order parked, if the plan says so.
func park(ctx context.Context, tx pgx.Tx, orderID int64, plan dispatch.StepPlan) error {
	if !plan.Park {
		return nil
	}
	_, err := tx.Exec(ctx, `UPDATE orders SET parked = true WHERE id = $1 AND NOT parked`, orderID)
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

// pickCandidate is pick's statement: the free candidates ($1–$5 as in
// candidateWhere) by their rank from their customers' ratings
// (dispatch.RankOf; $6–$9, rankArgs), the highest first, then idle
// longest first. Each candidate's rank is one probe of
// order_ratings_master, so the step stays one indexed statement; the
// masters it sorts are those of one place and skill, as before.
var pickCandidate = `SELECT m.user_id FROM masters m` + candidateWhere + `
ORDER BY ` + masterRank("$6", "$7", "$8", "$9") + ` DESC, m.last_offer_at NULLS FIRST, m.user_id
LIMIT 1
FOR NO KEY UPDATE OF m SKIP LOCKED`

// pick returns the best-rated candidate in round and, among equals, the
// one idle longest, locking their row (Pick.Master zero if none);
// Pick.Busy when a master the round has not reached yet is locked or busy
// with another order's offer: the round is not over, the order waits for
// them (the offer's end wakes distribution).
func pick(ctx context.Context, tx pgx.Tx, o dispatch.Order, round int) (dispatch.Pick, error) {
	var p dispatch.Pick
	args := []any{o.City, o.District, o.Skill, o.ID, round}
	err := tx.QueryRow(ctx, pickCandidate, slices.Concat(args, rankArgs())...).Scan(&p.Master)
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
		o, err = scanOrder(tx.QueryRow(ctx, `UPDATE orders SET round = $2, unassignable_at = NULL, parked = false, updated_at = now()
WHERE id = $1 RETURNING `+orderColumns, o.ID, plan.Round))
	}
	return f, o, err == nil, err
}

// markUnassignable writes the plan for an order nobody is left for: its
// round moved on (only from the round the step read), and its unassignable
// mark. The order as it is after. One statement, so a step that reports
// the order writes one version of its row, not two.
func markUnassignable(ctx context.Context, tx pgx.Tx, o dispatch.Order, plan dispatch.StepPlan) (dispatch.Order, error) {
	if plan.Round == o.Round && !plan.MarkUnassignable {
		return orderByID(ctx, tx, o.ID)
	}
	return scanOrder(tx.QueryRow(ctx, `
UPDATE orders SET round = CASE WHEN round = $3 THEN $2 ELSE round END,
       unassignable_at = CASE WHEN $4 THEN coalesce(unassignable_at, now()) ELSE unassignable_at END,
       parked = CASE WHEN $4 THEN false ELSE parked END,
       updated_at = CASE WHEN round = $3 AND $2 <> $3 OR $4 THEN now() ELSE updated_at END
WHERE id = $1
RETURNING `+orderColumns, o.ID, plan.Round, o.Round, plan.MarkUnassignable))
}

// Offer returns one offer or domain.ErrNotFound.
func (s *Orders) Offer(ctx context.Context, id int64) (dispatch.Offer, error) {
	f, err := scanOffer(s.pool.QueryRow(ctx, `SELECT `+offerColumns+` FROM offers WHERE id = $1`, id))
	if err != nil {
		return f, fmt.Errorf("offer %d: %w", id, interpretError(err))
	}
	return f, nil
}

// offerAsIs is what a refused offer transition returns: the offer as it
// is now (zero if there is none).
func (s *Orders) offerAsIs(ctx context.Context, id int64) (dispatch.Offer, error) {
	f, err := s.Offer(ctx, id)
	if errors.Is(err, domain.ErrNotFound) {
		return dispatch.Offer{}, nil
	}
	return f, err
}

// AcceptOffer is the one conditional statement on the offer (the master's, open,
// expires_at > now(), the master not blocked) and, in the same transaction,
// the order's SEARCHING → ASSIGNED; if either finds nothing, the
// transaction rolls back and ok is false, with the offer and its order as
// they are (zero if no such offer).
//
// The statement holds the master's row FOR SHARE until the transaction
// ends: BlockOverdue's FOR NO KEY UPDATE of it waits for an accept that
// read the master unblocked, and then finds the offer taken, not open to
// withdraw; an accept that comes to the row while a block holds it waits
// and rereads it blocked. Without the lock the check would read the
// master as the statement's snapshot has them, not as a block committing
// meanwhile leaves them, and only the block's withdrawal of the offer
// would stand between the two.
func (s *Orders) AcceptOffer(ctx context.Context, offerID, masterID int64, tell domain.Render[dispatch.Changed]) (dispatch.Offer, dispatch.Order, bool, error) {
	var f dispatch.Offer
	var o dispatch.Order
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		var err error
		f, err = scanOffer(tx.QueryRow(ctx, `
WITH m AS (
    SELECT user_id FROM masters WHERE user_id = $2 AND blocked_at IS NULL FOR SHARE
)
UPDATE offers f SET state = 'ACCEPTED', responded_at = now()
FROM m
WHERE f.id = $1 AND f.master_id = m.user_id AND f.state IN `+openOffer+` AND f.expires_at > now()
RETURNING `+offerColumnsF, offerID, masterID))
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
		f, err := s.offerAsIs(ctx, offerID)
		if err != nil || f.ID == 0 {
			return f, dispatch.Order{}, false, err
		}
		o, err := s.Get(ctx, f.OrderID)
		return f, o, false, err
	}
	if err != nil {
		return dispatch.Offer{}, dispatch.Order{}, false, fmt.Errorf("accept offer %d: %w", offerID, err)
	}
	return f, o, true, nil
}

// DeclineOffer moves the master's open offer to DECLINED; ok false
// otherwise, with the offer as it is. Its order, with no open offer now,
// is owed a step (dispatch.StepFacts.Owed) without a write of its own.
func (s *Orders) DeclineOffer(ctx context.Context, offerID, masterID int64, tell domain.Render[dispatch.Changed]) (dispatch.Offer, bool, error) {
	return s.answerOffer(ctx, "decline", `
UPDATE offers SET state = 'DECLINED', responded_at = now()
WHERE id = $1 AND master_id = $2 AND state IN `+openOffer+`
RETURNING `+offerColumns, offerID, masterID, tell)
}

// ViewOffer moves the master's SENT offer to VIEWED; ok false otherwise, with
// the offer as it is.
func (s *Orders) ViewOffer(ctx context.Context, offerID, masterID int64, tell domain.Render[dispatch.Changed]) (dispatch.Offer, bool, error) {
	return s.answerOffer(ctx, "view", `
UPDATE offers SET state = 'VIEWED', viewed_at = now()
WHERE id = $1 AND master_id = $2 AND state = 'SENT' AND expires_at > now()
RETURNING `+offerColumns, offerID, masterID, tell)
}

// answerOffer runs a master's conditional statement on their offer and
// writes what tell renders with it; ok false, with the offer as it is,
// when the statement changed nothing.
func (s *Orders) answerOffer(ctx context.Context, what, sql string, offerID, masterID int64, tell domain.Render[dispatch.Changed]) (dispatch.Offer, bool, error) {
	return dispatchChange(ctx, s.db, what+" offer", offerID, func(tx pgx.Tx) (dispatch.Offer, dispatch.Changed, error) {
		f, err := scanOffer(tx.QueryRow(ctx, sql, offerID, masterID))
		return f, dispatch.Changed{Offers: []dispatch.Offer{f}}, err
	}, func(ctx context.Context) (dispatch.Offer, error) { return s.offerAsIs(ctx, offerID) }, tell)
}

// ExpireOffers is the seed's watchdog statement (its predicate is the
// offers_due index's); exactly the offers it moved return. Their orders
// are owed a step from then on (dispatch.StepFacts.Owed) with no write on
// orders: an expiry touches only the offers' rows and the outbox.
//
// It commits asynchronously (see dispatchAsync): an expiry lost in a
// database crash leaves its offer open and past expires_at, so no Accept
// can take it and the next sweep expires it again, writing the closing
// edit and live-log line that were lost with it.
//
// The transaction is three round trips: BEGIN travels with the statement,
// then the reads of the orders and masters its messages are rendered from
// (what tellTx reads), and COMMIT with the messages (two without tell). The
// expired offers stay locked from the first to the last, and another
// replica's sweep of the same deadline waits that long on them.
//
// by (ended_by) claims the offers' follow-up steps; see owedOrders.
func (s *Orders) ExpireOffers(ctx context.Context, by string, tell domain.Render[dispatch.Changed]) ([]dispatch.Offer, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("expire offers: %w", err)
	}
	// A connection released inside a transaction is closed by the pool,
	// so no error path below hands an open transaction to the next user.
	defer conn.Release()
	offers, err := expireOffers(ctx, conn, by, tell)
	if err != nil {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_, _ = conn.Exec(rctx, "ROLLBACK")
		return nil, fmt.Errorf("expire offers: %w", err)
	}
	return offers, nil
}

// expireOffers is ExpireOffers' transaction on conn.
func expireOffers(ctx context.Context, conn *pgxpool.Conn, by string, tell domain.Render[dispatch.Changed]) ([]dispatch.Offer, error) {
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue(`
UPDATE offers f SET state = 'EXPIRED', responded_at = now(), ended_by = NULLIF($1, '')
`+asyncFrom+`
WHERE f.state IN `+openOffer+` AND f.expires_at <= now()
RETURNING `+offerColumnsF, by)
	br := conn.SendBatch(ctx, b)
	_, err := br.Exec()
	var offers []dispatch.Offer
	if err == nil {
		offers, err = collectOffers(br.Query())
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	if len(offers) == 0 || tell == nil {
		_, err := conn.Exec(ctx, "COMMIT")
		return offers, err
	}
	c := dispatch.Changed{Offers: offers}
	if err := readChange(ctx, conn, &c); err != nil {
		return nil, err
	}
	msgs := tell(c)
	b = &pgx.Batch{}
	if len(msgs) > 0 {
		sql, args, err := insertMessagesSQL(msgs)
		if err != nil {
			return nil, err
		}
		b.Queue(sql, args...)
	}
	b.Queue("COMMIT")
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		return nil, fmt.Errorf("enqueue %d messages and commit: %w", len(msgs), err)
	}
	return offers, nil
}

// readChange reads the orders of an expiry's offers and the offers'
// masters into c, in one batch: what tellTx reads for a change.
func readChange(ctx context.Context, conn *pgxpool.Conn, c *dispatch.Changed) error {
	orderIDs := make([]int64, 0, len(c.Offers))
	masterIDs := make([]int64, 0, len(c.Offers))
	for _, f := range c.Offers {
		orderIDs = append(orderIDs, f.OrderID)
		masterIDs = append(masterIDs, f.MasterID)
	}
	b := &pgx.Batch{}
	b.Queue(`SELECT `+orderColumns+` FROM orders WHERE id = ANY ($1)`, orderIDs)
	b.Queue(`SELECT `+masterColumns+masterFrom+`WHERE m.user_id = ANY ($1)`, masterIDs)
	br := conn.SendBatch(ctx, b)
	err := readChanged(br, c)
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return err
}

func readChanged(br pgx.BatchResults, c *dispatch.Changed) error {
	rows, err := br.Query()
	if err != nil {
		return fmt.Errorf("orders of the change: %w", err)
	}
	orders, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (dispatch.Order, error) { return scanOrder(r) })
	if err != nil {
		return fmt.Errorf("orders of the change: %w", err)
	}
	if rows, err = br.Query(); err != nil {
		return fmt.Errorf("masters of the change: %w", err)
	}
	masters, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (dispatch.Master, error) { return scanMaster(r) })
	if err != nil {
		return fmt.Errorf("masters of the change: %w", err)
	}
	c.Orders = make(map[int64]dispatch.Order, len(orders))
	for _, o := range orders {
		c.Orders[o.ID] = o
	}
	c.Masters = make(map[int64]dispatch.Master, len(masters))
	for _, m := range masters {
		c.Masters[m.UserID] = m
	}
	return nil
}

// NextOfferExpiry is the earliest expires_at of an open offer (false: none).
func (s *Orders) NextOfferExpiry(ctx context.Context) (time.Time, bool, error) {
	var next pgtype.Timestamptz
	if err := s.pool.QueryRow(ctx, `SELECT min(expires_at) FROM offers WHERE state IN `+openOffer).Scan(&next); err != nil {
		return time.Time{}, false, fmt.Errorf("next offer expiry: %w", err)
	}
	return tsValue(next), next.Valid, nil
}
