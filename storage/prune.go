package storage

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"switchboard/domain/resume"
)

// Kinds of data the prune job deletes, each with its own retention
// (README "Data retention"), in the order Prune runs them: matches before
// the vacancies they free.
const (
	PruneGroupMessages   = "group_messages"   // RETAIN_GROUP_MESSAGES
	PruneRunContext      = "run_context"      // RETAIN_RUN_CONTEXT: cleared, the run stays
	PruneRawLogs         = "raw_logs"         // RETAIN_MEMORY
	PruneSummaries       = "summaries"        // RETAIN_MEMORY (lsm_storage)
	PruneVacancyMatches  = "vacancy_matches"  // RETAIN_VACANCY_MATCHES
	PruneVacancies       = "vacancies"        // RETAIN_VACANCY_MATCHES
	PruneSearchHits      = "search_hits"      // RETAIN_SEARCH_HITS
	PruneOrderContacts   = "order_contacts"   // RETAIN_ORDER_CONTACTS: cleared, the order stays
	PruneOutboxRows      = "outbox"           // OUTBOX_RETENTION
	PruneOutboxThrottles = "outbox_throttles" // a day: /status counts the last hour's
	PruneInbox           = "inbox"            // handled and failed updates, Retention.Inbox; pending ones stay
	PruneProfileDrafts   = "profile_drafts"   // drafts from a résumé nobody finished, resume.DraftTTL
	PruneMemoryRequests  = "memory_requests"  // corrections and forget confirmations past expires_at
)

// Retention is how long each kind is kept; 0 keeps it for ever.
type Retention struct {
	GroupMessages  time.Duration
	RunContext     time.Duration
	Memory         time.Duration // raw_logs and lsm_storage
	VacancyMatches time.Duration // final matches, and vacancies no match points to
	SearchHits     time.Duration
	// OrderContacts: the customer's address, name and phone of orders
	// CLOSED or CANCELLED longer ago are cleared.
	OrderContacts time.Duration
	Outbox        time.Duration
	// Inbox: handled and failed updates (the app keeps them a day: their
	// update_id only has to outlive Telegram's resending of an update not
	// acknowledged, which is 24 hours). Pending ones are never deleted.
	Inbox time.Duration
	// RecoveryWindow keeps SKIPPED matches recovery may still return,
	// whatever VacancyMatches says.
	RecoveryWindow time.Duration
	// TasteExamples is how many of each user's latest APPLIED and of their
	// latest NOT_INTERESTED matches are kept whatever their age: the
	// relevance prompt's examples (Matches.Claim).
	TasteExamples int
}

// PruneOptions bound each batch: its own transaction, at most Batch rows,
// under StatementTimeout, with Pause between batches so live load is not
// starved.
type PruneOptions struct {
	Batch            int
	StatementTimeout time.Duration
	Pause            time.Duration
	// OnBatch, if set, hears of every batch once its transaction ended:
	// its kind, the rows it deleted (cleared), how long the transaction
	// took (BEGIN to COMMIT or ROLLBACK) and its error, if any. Benchmarks
	// time the batches with it; the job leaves it nil.
	OnBatch func(kind string, rows int64, took time.Duration, err error)
}

func (o PruneOptions) withDefaults() PruneOptions {
	if o.Batch <= 0 {
		o.Batch = 1000
	}
	if o.StatementTimeout <= 0 {
		o.StatementTimeout = 2 * time.Second
	}
	if o.Pause < 0 {
		o.Pause = 0
	}
	return o
}

// PruneResult is one kind's share of a prune run.
type PruneResult struct {
	Kind     string
	Off      bool  // retention 0: kept for ever, nothing done
	Rows     int64 // deleted (run_context, order_contacts: cleared)
	Batches  int
	Timeouts int   // batches cancelled by the statement timeout; the kind stopped at the first
	Err      error // any other failure; the kind stopped there
	Duration time.Duration
}

// pruneBatch is what a kind's batch gets: its horizon (rows older go), the
// batch size and a cursor kinds that walk past rows they keep carry from
// batch to batch.
type pruneBatch struct {
	horizon time.Time
	now     time.Time
	limit   int
	r       Retention
	// cursor: the last (time, id) a keyset walk examined.
	afterAt time.Time
	afterID int64
}

