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
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"switchboard/domain"
	"switchboard/domain/analysis"
)

// A proposal's delivery records its message (its buttons are edited when
// it is decided); a run's progress message, the board edited in place.
var (
	_ = onDelivered(domain.KindProposal, `
proposal_sent AS (
    UPDATE analysis_proposals p SET message_id = done.message_id
    FROM done WHERE done.kind = 'proposal' AND NOT done.edit AND p.id = done.ref AND done.message_id IS NOT NULL
)`)
	_ = onDelivered(domain.KindProgress, `
progress_sent AS (
    UPDATE analysis_runs r SET progress_message_id = done.message_id
    FROM done WHERE done.kind = 'progress' AND r.id = done.ref AND done.message_id IS NOT NULL
      AND r.progress_message_id IS DISTINCT FROM done.message_id
)`)
)

// The analysis workflow's repository and event publisher.
var (
	_ analysis.Repository = (*Store)(nil)
	_ analysis.Publisher  = (*Store)(nil)
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
	// CreateRun's ON CONFLICT names.
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

type proposalScan struct {
	id, runID, decidedBy, messageID              pgtype.Int8
	batch, ordinal                               pgtype.Int4
	title, description, priority, assignee, dead pgtype.Text
	decision                                     pgtype.Text
	decidedAt, created                           pgtype.Timestamptz
}

func (s *proposalScan) dest() []any {
	return []any{&s.id, &s.runID, &s.ordinal, &s.batch, &s.title, &s.description, &s.priority, &s.assignee, &s.dead,
		&s.decision, &s.decidedBy, &s.decidedAt, &s.messageID, &s.created}
}

func (s *proposalScan) proposal() analysis.Proposal {
	return analysis.Proposal{
		ID: s.id.Int64, RunID: s.runID.Int64, Ordinal: int(s.ordinal.Int32), Batch: int(s.batch.Int32), Title: s.title.String,
		Description: s.description.String, Priority: s.priority.String, Assignee: s.assignee.String,
		Deadline: s.dead.String, Decision: analysis.Decision(s.decision.String), DecidedBy: s.decidedBy.Int64,
		DecidedAt: tsValue(s.decidedAt), MessageID: int(s.messageID.Int64), CreatedAt: tsValue(s.created),
	}
}

// withSources reads the JSON sources column of proposalSelect.
func withSources(p analysis.Proposal, sources []byte) (analysis.Proposal, error) {
	p.Sources = nil
	if len(sources) > 0 {
		if err := json.Unmarshal(sources, &p.Sources); err != nil {
			return p, fmt.Errorf("proposal %d sources: %w", p.ID, err)
		}
	}
	return p, nil
}

// sortedRefs returns the refs sorted and without duplicates, as they are
// stored (and read back).
func sortedRefs(refs []analysis.Ref) []analysis.Ref {
	out := slices.Clone(refs)
	slices.SortFunc(out, func(a, b analysis.Ref) int {
		return cmp.Or(cmp.Compare(a.ChatID, b.ChatID), cmp.Compare(a.MessageID, b.MessageID))
	})
	return slices.Compact(out)
}

// SaveMessage stores a group message; the same message again (an edit)
// updates its text and edited_at. A group not tracked yet is added, so
// that /chats lists it.
func (s *Store) SaveMessage(ctx context.Context, m analysis.GroupMessage) error {
	_, err := s.pool.Exec(ctx, `
WITH chat AS (
    INSERT INTO group_chats (id) VALUES ($1) ON CONFLICT (id) DO NOTHING
)
INSERT INTO group_messages AS g (`+groupMessageColumns+`) VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (chat_id, message_id) DO UPDATE SET text = EXCLUDED.text, edited_at = now()
WHERE g.text IS DISTINCT FROM EXCLUDED.text`, m.ChatID, m.MessageID, m.AuthorID, m.Author, m.Text, m.Date)
	if err != nil {
		return fmt.Errorf("save message %d/%d: %w", m.ChatID, m.MessageID, err)
	}
	return nil
}

// EditMessage updates a stored message's text; false if it is not stored.
func (s *Store) EditMessage(ctx context.Context, chatID, messageID int64, text string) (bool, error) {
	tag, err := s.pool.Exec(ctx, `UPDATE group_messages SET text = $3, edited_at = now()
WHERE chat_id = $1 AND message_id = $2`, chatID, messageID, text)
	if err != nil {
		return false, fmt.Errorf("edit message %d/%d: %w", chatID, messageID, err)
	}
	return tag.RowsAffected() == 1, nil
}

// TrackChat records a group the bot is in, with its title and whether the
// bot can read ordinary messages there.
func (s *Store) TrackChat(ctx context.Context, id int64, title string, canRead bool) error {
	_, err := s.pool.Exec(ctx, `
INSERT INTO group_chats (id, title, can_read) VALUES ($1, $2, $3)
ON CONFLICT (id) DO UPDATE SET title = EXCLUDED.title, can_read = EXCLUDED.can_read, updated_at = now()`,
		id, title, canRead)
	if err != nil {
		return fmt.Errorf("track chat %d: %w", id, err)
	}
	return nil
}

// Chats lists the tracked groups with their message counts and last
// message dates, the most recently active first (groups without messages
// last, by id).
func (s *Store) Chats(ctx context.Context) ([]analysis.Chat, error) {
	rows, err := s.pool.Query(ctx, `
SELECT c.id, c.title, c.can_read, COALESCE(m.n, 0), m.last_at
FROM group_chats c
LEFT JOIN (SELECT chat_id, count(*) AS n, max(date) AS last_at FROM group_messages GROUP BY chat_id) m
    ON m.chat_id = c.id
ORDER BY m.last_at DESC NULLS LAST, c.id`)
	if err != nil {
		return nil, fmt.Errorf("chats: %w", err)
	}
	var c analysis.Chat
	var last pgtype.Timestamptz
	var out []analysis.Chat
	_, err = pgx.ForEachRow(rows, []any{&c.ID, &c.Title, &c.CanRead, &c.Messages, &last}, func() error {
		c.LastAt = tsValue(last)
		out = append(out, c)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("chats: %w", err)
	}
	return out, nil
}

// enqueueRun writes what render makes of run's board in tx (nothing for
// a nil render). It runs after the statement that changed the run, whose
// row lock orders every change of one run: the board read here has every
// change committed before it, so the last edit written shows them all.
func enqueueRun(ctx context.Context, tx pgx.Tx, render domain.Render[analysis.Review], run analysis.Run) error {
	if render == nil {
		return nil
	}
	rv, err := reviewOf(ctx, tx, run)
	if err != nil {
		return err
	}
	return enqueueTx(ctx, tx, render(rv))
}

// reviewOf reads the page of run's proposals its board is on.
func reviewOf(ctx context.Context, tx pgx.Tx, run analysis.Run) (analysis.Review, error) {
	rv := analysis.Review{Run: run, Page: min(max(run.ReviewPage, 0), analysis.PagesOf(run.ProposalsTotal)-1)}
	if run.ProposalsTotal == 0 {
		return rv, nil
	}
	rows, err := tx.Query(ctx, `SELECT `+proposalSelect+` FROM analysis_proposals p
WHERE p.run_id = $1 AND p.ordinal > $2 AND p.ordinal <= $3 ORDER BY p.ordinal`,
		run.ID, rv.Page*analysis.ReviewPageSize, (rv.Page+1)*analysis.ReviewPageSize)
	if err != nil {
		return rv, fmt.Errorf("board of run %d: %w", run.ID, err)
	}
	var ps proposalScan
	var sources []byte
	_, err = pgx.ForEachRow(rows, append(ps.dest(), &sources), func() error {
		p, err := withSources(ps.proposal(), sources)
		rv.Proposals = append(rv.Proposals, p)
		return err
	})
	if err != nil {
		return rv, fmt.Errorf("board of run %d: %w", run.ID, err)
	}
	return rv, nil
}

// createRunLock is the transaction-level advisory lock CreateRun holds,
// so that concurrent creates check for unclosed runs one after another.
const createRunLock = 0x616e616c79736973 // "analysis"

// CreateRun inserts a pending run unless an unclosed run exists; then it
// returns the unclosed runs' ids and no run. The check comes before the
// insert, under an advisory lock that serialises creates: a refused
// /run_new inserts nothing, so it takes no id from the sequence and the
// next run gets the next number. (Runs leave the unclosed states without
// the lock, which can only let a create through, never block one wrongly.)
// The unique partial index analysis_runs_one_unclosed still guards the
// rule. What render makes of the new run is written in the insert's
// transaction.
func (s *Store) CreateRun(ctx context.Context, r analysis.Run, render domain.Render[analysis.Review]) (analysis.Run, []int64, error) {
	filters, err := json.Marshal(r.Filters)
	if err != nil {
		return analysis.Run{}, nil, fmt.Errorf("create run: %w", err)
	}
	var created analysis.Run
	var blocking []int64
	err = s.WithTx(ctx, func(tx pgx.Tx) error {
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
		return enqueueRun(ctx, tx, render, created)
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

// Run returns one run, with its creator's names, or domain.ErrNotFound.
func (s *Store) Run(ctx context.Context, id int64) (analysis.Run, error) {
	r, err := scanRunWithCreator(s.pool.QueryRow(ctx, runWithCreator+` WHERE r.id = $1`, id))
	if err != nil {
		return r, fmt.Errorf("run %d: %w", id, interpretError(err))
	}
	return r, nil
}

// Runs lists runs newest first, with their creators' names and the total
// count.
func (s *Store) Runs(ctx context.Context, offset, limit int) ([]analysis.Run, int, error) {
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
// in its transaction, writes what render makes of the run it left: ok
// false, with the run as it is and nothing written, when it updated
// nothing (domain.ErrNotFound if there is no such run).
func (s *Store) moveRun(ctx context.Context, id int64, what string, render domain.Render[analysis.Review], sql string, args ...any) (analysis.Run, bool, error) {
	var r analysis.Run
	err := s.WithTx(ctx, func(tx pgx.Tx) error {
		var err error
		if r, err = scanAnalysisRun(tx.QueryRow(ctx, sql, args...)); err != nil {
			return err
		}
		return enqueueRun(ctx, tx, render, r)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		r, err = s.Run(ctx, id)
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

// StartRun moves pending → running with started_at, rag and the
// executor's lease.
func (s *Store) StartRun(ctx context.Context, id int64, rag bool, lease time.Duration, render domain.Render[analysis.Review]) (analysis.Run, bool, error) {
	return s.moveRun(ctx, id, "start", render, `
UPDATE analysis_runs SET state = 'running', started_at = now(), rag = $2,
    claimed_until = now() + $3 * interval '1 microsecond', updated_at = now()
WHERE id = $1 AND state = 'pending'
RETURNING `+analysisRunColumns, id, rag, micros(lease))
}

// RenewLease extends a running run's lease; false if it is not running.
func (s *Store) RenewLease(ctx context.Context, id int64, lease time.Duration) (bool, error) {
	tag, err := s.pool.Exec(ctx, `UPDATE analysis_runs SET claimed_until = now() + $2 * interval '1 microsecond'
WHERE id = $1 AND state = 'running'`, id, micros(lease))
	if err != nil {
		return false, fmt.Errorf("renew lease of run %d: %w", id, err)
	}
	return tag.RowsAffected() == 1, nil
}

// FailInterrupted fails every running run whose executor's lease expired
// (its process was killed or restarted), writing what render makes of
// each in the same transaction; the runs it failed.
func (s *Store) FailInterrupted(ctx context.Context, render domain.Render[analysis.Review]) ([]analysis.Run, error) {
	var runs []analysis.Run
	err := s.WithTx(ctx, func(tx pgx.Tx) error {
		var err error
		runs, err = collectAnalysisRuns(tx.Query(ctx, `
UPDATE analysis_runs SET state = 'failed', failed_at = now(), claimed_until = NULL, updated_at = now(),
    error_log = '{"step": "interrupted", "error": "the executor stopped (process killed or restarted)"}'
WHERE state = 'running' AND (claimed_until IS NULL OR claimed_until < now())
RETURNING `+analysisRunColumns))
		if err != nil || render == nil {
			return err
		}
		slices.SortFunc(runs, func(a, b analysis.Run) int { return cmp.Compare(a.ID, b.ID) })
		for _, r := range runs {
			if err := enqueueRun(ctx, tx, render, r); err != nil {
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

// FailRun moves running → failed with the error log.
func (s *Store) FailRun(ctx context.Context, id int64, e analysis.ErrorLog, render domain.Render[analysis.Review]) (analysis.Run, bool, error) {
	log, err := json.Marshal(e)
	if err != nil {
		return analysis.Run{}, false, fmt.Errorf("fail run %d: %w", id, err)
	}
	return s.moveRun(ctx, id, "fail", render, `
UPDATE analysis_runs SET state = 'failed', failed_at = now(), error_log = $2, claimed_until = NULL, updated_at = now()
WHERE id = $1 AND state = 'running'
RETURNING `+analysisRunColumns, id, log)
}

// CompleteRun moves running → completed.
func (s *Store) CompleteRun(ctx context.Context, id int64, render domain.Render[analysis.Review]) (analysis.Run, bool, error) {
	return s.moveRun(ctx, id, "complete", render, `
UPDATE analysis_runs SET state = 'completed', completed_at = now(), claimed_until = NULL, updated_at = now()
WHERE id = $1 AND state = 'running'
RETURNING `+analysisRunColumns, id)
}

// CloseRun moves completed → closed when no proposal is pending, storing
// accuracy_metrics computed from the counters in the same statement.
func (s *Store) CloseRun(ctx context.Context, id int64, render domain.Render[analysis.Review]) (analysis.Run, bool, error) {
	return s.moveRun(ctx, id, "close", render, `
UPDATE analysis_runs SET state = 'closed', closed_at = now(), updated_at = now(), review_confirm = false,
    accuracy_metrics = jsonb_build_object(
        'proposals_total', proposals_total,
        'approval_rate', CASE WHEN proposals_total = 0 THEN 0
                              ELSE round(proposals_approved::numeric / proposals_total, 4) END,
        'rejection_rate', CASE WHEN proposals_total = 0 THEN 0
                               ELSE round(proposals_rejected::numeric / proposals_total, 4) END)
WHERE id = $1 AND state = 'completed' AND proposals_pending = 0
RETURNING `+analysisRunColumns, id)
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
// running run, writing what render makes of it (the progress message) in
// the same transaction; analysis.ErrState if it is not running.
func (s *Store) SetProgress(ctx context.Context, id int64, messages, filtered, batches int, render domain.Render[analysis.Review]) (analysis.Run, error) {
	var r analysis.Run
	err := s.WithTx(ctx, func(tx pgx.Tx) error {
		var err error
		r, err = scanAnalysisRun(tx.QueryRow(ctx, `
UPDATE analysis_runs SET messages = $2, filtered = $3, batches = $4, updated_at = now()
WHERE id = $1 AND state = 'running'
RETURNING `+analysisRunColumns, id, messages, filtered, batches))
		if err != nil {
			return err
		}
		return enqueueRun(ctx, tx, render, r)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		err = runStateError(s.pool.QueryRow(ctx, `SELECT state FROM analysis_runs WHERE id = $1`, id), id)
	}
	if err != nil {
		return r, fmt.Errorf("set progress of run %d: %w", id, err)
	}
	return r, nil
}

// WindowMessages returns the messages dated in [from, to) (of one chat if
// chatID is not 0) oldest first, leaving out those a proposal of another
// run cites.
func (s *Store) WindowMessages(ctx context.Context, runID int64, from, to time.Time, chatID int64) ([]analysis.GroupMessage, error) {
	chat := ``
	args := []any{runID, from, to}
	if chatID != 0 {
		chat = ` AND m.chat_id = $4`
		args = append(args, chatID)
	}
	rows, err := s.pool.Query(ctx, `
SELECT `+prefixed("m", groupMessageColumns)+`
FROM group_messages m
WHERE m.date >= $2 AND m.date < $3`+chat+`
  AND NOT EXISTS (SELECT 1 FROM analysis_proposal_sources s
                  WHERE s.chat_id = m.chat_id AND s.message_id = m.message_id AND s.run_id <> $1)
ORDER BY m.date, m.chat_id, m.message_id`, args...)
	if err != nil {
		return nil, fmt.Errorf("window messages of run %d: %w", runID, err)
	}
	var m analysis.GroupMessage
	var out []analysis.GroupMessage
	_, err = pgx.ForEachRow(rows, []any{&m.ChatID, &m.MessageID, &m.AuthorID, &m.Author, &m.Text, &m.Date}, func() error {
		m.Date = m.Date.UTC()
		out = append(out, m)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("window messages of run %d: %w", runID, err)
	}
	return out, nil
}

// SaveBatch stores a batch's proposals with their sources and adds them to
// the run's counters in one transaction. The run's row is updated first
// (WHERE state = 'running'), so a run failed or completed meanwhile gets
// nothing: analysis.ErrState (domain.ErrNotFound if there is no such run).
// The proposals return with their ids, their sources sorted and without
// duplicates, as stored. What render makes of the run and the proposals
// (their messages, whose buttons carry the ids) is written in the same
// transaction, so a proposal is never saved without its message queued.
func (s *Store) SaveBatch(ctx context.Context, runID int64, batch, messages int, ps []analysis.Proposal, render domain.Render[analysis.Review]) (analysis.Run, []analysis.Proposal, error) {
	var run analysis.Run
	out := make([]analysis.Proposal, len(ps))
	err := s.WithTx(ctx, func(tx pgx.Tx) error {
		var err error
		run, err = scanAnalysisRun(tx.QueryRow(ctx, `
UPDATE analysis_runs SET proposals_total = proposals_total + $2, proposals_pending = proposals_pending + $2,
    batches_done = batches_done + 1, processed = processed + $3, updated_at = now()
WHERE id = $1 AND state = 'running'
RETURNING `+analysisRunColumns, runID, len(ps), messages))
		if errors.Is(err, pgx.ErrNoRows) {
			return runStateError(tx.QueryRow(ctx, `SELECT state FROM analysis_runs WHERE id = $1`, runID), runID)
		}
		if err != nil {
			return err
		}
		if err := insertProposals(ctx, tx, runID, batch, run.ProposalsTotal-len(ps), ps, out); err != nil {
			return err
		}
		return enqueueRun(ctx, tx, render, run)
	})
	if err != nil {
		return analysis.Run{}, nil, fmt.Errorf("save batch %d of run %d: %w", batch, runID, err)
	}
	return run, out, nil
}

// insertProposals inserts a batch's proposals and their sources in tx, in
// one pipelined batch, numbered on from after (the run's proposals before
// them), filling out with them as stored.
func insertProposals(ctx context.Context, tx pgx.Tx, runID int64, batch, after int, ps []analysis.Proposal, out []analysis.Proposal) error {
	if len(ps) == 0 {
		return nil
	}
	b := &pgx.Batch{}
	for i, p := range ps {
		refs := sortedRefs(p.Sources)
		chats := make([]int64, len(refs))
		msgs := make([]int64, len(refs))
		for j, r := range refs {
			chats[j], msgs[j] = r.ChatID, r.MessageID
		}
		b.Queue(`
WITH p AS (
    INSERT INTO analysis_proposals (run_id, batch, title, description, priority, assignee, deadline, ordinal)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $10)
    RETURNING `+proposalColumns+`
), src AS (
    INSERT INTO analysis_proposal_sources (proposal_id, run_id, chat_id, message_id)
    SELECT p.id, $1, u.chat_id, u.message_id FROM p, unnest($8::bigint[], $9::bigint[]) AS u (chat_id, message_id)
)
SELECT `+proposalColumns+` FROM p`, runID, batch, p.Title, p.Description, p.Priority, p.Assignee, p.Deadline, chats, msgs, after+i+1).
			QueryRow(func(row pgx.Row) error {
				var sc proposalScan
				if err := row.Scan(sc.dest()...); err != nil {
					return fmt.Errorf("proposal %d of the batch: %w", i+1, err)
				}
				out[i] = sc.proposal()
				if len(refs) > 0 {
					out[i].Sources = refs
				}
				return nil
			})
	}
	return tx.SendBatch(ctx, b).Close()
}

// proposal returns one proposal with its sources or domain.ErrNotFound.
func (s *Store) proposal(ctx context.Context, id int64) (analysis.Proposal, error) {
	var ps proposalScan
	var sources []byte
	err := s.pool.QueryRow(ctx, `SELECT `+proposalSelect+` FROM analysis_proposals p WHERE p.id = $1`, id).
		Scan(append(ps.dest(), &sources)...)
	if err != nil {
		return analysis.Proposal{}, fmt.Errorf("proposal %d: %w", id, interpretError(err))
	}
	return withSources(ps.proposal(), sources)
}

// Decide is one statement: the proposal's pending → d and the run's
// counters (pending − 1, approved or rejected + 1); the board render makes
// of it is written in the same transaction. A second press finds the
// proposal decided (its row lock makes it wait for the first and then
// re-check) and gets ok false with the proposal and its run as they are.
func (s *Store) Decide(ctx context.Context, id int64, d analysis.Decision, by int64, render domain.Render[analysis.Review]) (analysis.Proposal, analysis.Run, bool, error) {
	if d != analysis.Approved && d != analysis.Rejected {
		return analysis.Proposal{}, analysis.Run{}, false, fmt.Errorf("decide proposal %d: decision %q is neither approved nor rejected", id, d)
	}
	var p analysis.Proposal
	var r analysis.Run
	err := s.WithTx(ctx, func(tx pgx.Tx) error {
		var ps proposalScan
		var rs analysisRunScan
		var sources []byte
		err := tx.QueryRow(ctx, `
WITH p AS (
    UPDATE analysis_proposals SET decision = $2, decided_by = $3, decided_at = now()
    WHERE id = $1 AND decision = 'pending'
    RETURNING *
), r AS (
    UPDATE analysis_runs ar SET proposals_pending = ar.proposals_pending - 1,
        proposals_approved = ar.proposals_approved + (p.decision = 'approved')::int,
        proposals_rejected = ar.proposals_rejected + (p.decision = 'rejected')::int,
        -- "approve all remaining?" has nothing left to ask about
        review_confirm = ar.review_confirm AND ar.proposals_pending > 1,
        updated_at = now()
    FROM p WHERE ar.id = p.run_id
    RETURNING ar.*
)
SELECT `+proposalSelect+`, `+analysisRunColumnsR+` FROM p JOIN r ON r.id = p.run_id`, id, string(d), by).
			Scan(slices.Concat(ps.dest(), []any{&sources}, rs.dest())...)
		if err != nil {
			return err
		}
		if p, err = withSources(ps.proposal(), sources); err != nil {
			return err
		}
		if r, err = rs.run(); err != nil {
			return err
		}
		return enqueueRun(ctx, tx, render, r)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		p, err := s.proposal(ctx, id)
		if err != nil {
			return p, analysis.Run{}, false, fmt.Errorf("decide: %w", err)
		}
		r, err := s.Run(ctx, p.RunID)
		if err != nil {
			return p, r, false, fmt.Errorf("decide proposal %d: %w", id, err)
		}
		return p, r, false, nil
	}
	if err != nil {
		return analysis.Proposal{}, analysis.Run{}, false, fmt.Errorf("decide proposal %d: %w", id, err)
	}
	return p, r, true, nil
}

// TurnPage moves run's board to page, clamped to the pages its proposals
// fill, and writes the board.
func (s *Store) TurnPage(ctx context.Context, runID int64, page int, render domain.Render[analysis.Review]) (analysis.Run, error) {
	r, ok, err := s.moveRun(ctx, runID, "turn the board page of", render, `
UPDATE analysis_runs SET review_page = least(greatest($2, 0), greatest((proposals_total - 1) / $3, 0)), updated_at = now()
WHERE id = $1
RETURNING `+analysisRunColumns, runID, page, analysis.ReviewPageSize)
	if err == nil && !ok {
		err = fmt.Errorf("turn the board page of run %d: %w", runID, domain.ErrNotFound)
	}
	return r, err
}

// AskApproveAll sets review_confirm on a completed run with proposals
// pending that does not ask already, and writes the board.
func (s *Store) AskApproveAll(ctx context.Context, runID int64, render domain.Render[analysis.Review]) (analysis.Run, bool, error) {
	return s.moveRun(ctx, runID, "ask to approve all of", render, `
UPDATE analysis_runs SET review_confirm = true, updated_at = now()
WHERE id = $1 AND state = 'completed' AND proposals_pending > 0 AND NOT review_confirm
RETURNING `+analysisRunColumns, runID)
}

// CancelApproveAll clears review_confirm and writes the board.
func (s *Store) CancelApproveAll(ctx context.Context, runID int64, render domain.Render[analysis.Review]) (analysis.Run, bool, error) {
	return s.moveRun(ctx, runID, "cancel approving all of", render, `
UPDATE analysis_runs SET review_confirm = false, updated_at = now()
WHERE id = $1 AND review_confirm
RETURNING `+analysisRunColumns, runID)
}

// ApproveAll approves every pending proposal of a completed run whose
// board asks to confirm it, then clears the question with the counters
// (so a second confirm finds nothing) and writes the board, in one
// transaction. Proposals are locked before the run, as Decide locks them:
// a press racing it waits instead of deadlocking, and the proposal it
// decided is left as it decided.
func (s *Store) ApproveAll(ctx context.Context, runID, by int64, render domain.Render[analysis.Review]) ([]analysis.Proposal, analysis.Run, bool, error) {
	var out []analysis.Proposal
	var r analysis.Run
	err := s.WithTx(ctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `
UPDATE analysis_proposals p SET decision = 'approved', decided_by = $2, decided_at = now()
WHERE p.run_id = $1 AND p.decision = 'pending'
  AND EXISTS (SELECT 1 FROM analysis_runs r WHERE r.id = $1 AND r.state = 'completed' AND r.review_confirm)
RETURNING `+proposalSelect, runID, by)
		if err != nil {
			return err
		}
		var ps proposalScan
		var sources []byte
		if _, err = pgx.ForEachRow(rows, append(ps.dest(), &sources), func() error {
			p, err := withSources(ps.proposal(), sources)
			out = append(out, p)
			return err
		}); err != nil {
			return err
		}
		slices.SortFunc(out, func(a, b analysis.Proposal) int { return cmp.Compare(a.Ordinal, b.Ordinal) })
		if r, err = scanAnalysisRun(tx.QueryRow(ctx, `
UPDATE analysis_runs SET proposals_pending = proposals_pending - $2, proposals_approved = proposals_approved + $2,
    review_confirm = false, updated_at = now()
WHERE id = $1 AND state = 'completed' AND review_confirm
RETURNING `+analysisRunColumns, runID, len(out))); err != nil {
			return err
		}
		return enqueueRun(ctx, tx, render, r)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		r, err = s.Run(ctx, runID)
		if err != nil {
			return nil, r, false, fmt.Errorf("approve all of run %d: %w", runID, err)
		}
		return nil, r, false, nil
	}
	if err != nil {
		return nil, r, false, fmt.Errorf("approve all of run %d: %w", runID, err)
	}
	return out, r, true, nil
}

// SaveEmbedding stores (or replaces) a proposal's embedding;
// domain.ErrNotFound if there is no such proposal.
func (s *Store) SaveEmbedding(ctx context.Context, proposalID int64, v []float32) error {
	if len(v) == 0 {
		return fmt.Errorf("save embedding of proposal %d: empty vector", proposalID)
	}
	_, err := s.pool.Exec(ctx, `
INSERT INTO analysis_embeddings (proposal_id, embedding) VALUES ($1, $2)
ON CONFLICT (proposal_id) DO UPDATE SET embedding = EXCLUDED.embedding, created_at = now()`, proposalID, v)
	if err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "23503" { // foreign_key_violation: no such proposal
			err = domain.ErrNotFound
		}
		return fmt.Errorf("save embedding of proposal %d: %w", proposalID, err)
	}
	return nil
}

// Similar returns the k approved proposals of runs other than runID whose
// embeddings are most similar (cosine) to v, most similar first.
// Embeddings of another dimension (another model) are not compared.
func (s *Store) Similar(ctx context.Context, runID int64, v []float32, k int) ([]analysis.Proposal, error) {
	if k <= 0 || len(v) == 0 {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, `
SELECT `+proposalSelect+`
FROM analysis_proposals p
JOIN analysis_embeddings e ON e.proposal_id = p.id
WHERE p.decision = 'approved' AND p.run_id <> $1 AND cardinality(e.embedding) = cardinality($2::real[])
ORDER BY cosine_similarity(e.embedding, $2::real[]) DESC NULLS LAST, p.id DESC
LIMIT $3`, runID, v, k)
	if err != nil {
		return nil, fmt.Errorf("similar proposals: %w", err)
	}
	var ps proposalScan
	var sources []byte
	var out []analysis.Proposal
	_, err = pgx.ForEachRow(rows, append(ps.dest(), &sources), func() error {
		p, err := withSources(ps.proposal(), sources)
		out = append(out, p)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("similar proposals: %w", err)
	}
	return out, nil
}

// Publish sends a run event to pg_notify('analysis_runs', payload).
func (s *Store) Publish(ctx context.Context, payload string) error {
	if _, err := s.pool.Exec(ctx, `SELECT pg_notify($1, $2)`, AnalysisChannel, payload); err != nil {
		return fmt.Errorf("publish analysis event: %w", err)
	}
	return nil
}
