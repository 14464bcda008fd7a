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

// Masters is the masters aggregate: registration, a master's profile,
// stats and pause, and their commission: the overdue block and /paid,
// which settles it. It implements dispatch.Masters.
type Masters struct{ *db }

// Masters is the store of the dispatch masters.
func (s *Store) Masters() *Masters { return &Masters{s.db} }

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

// Save registers a master or updates their city, district and
// skills; created is true on insert. A user that does not exist is
// domain.ErrNotFound.
func (s *Masters) Save(ctx context.Context, userID int64, city, district string, skills []string) (dispatch.Master, bool, error) {
	if skills == nil {
		skills = []string{}
	}
	var created bool
	var ms masterScan
	err := s.withTx(ctx, func(tx pgx.Tx) error {
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
// owed a step (parked), in the transaction that made them a candidate:
// registered, moved, resumed or unblocked. The service also wakes a pass
// at once; the mark is what a lost wake-up leaves behind.
func reviveOrders(ctx context.Context, tx pgx.Tx, master int64) error {
	_, err := tx.Exec(ctx, `
UPDATE orders o SET parked = true
FROM masters m
WHERE m.user_id = $1 AND m.active AND m.blocked_at IS NULL
  AND o.state = 'SEARCHING' AND o.unassignable_at IS NOT NULL AND NOT o.parked
  AND lower(o.city) = lower(m.city) AND lower(o.district) = lower(m.district) AND o.skill = ANY (m.skills)
  AND NOT EXISTS (SELECT 1 FROM offers f WHERE f.order_id = o.id AND f.master_id = m.user_id AND f.state IN ('DECLINED', 'ACCEPTED'))`, master)
	if err != nil {
		return fmt.Errorf("orders master %d may take: %w", master, err)
	}
	return nil
}

// Get returns a master or domain.ErrNotFound.
func (s *Masters) Get(ctx context.Context, userID int64) (dispatch.Master, error) {
	m, err := scanMaster(s.pool.QueryRow(ctx, `SELECT `+masterColumns+masterFrom+`WHERE m.user_id = $1`, userID))
	if err != nil {
		return m, fmt.Errorf("master %d: %w", userID, interpretError(err))
	}
	return m, nil
}

// ByUsername finds a master by Telegram username, case-insensitively
// (a leading @ is ignored); domain.ErrNotFound if none.
func (s *Masters) ByUsername(ctx context.Context, username string) (dispatch.Master, error) {
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

// queueStateCounts queues query, which returns (state, count) rows, in b
// and returns the map the rows fill when b is sent: every state in states,
// zero unless a row counts it.
func queueStateCounts[S ~string](b *pgx.Batch, query string, userID int64, states []S) map[S]int {
	counts := make(map[S]int, len(states))
	for _, k := range states {
		counts[k] = 0
	}
	b.Queue(query, userID).Query(func(rows pgx.Rows) error {
		var state string
		var n int
		_, err := pgx.ForEachRow(rows, []any{&state, &n}, func() error {
			counts[S(state)] = n
			return nil
		})
		return err
	})
	return counts
}

// Stats counts the master's offers by state and their assigned
// orders by state (every state present, zero if none), with the unpaid
// commission. A user who is not a master gets zeros.
func (s *Masters) Stats(ctx context.Context, userID int64) (dispatch.MasterStats, error) {
	b := &pgx.Batch{}
	st := dispatch.MasterStats{
		Offers: queueStateCounts(b, `SELECT state, count(*) FROM offers WHERE master_id = $1 GROUP BY state`, userID, dispatch.OfferStates),
		Orders: queueStateCounts(b, `SELECT state, count(*) FROM orders WHERE master_id = $1 GROUP BY state`, userID, dispatch.OrderStates),
	}
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

// SetActive pauses or resumes a master; false if they already were so,
// domain.ErrNotFound if the user is not a master.
func (s *Masters) SetActive(ctx context.Context, userID int64, active bool) (bool, error) {
	var changed bool
	err := s.withTx(ctx, func(tx pgx.Tx) error {
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

// BlockOverdue blocks every unblocked master owing commission past its
// deadline and returns them, by id, with all they owe, and withdraws the
// open offers of every blocked master in the same transaction. It locks
// the masters first and re-reads the debts in a later statement, so a
// settlement committed meanwhile is seen and its master is not blocked;
// a second run (here or on another replica) finds them blocked already
// and their offers withdrawn.
//
// The withdrawal comes after the block, in a later statement: an Accept
// holding a master's row (FOR SHARE, see AcceptOffer) has committed by
// then and its offer is no longer open, and one that comes after waits
// for this transaction and finds the master blocked. It takes the offers
// of every blocked master, not only of those blocked now, so an offer a
// blocked master still holds, however it came to be, is withdrawn at the
// next run.
func (s *Masters) BlockOverdue(ctx context.Context, tell domain.Render[dispatch.Changed]) ([]dispatch.Debt, []dispatch.Offer, error) {
	var debts []dispatch.Debt
	var withdrawn []dispatch.Offer
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		var err error
		if debts, err = blockOverdue(ctx, tx); err != nil {
			return err
		}
		if withdrawn, err = collectOffers(tx.Query(ctx, `
UPDATE offers f SET state = 'WITHDRAWN', responded_at = now()
FROM masters m
WHERE f.state IN `+openOffer+` AND m.user_id = f.master_id AND m.blocked_at IS NOT NULL
RETURNING `+offerColumnsF)); err != nil {
			return err
		}
		if len(debts) == 0 && len(withdrawn) == 0 {
			return nil
		}
		return tellTx(ctx, tx, tell, dispatch.Changed{Debts: debts, Offers: withdrawn})
	})
	if err != nil {
		return nil, nil, fmt.Errorf("block overdue masters: %w", err)
	}
	return debts, withdrawn, nil
}

// blockOverdue is BlockOverdue's block: the masters it blocked, with what
// they owe.
func blockOverdue(ctx context.Context, tx pgx.Tx) ([]dispatch.Debt, error) {
	rows, err := tx.Query(ctx, `
SELECT m.user_id FROM masters m
WHERE m.blocked_at IS NULL
  AND EXISTS (SELECT 1 FROM orders o WHERE o.master_id = m.user_id AND `+unpaid("o")+` AND o.commission_due_at <= now())
ORDER BY m.user_id
FOR NO KEY UPDATE OF m`)
	if err != nil {
		return nil, err
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil || len(ids) == 0 {
		return nil, err
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
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (dispatch.Debt, error) {
		var d dispatch.Debt
		err := row.Scan(&d.MasterID, &d.Amount, &d.Overdue, &d.Orders)
		return d, err
	})
}

// SettleCommission marks all the master's unpaid commission paid and
// unblocks them, for the admin's message by; it returns what was settled
// (Overdue: the part past its deadline) and whether they were blocked.
// The message handled again settles nothing more: it returns what it
// settled the first time, and false. domain.ErrNotFound if the user is
// not a master.
func (s *Masters) SettleCommission(ctx context.Context, masterID int64, by domain.MessageRef, tell domain.Render[dispatch.Changed]) (dispatch.Debt, bool, error) {
	d := dispatch.Debt{MasterID: masterID}
	var wasBlocked bool
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		// The master's row first, as BlockOverdue locks it: one of the two
		// waits for the other.
		var blocked pgtype.Timestamptz
		if err := tx.QueryRow(ctx, `SELECT blocked_at FROM masters WHERE user_id = $1 FOR NO KEY UPDATE`, masterID).
			Scan(&blocked); err != nil {
			return interpretError(err)
		}
		if by != (domain.MessageRef{}) {
			// The message handled before: what it settled, nothing more.
			var settledFor int64
			var settledAt time.Time
			err := tx.QueryRow(ctx, `SELECT master_id, settled_at FROM commission_settlements WHERE chat_id = $1 AND message_id = $2`,
				by.Chat, by.ID).Scan(&settledFor, &settledAt)
			switch {
			case errors.Is(err, pgx.ErrNoRows):
			case err != nil:
				return err
			case settledFor != masterID:
				return nil
			default:
				rows, err := tx.Query(ctx, `SELECT id, commission, commission_due_at <= commission_paid_at FROM orders
WHERE master_id = $1 AND commission_paid_at = $2`, masterID, settledAt)
				if err != nil {
					return err
				}
				return collectDebt(rows, &d)
			}
		}
		wasBlocked = blocked.Valid
		rows, err := tx.Query(ctx, `
UPDATE orders SET commission_paid_at = now(), updated_at = now()
WHERE master_id = $1 AND `+unpaid("orders")+`
RETURNING id, commission, commission_due_at <= now()`, masterID)
		if err != nil {
			return err
		}
		if err := collectDebt(rows, &d); err != nil {
			return err
		}
		if by != (domain.MessageRef{}) {
			if _, err := tx.Exec(ctx, `INSERT INTO commission_settlements (chat_id, message_id, master_id, settled_at)
VALUES ($1, $2, $3, now())`, by.Chat, by.ID, masterID); err != nil {
				return err
			}
		}
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

// collectDebt adds the settled orders rows names (id, commission, whether
// it was overdue) to d.
func collectDebt(rows pgx.Rows, d *dispatch.Debt) error {
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
	return nil
}