type pruneKind struct {
	name string
	keep func(Retention) time.Duration
	// batch deletes one batch in tx; more says another batch may find rows.
	batch func(ctx context.Context, tx pgx.Tx, b *pruneBatch) (n int64, more bool, err error)
}

var pruneKinds = []pruneKind{
	{PruneGroupMessages, func(r Retention) time.Duration { return r.GroupMessages }, pruneGroupMessages},
	{PruneRunContext, func(r Retention) time.Duration { return r.RunContext }, pruneRunContext},
	{PruneRawLogs, func(r Retention) time.Duration { return r.Memory }, pruneByID("raw_logs")},
	{PruneSummaries, func(r Retention) time.Duration { return r.Memory }, pruneByID("lsm_storage")},
	{PruneVacancyMatches, func(r Retention) time.Duration { return r.VacancyMatches }, pruneVacancyMatches},
	{PruneVacancies, func(r Retention) time.Duration { return r.VacancyMatches }, pruneVacancies},
	{PruneSearchHits, func(r Retention) time.Duration { return r.SearchHits }, pruneSearchHits},
	{PruneOrderContacts, func(r Retention) time.Duration { return r.OrderContacts }, pruneOrderContacts},
	{PruneOutboxRows, func(r Retention) time.Duration { return r.Outbox }, pruneOutbox},
	{PruneOutboxThrottles, func(Retention) time.Duration { return 24 * time.Hour }, pruneOutboxThrottles},
	{PruneInbox, func(r Retention) time.Duration { return r.Inbox }, pruneInbox},
	{PruneProfileDrafts, func(Retention) time.Duration { return resume.DraftTTL }, pruneProfileDrafts},
	{PruneMemoryRequests, func(Retention) time.Duration { return expiredRequestGrace }, pruneMemoryRequests},
}

// PruneKinds lists every kind in the order Prune runs them.
func PruneKinds() []string {
	out := make([]string, len(pruneKinds))
	for i, k := range pruneKinds {
		out[i] = k.name
	}
	return out
}

// Prune runs every kind's retention as of now (the caller's clock, so
// tests place rows on both sides of each boundary). A kind that fails or
// times out stops there and the next one runs; each result says what
// happened. It stops early when ctx ends.
func (s *Jobs) Prune(ctx context.Context, now time.Time, r Retention, o PruneOptions) []PruneResult {
	out := make([]PruneResult, 0, len(pruneKinds))
	for _, k := range pruneKinds {
		if ctx.Err() != nil {
			break
		}
		out = append(out, s.prune(ctx, k, now, r, o))
	}
	return out
}

// PruneKind runs one kind's retention as of now (see Prune).
func (s *Jobs) PruneKind(ctx context.Context, kind string, now time.Time, r Retention, o PruneOptions) PruneResult {
	for _, k := range pruneKinds {
		if k.name == kind {
			return s.prune(ctx, k, now, r, o)
		}
	}
	return PruneResult{Kind: kind, Err: fmt.Errorf("prune: unknown kind %q", kind)}
}

func (s *Jobs) prune(ctx context.Context, k pruneKind, now time.Time, r Retention, o PruneOptions) (res PruneResult) {
	o = o.withDefaults()
	res = PruneResult{Kind: k.name}
	keep := k.keep(r)
	if keep <= 0 {
		res.Off = true
		return res
	}
	start := time.Now()
	defer func() { res.Duration = time.Since(start) }()
	b := &pruneBatch{horizon: now.Add(-keep), now: now, limit: o.Batch, r: r}
	setTimeout := fmt.Sprintf("SET LOCAL statement_timeout = %d", max(1, o.StatementTimeout.Milliseconds()))
	for {
		var n int64
		var more bool
		began := time.Now()
		err := s.withTx(ctx, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, setTimeout); err != nil {
				return err
			}
			var err error
			n, more, err = k.batch(ctx, tx, b)
			return err
		})
		if o.OnBatch != nil {
			rows := n
			if err != nil {
				rows = 0
			}
			o.OnBatch(k.name, rows, time.Since(began), err)
		}
		var pe *pgconn.PgError
		switch {
		case errors.As(err, &pe) && pe.Code == "57014" && ctx.Err() == nil: // query_canceled: the statement timeout
			res.Timeouts++
			return res
		case err != nil:
			if ctx.Err() == nil {
				res.Err = fmt.Errorf("prune %s: %w", k.name, err)
			}
			return res
		}
		res.Rows += n
		res.Batches++
		if !more {
			return res
		}
		select {
		case <-ctx.Done():
			return res
		case <-time.After(o.Pause):
		}
	}
}

