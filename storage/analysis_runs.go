package storage

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"switchboard/domain"
	"switchboard/domain/analysis"
)

// A proposal's delivery records its message (its buttons are edited when
// it is decided); a run's progress message, the board edited in place.
const (
	proposalSentHook = `
proposal_sent AS (
    UPDATE analysis_proposals p SET message_id = done.message_id
    FROM done WHERE done.kind = 'proposal' AND NOT done.edit AND p.id = done.ref AND done.message_id IS NOT NULL
)`
	progressSentHook = `
progress_sent AS (
    UPDATE analysis_runs r SET progress_message_id = done.message_id
    FROM done WHERE done.kind = 'progress' AND r.id = done.ref AND done.message_id IS NOT NULL
      AND r.progress_message_id IS DISTINCT FROM done.message_id
)`
)

// Runs is the analysis runs aggregate: a run's lifecycle (created,
// started under a lease, failed, completed, closed), its progress and
// board, and its proposals (analysis_proposals.go): a batch's, the admins'
// decisions and the embeddings RAG reads. It implements analysis.Runs and,
// with pg_notify('analysis_runs', …), analysis.Publisher.
type Runs struct{ *db }

// Runs is the store of the analysis runs and their proposals.
func (s *Store) Runs() *Runs { return &Runs{s.db} }

// The analysis workflow's runs and event publisher.
var (
	_ analysis.Runs      = (*Runs)(nil)
	_ analysis.Publisher = (*Runs)(nil)
)

// AnalysisChannel is the NOTIFY channel of run events.
const AnalysisChannel = "analysis_runs"

// Columns of each entity in the order its scanner reads them (plain names,
// so prefixed can qualify them).
const (
	analysisRunColumns = `id, state, created_by, filters, window_from, window_to, rag,
started_at, completed_at, closed_at, failed_at, error_log,
proposals_total, proposals_pending, proposals_approved, proposals_rejected,
messages, filtered, batches, batches_done, processed, progress_message_id, accuracy_metrics, created_at,
review_page, review_confirm`
	proposalColumns = `id, run_id, ordinal, batch, title, description, priority, assignee, deadline,
decision, decided_by, decided_at, message_id, created_at`
	groupMessageColumns = `chat_id, message_id, author_id, author, text, date`
	// unclosedRuns is the SQL spelling of analysis.Unclosed; it is the
	// predicate of the partial index analysis_runs_one_unclosed, which
	// Create's ON CONFLICT names.
	unclosedRuns = `('pending', 'running', 'completed', 'reviewed')`
)

var (
	analysisRunColumnsR = prefixed("r", analysisRunColumns)
	proposalColumnsP    = prefixed("p", proposalColumns)
	// proposalSelect reads a proposal (alias p) with its sources as JSON.
	proposalSelect = proposalColumnsP + `,
(SELECT jsonb_agg(jsonb_build_object('chat_id', s.chat_id, 'message_id', s.message_id) ORDER BY s.chat_id, s.message_id)
 FROM analysis_proposal_sources s WHERE s.proposal_id = p.id)`
)

type analysisRunScan struct {
	id, createdBy, progressMessage                 pgtype.Int8
	state                                          pgtype.Text
	filters, errorLog, metrics                     []byte
	from, to                                       pgtype.Timestamptz
	rag                                            pgtype.Bool
	started, completed, closed, failed, created    pgtype.Timestamptz
	total, pending, approved, rejected             pgtype.Int4
	messages, filtered, batches, batchesDone, done pgtype.Int4
	reviewPage                                     pgtype.Int4
	reviewConfirm                                  pgtype.Bool
}

func (s *analysisRunScan) dest() []any {
	return []any{&s.id, &s.state, &s.createdBy, &s.filters, &s.from, &s.to, &s.rag,
		&s.started, &s.completed, &s.closed, &s.failed, &s.errorLog,
		&s.total, &s.pending, &s.approved, &s.rejected,
		&s.messages, &s.filtered, &s.batches, &s.batchesDone, &s.done, &s.progressMessage, &s.metrics, &s.created,
		&s.reviewPage, &s.reviewConfirm}
}

