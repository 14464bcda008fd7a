package storage

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"switchboard/domain"
	"switchboard/domain/analysis"
)

type proposalScan struct {
	id, runID, decidedBy, messageID              pgtype.Int8
	batch, ordinal                               pgtype.Int4
	title, description, priority, assignee, dead pgtype.Text
	decision                                     pgtype.Text
	decidedAt, created                           pgtype.Timestamptz
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

// SaveProposalBatch stores a batch's proposals with their sources and adds them to
// the run's counters in one transaction. The run's row is updated first
// (WHERE state = 'running'), so a run failed or completed meanwhile gets
// nothing: analysis.ErrState (domain.ErrNotFound if there is no such run).
// The proposals return with their ids, their sources sorted and without
// duplicates, as stored. What tell makes of the run and the proposals
// (their messages, whose buttons carry the ids) is written in the same
// transaction, so a proposal is never saved without its message queued.
func (s *Runs) SaveProposalBatch(ctx context.Context, runID int64, batch, messages int, ps []analysis.Proposal, tell domain.Render[analysis.Review]) (analysis.Run, []analysis.Proposal, error) {
	var run analysis.Run
	out := make([]analysis.Proposal, len(ps))
	err := s.withTx(ctx, func(tx pgx.Tx) error {
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
		return enqueueRun(ctx, tx, tell, run)
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
func (s *Runs) proposal(ctx context.Context, id int64) (analysis.Proposal, error) {
	var ps proposalScan
	var sources []byte
	err := s.pool.QueryRow(ctx, `SELECT `+proposalSelect+` FROM analysis_proposals p WHERE p.id = $1`, id).
		Scan(append(ps.dest(), &sources)...)
	if err != nil {
		return analysis.Proposal{}, fmt.Errorf("proposal %d: %w", id, interpretError(err))
	}
	return withSources(ps.proposal(), sources)
}

// DecideProposal is one statement: the proposal's pending → d and the run's
// counters (pending − 1, approved or rejected + 1); the board tell makes
// of it is written in the same transaction. A second press finds the
// proposal decided (its row lock makes it wait for the first and then
// re-check) and gets ok false with the proposal and its run as they are.
func (s *Runs) DecideProposal(ctx context.Context, id int64, d analysis.Decision, by int64, tell domain.Render[analysis.Review]) (analysis.Proposal, analysis.Run, bool, error) {
	if d != analysis.Approved && d != analysis.Rejected {
		return analysis.Proposal{}, analysis.Run{}, false, fmt.Errorf("decide proposal %d: decision %q is neither approved nor rejected", id, d)
	}
	var p analysis.Proposal
	var r analysis.Run
	err := s.withTx(ctx, func(tx pgx.Tx) error {
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
		if d == analysis.Approved {
			if err := enqueuePushes(ctx, tx, []int64{p.ID}); err != nil {
				return err
			}
		}
		return enqueueRun(ctx, tx, tell, r)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		p, err := s.proposal(ctx, id)
		if err != nil {
			return p, analysis.Run{}, false, fmt.Errorf("decide: %w", err)
		}
		r, err := s.Get(ctx, p.RunID)
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

// AskApproveAllProposals sets review_confirm on a completed run with proposals
// pending that does not ask already, and writes the board.
func (s *Runs) AskApproveAllProposals(ctx context.Context, runID int64, tell domain.Render[analysis.Review]) (analysis.Run, bool, error) {
	return s.moveRun(ctx, runID, "ask to approve all of", tell, `
UPDATE analysis_runs SET review_confirm = true, updated_at = now()
WHERE id = $1 AND state = 'completed' AND proposals_pending > 0 AND NOT review_confirm
RETURNING `+analysisRunColumns, runID)
}

// CancelApproveAllProposals clears review_confirm and writes the board.
func (s *Runs) CancelApproveAllProposals(ctx context.Context, runID int64, tell domain.Render[analysis.Review]) (analysis.Run, bool, error) {
	return s.moveRun(ctx, runID, "cancel approving all of", tell, `
UPDATE analysis_runs SET review_confirm = false, updated_at = now()
WHERE id = $1 AND review_confirm
RETURNING `+analysisRunColumns, runID)
}

// ApproveAllProposals approves every pending proposal of a completed run whose
// board asks to confirm it, then clears the question with the counters
// (so a second confirm finds nothing) and writes the board, in one
// transaction. Proposals are locked before the run, as Decide locks them:
// a press racing it waits instead of deadlocking, and the proposal it
// decided is left as it decided.
func (s *Runs) ApproveAllProposals(ctx context.Context, runID, by int64, tell domain.Render[analysis.Review]) ([]analysis.Proposal, analysis.Run, bool, error) {
	var out []analysis.Proposal
	var r analysis.Run
	err := s.withTx(ctx, func(tx pgx.Tx) error {
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
		ids := make([]int64, len(out))
		for i, p := range out {
			ids[i] = p.ID
		}
		if err := enqueuePushes(ctx, tx, ids); err != nil {
			return err
		}
		return enqueueRun(ctx, tx, tell, r)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		r, err = s.Get(ctx, runID)
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

// SaveProposalEmbedding stores (or replaces) a proposal's embedding;
// domain.ErrNotFound if there is no such proposal.
func (s *Runs) SaveProposalEmbedding(ctx context.Context, proposalID int64, v []float32) error {
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

// SimilarProposals returns the k approved proposals of runs other than runID whose
// embeddings are most similar (cosine) to v, most similar first.
// Embeddings of another dimension (another model) are not compared.
func (s *Runs) SimilarProposals(ctx context.Context, runID int64, v []float32, k int) ([]analysis.Proposal, error) {
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
