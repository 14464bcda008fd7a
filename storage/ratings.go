package storage

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"switchboard/domain"
	"switchboard/domain/dispatch"
)

// Customers' ratings of finished orders (order_ratings, migration 00047):
// Orders.Rate records one, Orders.Comment gives it the customer's comment
// after the stars, Orders.Ratings reads them for /orders, and a
// master's record (their ratings over the last dispatch.RatingWindow)
// ranks them among a distribution step's candidates (pick, in offers.go)
// and shows in /masters (Masters.Roster).

const ratingColumns = `order_id, master_id, stars, comment, rated_at`

func scanRating(row pgx.Row) (dispatch.Rating, error) {
	var (
		r       dispatch.Rating
		comment pgtype.Text
		at      pgtype.Timestamptz
	)
	if err := row.Scan(&r.OrderID, &r.MasterID, &r.Stars, &comment, &at); err != nil {
		return dispatch.Rating{}, err
	}
	r.Comment, r.At = comment.String, tsValue(at)
	return r, nil
}

// ratingsOf selects the ratings of master m (an alias of masters) within
// the window: window is the SQL of the window in microseconds, a
// parameter. order_ratings_master answers it alone.
func ratingsOf(window string) string {
	return `FROM order_ratings r WHERE r.master_id = m.user_id AND r.rated_at > now() - ` + window + ` * interval '1 microsecond'`
}

// ratingRecord joins each master (alias m) to their record over the
// window: rec.n ratings, rec.avg their average stars (NULL with none). An
// aggregate without GROUP BY is one row for every master, rated or not,
// so the join drops none.
func ratingRecord(window string) string {
	return `
CROSS JOIN LATERAL (SELECT count(*) AS n, avg(r.stars) AS avg ` + ratingsOf(window) + `) rec`
}

// ratingRank is dispatch.RankOf in SQL over a record of n ratings
// averaging avg (SQL expressions), with the policy's constants as
// parameters (minN: MinRatings, step: RatingStep, unrated: UnratedRank),
// which rankArgs gives in that order. avg of an integer column is numeric,
// whose round() goes half away from zero, as math.Round does; a tie (an
// average of k/4 stars) is exact in both.
func ratingRank(n, avg, minN, step, unrated string) string {
	return `CASE WHEN ` + n + ` >= ` + minN + ` THEN round(` + avg + ` / ` + step + `::numeric) * ` + step + `::numeric ELSE ` +
		unrated + `::numeric END`
}

// masterRank is master m's rank from their ratings within the window, a
// scalar subquery: in pick's ORDER BY it is computed only for the
// candidates left after the other conditions, and it adds less to a plan
// of the statement than a lateral join would (0.05 ms against 0.1 ms;
// pgx prepares it once per connection, and PostgreSQL plans it anew
// only for its first executions there).
func masterRank(window, minN, step, unrated string) string {
	return `(SELECT ` + ratingRank("count(*)", "avg(r.stars)", minN, step, unrated) + ` ` + ratingsOf(window) + `)`
}

// rankArgs are the parameters of masterRank: the window, then the rank's
// constants.
func rankArgs() []any {
	return []any{micros(dispatch.RatingWindow), dispatch.MinRatings, dispatch.RatingStep, dispatch.UnratedRank}
}

// recordColumns reads ratingRecord's rec as a dispatch.Record.
const recordColumns = `rec.n, COALESCE(rec.avg, 0)::float8`

// Rate records the customer's rating of a finished order, of the master
// assigned to it; see dispatch.Orders. It is one conditional INSERT: the
// order's state, master and customer are read in it, and a rating already
// there, or one another replica is inserting for the same press, makes it
// insert nothing (the primary key, ON CONFLICT waiting for the other
// insert's outcome). DONE and CLOSED orders change neither state backwards
// nor master, so what the statement read of the order still holds at
// commit; its customer does change (/forget and a reissued link unlink
// them), so the order's row is read FOR SHARE, as Comment reads it: such
// an UPDATE waits for this rating, or goes first and leaves the rater no
// order of theirs to rate.
func (s *Orders) Rate(ctx context.Context, orderID, customerID int64, stars int, comment string, tell domain.Render[dispatch.Changed]) (dispatch.Rating, bool, error) {
	return dispatchChange(ctx, s.db, "rate order", orderID, func(tx pgx.Tx) (dispatch.Rating, dispatch.Changed, error) {
		r, err := scanRating(tx.QueryRow(ctx, `
INSERT INTO order_ratings (order_id, master_id, stars, comment)
(SELECT o.id, o.master_id, $2, NULLIF($3::text, '')
FROM orders o
WHERE o.id = $1 AND o.customer_id = $4 AND o.state IN ('DONE', 'CLOSED') AND o.master_id IS NOT NULL
FOR SHARE OF o)
ON CONFLICT (order_id) DO NOTHING
RETURNING `+ratingColumns, orderID, stars, comment, customerID))
		if err != nil || tell == nil {
			return r, dispatch.Changed{}, err
		}
		o, err := orderByID(ctx, tx, orderID)
		return r, dispatch.Changed{Order: o, Rating: &r}, err
	}, func(ctx context.Context) (dispatch.Rating, error) { return s.rateAsIs(ctx, orderID, customerID) }, tell)
}