func (s *analysisRunScan) run() (analysis.Run, error) {
	r := analysis.Run{
		ID: s.id.Int64, State: analysis.State(s.state.String), CreatedBy: s.createdBy.Int64,
		From: tsValue(s.from), To: tsValue(s.to), RAG: s.rag.Bool,
		StartedAt: tsValue(s.started), CompletedAt: tsValue(s.completed), ClosedAt: tsValue(s.closed), FailedAt: tsValue(s.failed),
		ProposalsTotal: int(s.total.Int32), ProposalsPending: int(s.pending.Int32),
		ProposalsApproved: int(s.approved.Int32), ProposalsRejected: int(s.rejected.Int32),
		Messages: int(s.messages.Int32), Filtered: int(s.filtered.Int32), Batches: int(s.batches.Int32),
		BatchesDone: int(s.batchesDone.Int32), Processed: int(s.done.Int32),
		ProgressMessageID: int(s.progressMessage.Int64), CreatedAt: tsValue(s.created),
		ReviewPage: int(s.reviewPage.Int32), ReviewConfirm: s.reviewConfirm.Bool,
	}
	if len(s.filters) > 0 {
		if err := json.Unmarshal(s.filters, &r.Filters); err != nil {
			return r, fmt.Errorf("run %d filters: %w", r.ID, err)
		}
	}
	if len(s.errorLog) > 0 {
		r.ErrorLog = &analysis.ErrorLog{}
		if err := json.Unmarshal(s.errorLog, r.ErrorLog); err != nil {
			return r, fmt.Errorf("run %d error_log: %w", r.ID, err)
		}
	}
	if len(s.metrics) > 0 {
		r.Metrics = &analysis.Metrics{}
		if err := json.Unmarshal(s.metrics, r.Metrics); err != nil {
			return r, fmt.Errorf("run %d accuracy_metrics: %w", r.ID, err)
		}
	}
	return r, nil
}

func scanAnalysisRun(row pgx.Row) (analysis.Run, error) {
	var s analysisRunScan
	if err := row.Scan(s.dest()...); err != nil {
		return analysis.Run{}, err
	}
	return s.run()
}

