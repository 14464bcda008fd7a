package storage

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"switchboard/domain"
	"switchboard/domain/dispatch"
)

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

// MarkOrderStep sets the assigned master's step on the order; see
// dispatch.Repository.
func (s *Store) MarkOrderStep(ctx context.Context, orderID, masterID int64, step dispatch.Step, tell domain.Render[dispatch.Changed]) (dispatch.Order, bool, error) {
	q, ok := stepSQL[step]
	if !ok {
		return dispatch.Order{}, false, fmt.Errorf("mark step %q: unknown step", step)
	}
	return s.masterChange(ctx, "mark "+string(step), q, orderID, masterID, tell)
}

// ReturnOrder is the assigned master giving the order back, ASSIGNED →
// SEARCHING; see dispatch.Repository. The master's accepted offer stays
// ACCEPTED: distribution passes over masters holding one for the order.
func (s *Store) ReturnOrder(ctx context.Context, orderID, masterID int64, tell domain.Render[dispatch.Changed]) (dispatch.Order, bool, error) {
	return s.masterChange(ctx, "return", `
UPDATE orders SET state = 'SEARCHING', master_id = NULL, assigned_at = NULL, round = 1, unassignable_at = NULL,
    waiting = true, en_route_at = NULL, arrived_at = NULL, updated_at = now()
WHERE id = $1 AND master_id = $2 AND state = 'ASSIGNED'
RETURNING `+orderColumns, orderID, masterID, tell)
}

// masterChange runs a master's conditional statement on their order ($1
// the order, $2 the master) and writes what tell renders with it, the
// master's accepted offer as Changed.Assigned; ok false, with the order
// as it is, when the statement changed nothing.
func (s *Store) masterChange(ctx context.Context, what, sql string, orderID, masterID int64, tell domain.Render[dispatch.Changed]) (dispatch.Order, bool, error) {
	var o dispatch.Order
	err := s.WithTx(ctx, func(tx pgx.Tx) error {
		var err error
		if o, err = scanOrder(tx.QueryRow(ctx, sql, orderID, masterID)); err != nil {
			return err
		}
		c := dispatch.Changed{Order: o}
		if c.Assigned, err = assignedOffer(ctx, tx, orderID, masterID); err != nil {
			return err
		}
		return tellTx(ctx, tx, tell, c)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		o, err = s.Order(ctx, orderID)
		return o, false, err
	}
	if err != nil {
		return o, false, fmt.Errorf("%s order %d: %w", what, orderID, err)
	}
	return o, true, nil
}

// RecordOrderPhoto counts a photo of the finished work on the master's order
// done latest within `within`, while it has fewer than max; see
// dispatch.Repository.
func (s *Store) RecordOrderPhoto(ctx context.Context, masterID int64, within time.Duration, max int, tell domain.Render[dispatch.Changed]) (dispatch.Order, bool, error) {
	var o dispatch.Order
	err := s.WithTx(ctx, func(tx pgx.Tx) error {
		var err error
		o, err = scanOrder(tx.QueryRow(ctx, `
UPDATE orders SET photos = photos + 1, updated_at = now()
WHERE id = (SELECT id FROM orders WHERE master_id = $1 AND state IN ('DONE', 'CLOSED')
            AND done_at > now() - $2 * interval '1 microsecond' ORDER BY done_at DESC, id DESC LIMIT 1)
  AND photos < $3
RETURNING `+orderColumns, masterID, micros(within), max))
		if err != nil {
			return err
		}
		return tellTx(ctx, tx, tell, dispatch.Changed{Order: o})
	})
	if errors.Is(err, pgx.ErrNoRows) {
		o, err := scanOrder(s.pool.QueryRow(ctx, `SELECT `+orderColumns+` FROM orders
WHERE master_id = $1 AND state IN ('DONE', 'CLOSED') AND done_at > now() - $2 * interval '1 microsecond'
ORDER BY done_at DESC, id DESC LIMIT 1`, masterID, micros(within)))
		if errors.Is(err, pgx.ErrNoRows) {
			return dispatch.Order{}, false, nil
		}
		return o, false, err
	}
	if err != nil {
		return o, false, fmt.Errorf("record photo of master %d: %w", masterID, err)
	}
	return o, true, nil
}