// pruneGroupMessages deletes messages dated before the horizon, and never
// one at or after the start of the window of an analysis run not closed
// (at most one such run exists). Proposals do not need the messages they
// cite: analysis_proposal_sources keeps chat and message ids without a
// foreign key, and RAG reads proposals and their embeddings only.
var pruneGroupMessages = pruneStatement(`
DELETE FROM group_messages g USING (
    SELECT m.chat_id, m.message_id FROM group_messages m
    WHERE m.date < LEAST($1::timestamptz,
                         (SELECT min(r.window_from) FROM analysis_runs r WHERE r.state IN ` + unclosedRuns + `))
    ORDER BY m.date LIMIT $2
    FOR UPDATE SKIP LOCKED) d
WHERE g.chat_id = d.chat_id AND g.message_id = d.message_id`)

// pruneRunContext clears the draft and the assembled context of runs
// closed (archived, or FAILED and told) before the horizon.
var pruneRunContext = pruneStatement(`
UPDATE pipeline_runs SET draft_context = NULL, final_context_payload = NULL, context_pruned_at = now()
WHERE id = ANY (ARRAY(
    SELECT id FROM pipeline_runs
    WHERE closed_at IS NOT NULL AND context_pruned_at IS NULL AND closed_at < $1
    ORDER BY closed_at LIMIT $2
    FOR UPDATE SKIP LOCKED))`)

// pruneByID deletes a table's rows created before the horizon, walking its
// primary key from the oldest: ids grow with created_at, so a chunk holding
// a row inside the retention is the last. (A row a long transaction wrote
// out of order waits for the next run; nothing goes early.)
func pruneByID(table string) func(ctx context.Context, tx pgx.Tx, b *pruneBatch) (int64, bool, error) {
	q := `
DELETE FROM ` + table + ` WHERE id = ANY (ARRAY(
    SELECT c.id FROM (SELECT id, created_at FROM ` + table + ` ORDER BY id LIMIT $2) c WHERE c.created_at < $1))`
	return pruneStatement(q)
}

// pruneStatement is a batch that is one statement of q, which takes the
// horizon as $1 and the batch's limit as $2: a full batch may leave more.
func pruneStatement(q string) func(ctx context.Context, tx pgx.Tx, b *pruneBatch) (int64, bool, error) {
	return func(ctx context.Context, tx pgx.Tx, b *pruneBatch) (int64, bool, error) {
		tag, err := tx.Exec(ctx, q, b.horizon, b.limit)
		if err != nil {
			return 0, false, err
		}
		return tag.RowsAffected(), tag.RowsAffected() == int64(b.limit), nil
	}
}

// prunableMatches is the SQL list of the statuses pruning may delete: the
// final ones, SENT_TO_USER never answered, SKIPPED past recovery, and
// applications whatever their step: one nobody reported on for the whole
// retention is over, and /applications would only list it for ever. The
// walk reads vacancy_matches_prune, which holds every match, in order.
const prunableMatches = `('NOT_SUITABLE', 'IN_ARCHIVE', 'APPLIED', 'NOT_INTERESTED', 'SENT_TO_USER', 'SKIPPED',
    'NO_ANSWER', 'INVITED', 'OFFER', 'REJECTED')`