func collectAnalysisRuns(rows pgx.Rows, err error) ([]analysis.Run, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var s analysisRunScan
	dest := s.dest()
	var out []analysis.Run
	for rows.Next() {
		s.filters, s.errorLog, s.metrics = nil, nil, nil
		if err := rows.Scan(dest...); err != nil {
			return nil, err
		}
		r, err := s.run()
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

func (s *proposalScan) dest() []any {
	return []any{&s.id, &s.runID, &s.ordinal, &s.batch, &s.title, &s.description, &s.priority, &s.assignee, &s.dead,
		&s.decision, &s.decidedBy, &s.decidedAt, &s.messageID, &s.created}
}

// enqueueRun writes what tell makes of run's board in tx (nothing for
// a nil tell). It runs after the statement that changed the run, whose
// row lock orders every change of one run: the board read here has every
// change committed before it, so the last edit written shows them all.
func enqueueRun(ctx context.Context, tx pgx.Tx, tell domain.Render[analysis.Review], run analysis.Run) error {
	if tell == nil {
		return nil
	}
	rv, err := reviewOf(ctx, tx, run)
	if err != nil {
		return err
	}
	return enqueueTx(ctx, tx, tell(rv))
}

// reviewOf reads the page of run's proposals its board is on.
func reviewOf(ctx context.Context, tx pgx.Tx, run analysis.Run) (analysis.Review, error) {
	rv := analysis.Review{Run: run, Page: min(max(run.ReviewPage, 0), analysis.PagesOf(run.ProposalsTotal)-1)}
	if run.ProposalsTotal == 0 {
		return rv, nil
	}
	rows, err := tx.Query(ctx, `SELECT `+proposalSelect+`,
       CASE WHEN tp.state = 'pushed' THEN coalesce(tp.url, '') ELSE '' END,
       CASE WHEN tp.state = 'pushed' THEN coalesce(tp.number, 0) ELSE 0 END,
       CASE WHEN tp.state = 'held' THEN coalesce(tp.like_number, 0) ELSE 0 END,
       coalesce(tp.like_url, ''), coalesce(tp.like_title, '')
FROM analysis_proposals p
LEFT JOIN task_pushes tp ON tp.proposal_id = p.id AND tp.state IN ('pushed', 'held')
WHERE p.run_id = $1 AND p.ordinal > $2 AND p.ordinal <= $3 ORDER BY p.ordinal`,
		run.ID, rv.Page*analysis.ReviewPageSize, (rv.Page+1)*analysis.ReviewPageSize)
	if err != nil {
		return rv, fmt.Errorf("board of run %d: %w", run.ID, err)
	}
	var ps proposalScan
	var sources []byte
	var url string
	var number int
	var like analysis.Filing
	_, err = pgx.ForEachRow(rows, append(ps.dest(), &sources, &url, &number, &like.Number, &like.URL, &like.Title), func() error {
		p, err := withSources(ps.proposal(), sources)
		p.FiledURL, p.FiledNumber = url, number
		if like.Number > 0 {
			p.Like = like
		}
		rv.Proposals = append(rv.Proposals, p)
		return err
	})
	if err != nil {
		return rv, fmt.Errorf("board of run %d: %w", run.ID, err)
	}
	return rv, nil
}

// createRunLock is the transaction-level advisory lock Create holds,
// so that concurrent creates check for unclosed runs one after another.
const createRunLock = 0x616e616c79736973 // "analysis"

// Create inserts a pending run unless an unclosed run exists; then it
// returns the unclosed runs' ids and no run. The check comes before the
// insert, under an advisory lock that serialises creates: a refused
// /run_new inserts nothing, so it takes no id from the sequence and the
// next run gets the next number. (Runs leave the unclosed states without
// the lock, which can only let a create through, never block one wrongly.)
// The unique partial index analysis_runs_one_unclosed still guards the
// rule. What tell makes of the new run is written in the insert's
// transaction.
func (s *Runs) Create(ctx context.Context, r analysis.Run, tell domain.Render[analysis.Review]) (analysis.Run, []int64, error) {
	filters, err := json.Marshal(r.Filters)
	if err != nil {
		return analysis.Run{}, nil, fmt.Errorf("create run: %w", err)
	}
	var created analysis.Run
	var blocking []int64
	err = s.withTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(createRunLock)); err != nil {
			return fmt.Errorf("lock: %w", err)
		}
		rows, err := tx.Query(ctx, `SELECT id FROM analysis_runs WHERE state IN `+unclosedRuns+` ORDER BY id`)
		if err != nil {
			return fmt.Errorf("unclosed runs: %w", err)
		}
		if blocking, err = pgx.CollectRows(rows, pgx.RowTo[int64]); err != nil || len(blocking) > 0 {
			return err
		}
		created, err = scanAnalysisRun(tx.QueryRow(ctx, `
INSERT INTO analysis_runs (created_by, filters, window_from, window_to, rag) VALUES ($1, $2, $3, $4, $5)
RETURNING `+analysisRunColumns, r.CreatedBy, filters, r.From, r.To, r.RAG))
		if err != nil {
			return err
		}
		return enqueueRun(ctx, tx, tell, created)
	})
	if err != nil {
		return analysis.Run{}, nil, fmt.Errorf("create run: %w", err)
	}
	if len(blocking) > 0 {
		return analysis.Run{}, blocking, nil
	}
	return created, nil, nil
}

// runWithCreator selects runs (alias r) with their creator's names.
var runWithCreator = `SELECT ` + analysisRunColumnsR + `, COALESCE(u.first_name, ''), COALESCE(u.username, '')
FROM analysis_runs r LEFT JOIN users u ON u.id = r.created_by`

// scanRunWithCreator reads a row of runWithCreator.
func scanRunWithCreator(row pgx.Row) (analysis.Run, error) {
	var s analysisRunScan
	var name, username string
	if err := row.Scan(append(s.dest(), &name, &username)...); err != nil {
		return analysis.Run{}, err
	}
	r, err := s.run()
	r.CreatorName, r.CreatorUsername = name, username
	return r, err
}

// Get returns one run, with its creator's names, or domain.ErrNotFound.
func (s *Runs) Get(ctx context.Context, id int64) (analysis.Run, error) {
	r, err := scanRunWithCreator(s.pool.QueryRow(ctx, runWithCreator+` WHERE r.id = $1`, id))
	if err != nil {
		return r, fmt.Errorf("run %d: %w", id, interpretError(err))
	}
	return r, nil
}