// rateAsIs is what a refused Rate returns: dispatch.ErrNotCustomer when
// the order is not customerID's (whether or not it is rated: the rating is
// none of their business), else ratingAsIs.
func (s *Orders) rateAsIs(ctx context.Context, orderID, customerID int64) (dispatch.Rating, error) {
	var theirs bool
	err := s.pool.QueryRow(ctx, `SELECT customer_id IS NOT DISTINCT FROM $2 FROM orders WHERE id = $1`, orderID, customerID).Scan(&theirs)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return dispatch.Rating{}, fmt.Errorf("order %d: %w", orderID, domain.ErrNotFound)
	case err != nil:
		return dispatch.Rating{}, fmt.Errorf("rate order %d: %w", orderID, err)
	case !theirs:
		return dispatch.Rating{}, fmt.Errorf("order %d: %w", orderID, dispatch.ErrNotCustomer)
	}
	return s.ratingAsIs(ctx, orderID)
}

// Comment gives the rating of order orderID the comment, if customerID is
// the order's customer and the rating has none yet; see dispatch.Orders.
// The order's row is read FOR SHARE first: /forget and a reissued link
// unlink the customer with an UPDATE of that row, which waits for this
// transaction and finds the comment it wrote (storage/forget.go clears it
// in the same statement), or goes first and leaves this one no customer
// to write for. The comment is one conditional UPDATE: the same reply
// handled twice, on one replica or two, takes turns on the rating's row,
// and the second finds a comment there and writes nothing.
func (s *Orders) Comment(ctx context.Context, orderID, customerID int64, comment string, tell domain.Render[dispatch.Changed]) (dispatch.Rating, bool, error) {
	return dispatchChange(ctx, s.db, "comment the rating of order", orderID, func(tx pgx.Tx) (dispatch.Rating, dispatch.Changed, error) {
		o, err := scanOrder(tx.QueryRow(ctx, `SELECT `+orderColumns+` FROM orders
WHERE id = $1 AND customer_id = $2 AND state IN ('DONE', 'CLOSED')
FOR SHARE`, orderID, customerID))
		if err != nil {
			return dispatch.Rating{}, dispatch.Changed{}, err
		}
		r, err := scanRating(tx.QueryRow(ctx, `
UPDATE order_ratings SET comment = $2
WHERE order_id = $1 AND comment IS NULL
RETURNING `+ratingColumns, orderID, comment))
		return r, dispatch.Changed{Order: o, Rating: &r}, err
	}, func(ctx context.Context) (dispatch.Rating, error) { return s.ratingAsIs(ctx, orderID) }, tell)
}

// ratingAsIs is what a refused Rate or Comment returns: the order's
// rating, zero if it has none, or domain.ErrNotFound if there is no such
// order.
func (s *Orders) ratingAsIs(ctx context.Context, orderID int64) (dispatch.Rating, error) {
	r, err := scanRating(s.pool.QueryRow(ctx, `SELECT `+ratingColumns+` FROM order_ratings WHERE order_id = $1`, orderID))
	if !errors.Is(err, pgx.ErrNoRows) {
		return r, err
	}
	var exists bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM orders WHERE id = $1)`, orderID).Scan(&exists); err != nil {
		return dispatch.Rating{}, err
	}
	if !exists {
		return dispatch.Rating{}, fmt.Errorf("order %d: %w", orderID, domain.ErrNotFound)
	}
	return dispatch.Rating{}, nil
}

// Ratings returns the ratings of those of the orders that have one.
func (s *Orders) Ratings(ctx context.Context, orderIDs []int64) (map[int64]dispatch.Rating, error) {
	list, err := queryAll(ctx, s.pool, func(r pgx.CollectableRow) (dispatch.Rating, error) { return scanRating(r) },
		`SELECT `+ratingColumns+` FROM order_ratings WHERE order_id = ANY ($1)`, orderIDs)
	if err != nil {
		return nil, fmt.Errorf("ratings of %d orders: %w", len(orderIDs), err)
	}
	out := make(map[int64]dispatch.Rating, len(list))
	for _, r := range list {
		out[r.OrderID] = r
	}
	return out, nil
}

// Record is the user's ratings as a master over the last
// dispatch.RatingWindow (zero if they have none, or are no master).
func (s *Masters) Record(ctx context.Context, userID int64) (dispatch.Record, error) {
	var rec dispatch.Record
	err := s.pool.QueryRow(ctx, `SELECT `+recordColumns+` FROM (SELECT $1::bigint AS user_id) m`+ratingRecord("$2"),
		userID, micros(dispatch.RatingWindow)).Scan(&rec.Count, &rec.Average)
	if err != nil {
		return rec, fmt.Errorf("record of master %d: %w", userID, err)
	}
	return rec, nil
}

// Roster lists masters by city, district (case-insensitively) and id, each
// with their record, from offset up to limit, and counts them all.
func (s *Masters) Roster(ctx context.Context, offset, limit int) ([]dispatch.RosterLine, int, error) {
	var (
		out   []dispatch.RosterLine
		total int
	)
	b := &pgx.Batch{}
	b.Queue(`SELECT `+masterColumns+`, `+recordColumns+masterFrom+ratingRecord("$3")+`
ORDER BY lower(m.city), lower(m.district), m.user_id
OFFSET $1 LIMIT $2`, max(offset, 0), max(limit, 0), micros(dispatch.RatingWindow)).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var (
				ms  masterScan
				rec dispatch.Record
			)
			if err := rows.Scan(append(ms.dest(), &rec.Count, &rec.Average)...); err != nil {
				return err
			}
			out = append(out, dispatch.RosterLine{Master: ms.master(), Record: rec})
		}
		return rows.Err()
	})
	b.Queue(`SELECT count(*) FROM masters`).QueryRow(func(row pgx.Row) error { return row.Scan(&total) })
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return nil, 0, fmt.Errorf("masters: %w", err)
	}
	return out, total, nil
}