// pruneVacancyMatches deletes matches in a prunable status created and last
// changed before the horizon; SKIPPED ones also only past the recovery
// window; never a user's taste examples, the ones the claim reads: their
// first TasteExamples applications in the claim's order (applications.go)
// and their latest TasteExamples NOT_INTERESTED. It walks the candidates
// by (created_at, id) with a cursor, so the kept taste examples are read
// once a run, not once a batch.
func pruneVacancyMatches(ctx context.Context, tx pgx.Tx, b *pruneBatch) (int64, bool, error) {
	skipped := b.now.Add(-b.r.RecoveryWindow)
	if skipped.After(b.horizon) {
		skipped = b.horizon
	}
	var scanned, deleted int64
	var lastAt *time.Time
	var lastID *int64
	err := tx.QueryRow(ctx, `
WITH chunk AS (
    SELECT c.id, c.created_at FROM vacancy_matches c
    WHERE c.status IN `+prunableMatches+` AND c.created_at < $1 AND (c.created_at, c.id) > ($3, $4)
    ORDER BY c.created_at, c.id LIMIT $2
), doomed AS (
    SELECT m.id FROM vacancy_matches m JOIN chunk ON chunk.id = m.id
    WHERE m.status IN `+prunableMatches+` AND m.updated_at < $1
      AND (m.status <> 'SKIPPED' OR m.created_at < $5)
      AND (m.status NOT IN `+tasteLiked+` OR m.id NOT IN (
           SELECT t.id FROM vacancy_matches t WHERE t.user_id = m.user_id AND t.status IN `+tasteLiked+`
           ORDER BY `+tasteOrder("t")+` LIMIT $6))
      AND (m.status <> 'NOT_INTERESTED' OR m.id NOT IN (
           SELECT t.id FROM vacancy_matches t WHERE t.user_id = m.user_id AND t.status = 'NOT_INTERESTED'
           ORDER BY t.updated_at DESC, t.id DESC LIMIT $6))
    FOR UPDATE OF m SKIP LOCKED
), gone AS (
    DELETE FROM vacancy_matches d USING doomed WHERE d.id = doomed.id RETURNING d.id
), last AS (
    SELECT created_at, id FROM chunk ORDER BY created_at DESC, id DESC LIMIT 1
)
SELECT (SELECT count(*) FROM chunk), (SELECT count(*) FROM gone), (SELECT created_at FROM last), (SELECT id FROM last)`,
		b.horizon, b.limit, b.afterAt, b.afterID, skipped, b.r.TasteExamples).Scan(&scanned, &deleted, &lastAt, &lastID)
	if err != nil {
		return 0, false, err
	}
	if lastAt != nil {
		b.afterAt, b.afterID = *lastAt, *lastID
	}
	return deleted, scanned == int64(b.limit), nil
}

// pruneVacancies deletes vacancies created before the horizon that no match
// points to. The candidates are locked first (a match being inserted for
// one holds its key, so it is skipped) and the delete checks again with a
// fresh snapshot, so the cascade never takes a match that arrived
// meanwhile: one inserted later waits for this lock and then finds its
// vacancy gone. Their search hits stay (dedupe is search_hits' business).
func pruneVacancies(ctx context.Context, tx pgx.Tx, b *pruneBatch) (int64, bool, error) {
	rows, err := tx.Query(ctx, `
SELECT id, created_at FROM vacancies WHERE created_at < $1 AND (created_at, id) > ($3, $4)
ORDER BY created_at, id LIMIT $2`, b.horizon, b.limit, b.afterAt, b.afterID)
	if err != nil {
		return 0, false, err
	}
	var ids []int64
	var id int64
	var at time.Time
	if _, err := pgx.ForEachRow(rows, []any{&id, &at}, func() error {
		ids = append(ids, id)
		b.afterAt, b.afterID = at, id
		return nil
	}); err != nil {
		return 0, false, err
	}
	if len(ids) == 0 {
		return 0, false, nil
	}
	more := len(ids) == b.limit
	rows, err = tx.Query(ctx, `
SELECT v.id FROM vacancies v
WHERE v.id = ANY ($1) AND NOT EXISTS (SELECT 1 FROM vacancy_matches m WHERE m.vacancy_id = v.id)
FOR UPDATE SKIP LOCKED`, ids)
	if err != nil {
		return 0, false, err
	}
	locked, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil || len(locked) == 0 {
		return 0, more, err
	}
	tag, err := tx.Exec(ctx, `
DELETE FROM vacancies v
WHERE v.id = ANY ($1) AND NOT EXISTS (SELECT 1 FROM vacancy_matches m WHERE m.vacancy_id = v.id)`, locked)
	if err != nil {
		return 0, false, err
	}
	return tag.RowsAffected(), more, nil
}