// List lists runs newest first, with their creators' names and the total
// count.
func (s *Runs) List(ctx context.Context, offset, limit int) ([]analysis.Run, int, error) {
	var runs []analysis.Run
	var total int
	b := &pgx.Batch{}
	b.Queue(runWithCreator+` ORDER BY r.id DESC OFFSET $1 LIMIT $2`,
		max(offset, 0), max(limit, 0)).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			r, err := scanRunWithCreator(rows)
			if err != nil {
				return err
			}
			runs = append(runs, r)
		}
		return rows.Err()
	})
	b.Queue(`SELECT count(*) FROM analysis_runs`).QueryRow(func(row pgx.Row) error { return row.Scan(&total) })
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return nil, 0, fmt.Errorf("runs: %w", err)
	}
	return runs, total, nil
}

// moveRun runs a conditional UPDATE of run id returning its columns and,
// in its transaction, writes what tell makes of the run it left: ok
// false, with the run as it is and nothing written, when it updated
// nothing (domain.ErrNotFound if there is no such run).
func (s *Runs) moveRun(ctx context.Context, id int64, what string, tell domain.Render[analysis.Review], sql string, args ...any) (analysis.Run, bool, error) {
	var r analysis.Run
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		var err error
		if r, err = scanAnalysisRun(tx.QueryRow(ctx, sql, args...)); err != nil {
			return err
		}
		return enqueueRun(ctx, tx, tell, r)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		r, err = s.Get(ctx, id)
		if err != nil {
			return r, false, fmt.Errorf("%s run %d: %w", what, id, err)
		}
		return r, false, nil
	}
	if err != nil {
		return r, false, fmt.Errorf("%s run %d: %w", what, id, err)
	}
	return r, true, nil
}

// Start moves pending → running with started_at, rag and the
// executor's lease.
func (s *Runs) Start(ctx context.Context, id int64, rag bool, lease time.Duration, tell domain.Render[analysis.Review]) (analysis.Run, bool, error) {
	return s.moveRun(ctx, id, "start", tell, `
UPDATE analysis_runs SET state = 'running', started_at = now(), rag = $2,
    claimed_until = now() + $3 * interval '1 microsecond', updated_at = now()
WHERE id = $1 AND state = 'pending'
RETURNING `+analysisRunColumns, id, rag, micros(lease))
}

// RenewLease extends a running run's lease; false if it is not running.
func (s *Runs) RenewLease(ctx context.Context, id int64, lease time.Duration) (bool, error) {
	tag, err := s.pool.Exec(ctx, `UPDATE analysis_runs SET claimed_until = now() + $2 * interval '1 microsecond'
WHERE id = $1 AND state = 'running'`, id, micros(lease))
	if err != nil {
		return false, fmt.Errorf("renew lease of run %d: %w", id, err)
	}
	return tag.RowsAffected() == 1, nil
}

// FailInterrupted fails every running run whose executor's lease expired
// (its process was killed or restarted), writing what tell makes of
// each in the same transaction; the runs it failed.
func (s *Runs) FailInterrupted(ctx context.Context, tell domain.Render[analysis.Review]) ([]analysis.Run, error) {
	var runs []analysis.Run
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		var err error
		runs, err = collectAnalysisRuns(tx.Query(ctx, `
UPDATE analysis_runs SET state = 'failed', failed_at = now(), claimed_until = NULL, updated_at = now(),
    error_log = '{"step": "interrupted", "error": "the executor stopped (process killed or restarted)"}'
WHERE state = 'running' AND (claimed_until IS NULL OR claimed_until < now())
RETURNING `+analysisRunColumns))
		if err != nil || tell == nil {
			return err
		}
		slices.SortFunc(runs, func(a, b analysis.Run) int { return cmp.Compare(a.ID, b.ID) })
		for _, r := range runs {
			if err := enqueueRun(ctx, tx, tell, r); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("fail interrupted runs: %w", err)
	}
	return runs, nil
}

// Fail moves running → failed with the error log.
func (s *Runs) Fail(ctx context.Context, id int64, e analysis.ErrorLog, tell domain.Render[analysis.Review]) (analysis.Run, bool, error) {
	log, err := json.Marshal(e)
	if err != nil {
		return analysis.Run{}, false, fmt.Errorf("fail run %d: %w", id, err)
	}
	return s.moveRun(ctx, id, "fail", tell, `
UPDATE analysis_runs SET state = 'failed', failed_at = now(), error_log = $2, claimed_until = NULL, updated_at = now()
WHERE id = $1 AND state = 'running'
RETURNING `+analysisRunColumns, id, log)
}