// pruneSearchHits deletes hits found before the horizon and, in the same
// statement, raises each search_key's pruned_through_id to the highest id
// deleted: Unseen counts every id up to it as seen, so discovery never
// collects a pruned vacancy again (a hit is found after its vacancy was
// published, and HH's ids grow with time).
func pruneSearchHits(ctx context.Context, tx pgx.Tx, b *pruneBatch) (int64, bool, error) {
	var n int64
	err := tx.QueryRow(ctx, `
WITH gone AS (
    DELETE FROM search_hits h USING (
        SELECT search_key, vacancy_id FROM search_hits WHERE found_at < $1 ORDER BY found_at LIMIT $2) d
    WHERE h.search_key = d.search_key AND h.vacancy_id = d.vacancy_id
    RETURNING h.search_key, h.vacancy_id
), marks AS (
    INSERT INTO discovery_state AS s (search_key, pruned_through_id)
    SELECT search_key, max(vacancy_id) FROM gone GROUP BY search_key
    ON CONFLICT (search_key) DO UPDATE SET pruned_through_id = GREATEST(s.pruned_through_id, EXCLUDED.pruned_through_id)
)
SELECT count(*) FROM gone`, b.horizon, b.limit).Scan(&n)
	if err != nil {
		return 0, false, err
	}
	return n, n == int64(b.limit), nil
}

// pruneOrderContacts clears the customer's address, name and phone of
// orders CLOSED or CANCELLED before the horizon, walking orders_contacts;
// the order stays, contacts_pruned_at marks it. Both states are final, so
// nothing else writes these rows (SKIP LOCKED leaves one a transaction
// holds, say a /cancel's that has not committed, to the next run).
// The customer's Telegram id is contact data too: it goes with them, and
// so do the bot's messages in their chat about the order (order_messages,
// keyed by that chat) and the texts they and the master exchanged.
var pruneOrderContacts = pruneStatement(`
WITH sel AS (
    SELECT id FROM orders
    WHERE state IN ('CLOSED', 'CANCELLED') AND contacts_pruned_at IS NULL AND COALESCE(closed_at, cancelled_at) < $1
    ORDER BY COALESCE(closed_at, cancelled_at) LIMIT $2
    FOR UPDATE SKIP LOCKED
), msgs AS (
    DELETE FROM order_messages WHERE order_id IN (SELECT id FROM sel)
), relays AS (
    DELETE FROM order_relays WHERE order_id IN (SELECT id FROM sel)
)
UPDATE orders SET address = NULL, customer_name = NULL, customer_phone = NULL, customer_id = NULL,
    customer_joined_at = NULL, customer_joined_by = NULL, contacts_pruned_at = now(), updated_at = now()
WHERE id IN (SELECT id FROM sel)`)

// pruneOutbox deletes rows delivered, dropped or failed before the horizon
// (never a pending one), except a delivered send whose key a pending edit
// still needs.
var pruneOutbox = pruneStatement(`
DELETE FROM outbox WHERE id = ANY (ARRAY(
    SELECT o.id FROM outbox o
    WHERE o.state <> 'pending' AND o.done_at < $1
      AND NOT (o.msg_key <> '' AND EXISTS (SELECT 1 FROM outbox e
               WHERE e.state = 'pending' AND e.edit AND e.chat_id = o.chat_id AND e.msg_key = o.msg_key))
    ORDER BY o.done_at LIMIT $2))`)

var pruneOutboxThrottles = pruneStatement(`
DELETE FROM outbox_throttles WHERE ctid = ANY (ARRAY(
    SELECT ctid FROM outbox_throttles WHERE at < $1 ORDER BY at LIMIT $2))`)

// pruneInbox deletes updates handled or failed before the horizon, oldest
// first (inbox_ended); a pending update, claimed or waiting, stays.
var pruneInbox = pruneStatement(`
DELETE FROM inbox WHERE update_id = ANY (ARRAY(
    SELECT update_id FROM inbox WHERE state <> 'pending' AND done_at < $1 ORDER BY done_at LIMIT $2))`)

// expiredRequestGrace is how long past its expires_at a memory request is
// deleted: the requests' statements compare with the database's now(), the
// prune with the replica's clock, which may run a little ahead.
const expiredRequestGrace = time.Minute

// pruneMemoryRequests deletes memory requests that expired before the
// horizon: they are void, and the statements that drop them on the way run
// only when their user comes back.
var pruneMemoryRequests = pruneStatement(`
DELETE FROM memory_requests WHERE id = ANY (ARRAY(
    SELECT id FROM memory_requests WHERE expires_at < $1 ORDER BY expires_at LIMIT $2
    FOR UPDATE SKIP LOCKED))`)

// PruneRun is a kind's row in prune_runs: its last run and its total.
type PruneRun struct {
	Kind     string
	At       time.Time
	Rows     int64
	Timeouts int
	Duration time.Duration
	Err      string
	Total    int64
}

// RecordPrune stores each result (but kinds that are off) as its kind's
// last run, at at.
func (s *Jobs) RecordPrune(ctx context.Context, at time.Time, results []PruneResult) error {
	b := &pgx.Batch{}
	for _, r := range results {
		if r.Off {
			continue
		}
		msg := ""
		if r.Err != nil {
			msg = r.Err.Error()
		}
		b.Queue(`
INSERT INTO prune_runs AS p (kind, at, rows, timeouts, duration_ms, error, total) VALUES ($1, $2, $3, $4, $5, $6, $3)
ON CONFLICT (kind) DO UPDATE SET at = EXCLUDED.at, rows = EXCLUDED.rows, timeouts = EXCLUDED.timeouts,
    duration_ms = EXCLUDED.duration_ms, error = EXCLUDED.error, total = p.total + EXCLUDED.rows`,
			r.Kind, at, r.Rows, r.Timeouts, r.Duration.Milliseconds(), msg)
	}
	if b.Len() == 0 {
		return nil
	}
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("record prune: %w", err)
	}
	return nil
}

// PruneRuns lists each kind's last prune run, in PruneKinds' order; a kind
// never pruned (off, or before the first run) is absent.
func (s *Jobs) PruneRuns(ctx context.Context) ([]PruneRun, error) {
	rows, err := s.pool.Query(ctx, `SELECT kind, at, rows, timeouts, duration_ms, error, total FROM prune_runs
ORDER BY array_position($1::text[], kind), kind`, PruneKinds())
	if err != nil {
		return nil, fmt.Errorf("prune runs: %w", err)
	}
	var r PruneRun
	var ms int64
	var out []PruneRun
	_, err = pgx.ForEachRow(rows, []any{&r.Kind, &r.At, &r.Rows, &r.Timeouts, &ms, &r.Err, &r.Total}, func() error {
		r.Duration = time.Duration(ms) * time.Millisecond
		out = append(out, r)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("prune runs: %w", err)
	}
	return out, nil
}

// TableSize is one table's footprint: with its indexes and TOAST, and the
// planner's row estimate (no count(*) over a big table for a status page);
// Rows is -1 while the table has never been analysed, which is not "none".
type TableSize struct {
	Name  string
	Bytes int64
	Rows  int64
}

// TableSizes lists the n largest tables of the schema, largest first.
func (s *Jobs) TableSizes(ctx context.Context, n int) ([]TableSize, error) {
	out, err := queryAll(ctx, s.pool, pgx.RowToStructByPos[TableSize], `
SELECT c.relname, pg_total_relation_size(c.oid), c.reltuples::bigint
FROM pg_class c JOIN pg_namespace ns ON ns.oid = c.relnamespace
WHERE c.relkind = 'r' AND ns.nspname = current_schema()
ORDER BY 2 DESC, 1 LIMIT $1`, n)
	if err != nil {
		return nil, fmt.Errorf("table sizes: %w", err)
	}
	return out, nil
}