// Complete moves running → completed.
func (s *Runs) Complete(ctx context.Context, id int64, tell domain.Render[analysis.Review]) (analysis.Run, bool, error) {
	return s.moveRun(ctx, id, "complete", tell, `
UPDATE analysis_runs SET state = 'completed', completed_at = now(), claimed_until = NULL, updated_at = now()
WHERE id = $1 AND state = 'running'
RETURNING `+analysisRunColumns, id)
}

// Close moves completed → closed when no proposal is pending, storing
// accuracy_metrics computed from the counters in the same statement.
func (s *Runs) Close(ctx context.Context, id int64, tell domain.Render[analysis.Review]) (analysis.Run, bool, error) {
	return s.moveRun(ctx, id, "close", tell, `
WITH r AS (
UPDATE analysis_runs SET state = 'closed', closed_at = now(), updated_at = now(), review_confirm = false,
    accuracy_metrics = jsonb_build_object(
        'proposals_total', proposals_total,
        'approval_rate', CASE WHEN proposals_total = 0 THEN 0
                              ELSE round(proposals_approved::numeric / proposals_total, 4) END,
        'rejection_rate', CASE WHEN proposals_total = 0 THEN 0
                               ELSE round(proposals_rejected::numeric / proposals_total, 4) END)
WHERE id = $1 AND state = 'completed' AND proposals_pending = 0
RETURNING *
), `+pushesOnClose+`
SELECT `+analysisRunColumns+` FROM r`, id)
}

// runStateError explains why a statement for a running run found none: no
// such run (domain.ErrNotFound) or the run in another state
// (analysis.ErrState).
func runStateError(row pgx.Row, id int64) error {
	var state string
	if err := row.Scan(&state); err != nil {
		return interpretError(err)
	}
	return fmt.Errorf("%w: run %d is %s", analysis.ErrState, id, state)
}

// SetProgress records the window's counts and the number of batches of a
// running run, writing what tell makes of it (the progress message) in
// the same transaction; analysis.ErrState if it is not running.
func (s *Runs) SetProgress(ctx context.Context, id int64, messages, filtered, batches int, tell domain.Render[analysis.Review]) (analysis.Run, error) {
	var r analysis.Run
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		var err error
		r, err = scanAnalysisRun(tx.QueryRow(ctx, `
UPDATE analysis_runs SET messages = $2, filtered = $3, batches = $4, updated_at = now()
WHERE id = $1 AND state = 'running'
RETURNING `+analysisRunColumns, id, messages, filtered, batches))
		if err != nil {
			return err
		}
		return enqueueRun(ctx, tx, tell, r)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		err = runStateError(s.pool.QueryRow(ctx, `SELECT state FROM analysis_runs WHERE id = $1`, id), id)
	}
	if err != nil {
		return r, fmt.Errorf("set progress of run %d: %w", id, err)
	}
	return r, nil
}

// TurnPage moves run's board to page, clamped to the pages its proposals
// fill, and writes the board.
func (s *Runs) TurnPage(ctx context.Context, runID int64, page int, tell domain.Render[analysis.Review]) (analysis.Run, error) {
	r, ok, err := s.moveRun(ctx, runID, "turn the board page of", tell, `
UPDATE analysis_runs SET review_page = least(greatest($2, 0), greatest((proposals_total - 1) / $3, 0)), updated_at = now()
WHERE id = $1
RETURNING `+analysisRunColumns, runID, page, analysis.ReviewPageSize)
	if err == nil && !ok {
		err = fmt.Errorf("turn the board page of run %d: %w", runID, domain.ErrNotFound)
	}
	return r, err
}

// Publish sends a run event to pg_notify('analysis_runs', payload).
func (s *Runs) Publish(ctx context.Context, payload string) error {
	if _, err := s.pool.Exec(ctx, `SELECT pg_notify($1, $2)`, AnalysisChannel, payload); err != nil {
		return fmt.Errorf("publish analysis event: %w", err)
	}
	return nil
}
