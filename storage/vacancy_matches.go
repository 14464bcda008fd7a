package storage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"switchboard/domain"
	"switchboard/domain/vacancy"
)

// Matches is the matches aggregate: a user's match of a vacancy on its way
// through the status table (the worker's claims, the card's buttons,
// recovery), with what the matches are made of and from: the vacancies'
// details and archive (vacancies.go), discovery's runs (discovery.go), a
// new search's first news (firstnews.go), and the users' rhythms and
// digests, which pace the cards (vacancy_settings.go).
type Matches struct{ *db }

// Matches is the store of the vacancy matches and what feeds them.
func (s *Store) Matches() *Matches { return &Matches{s.db} }

// The matches' store (vacancy.Matches).
var _ vacancy.Matches = (*Matches)(nil)

// A card's delivery is its match's ANALYZED → SENT_TO_USER with the chat,
// message id and sent_at, in the statement that marks the card's outbox
// row sent (only from ANALYZED: a match decided meanwhile stays as it is).
// The card of a match a new search's first news waits on is that news: the
// search is told, and no "nothing new yet" follows (the match is locked
// before the search, as where matches end: settleFirstNews).
var vacancySentHook = transitionSQL(vacancy.Analyzed, vacancy.SentToUser, `
vacancy_sent AS (
    UPDATE vacancy_matches m SET status = '%[2]s', chat_id = done.chat_id, message_id = done.message_id,
        sent_at = now(), updated_at = now(), claimed_until = NULL, claim_token = NULL
    FROM done WHERE done.kind = 'vacancy' AND NOT done.edit AND m.id = done.ref AND m.status = '%[1]s'
      AND done.message_id IS NOT NULL
    RETURNING m.id, m.user_id
), vacancy_told AS (
    UPDATE searches s SET first_news = 'told'
    FROM vacancy_sent m WHERE s.user_id = m.user_id AND s.first_news = 'waiting' AND m.id = ANY(s.first_matches)
)`)

// Stats counts a user's matches by status, with the last fetch of their
// searches and the queue sizes.
func (s *Matches) Stats(ctx context.Context, userID int64) (vacancy.Stats, error) {
	st := vacancy.Stats{Counts: map[vacancy.Status]int{}}
	// A relevant match routed to the digests is not being sent: it waits
	// for the next digest, or sits in one the user has not opened it from.
	rows, err := s.pool.Query(ctx, `
SELECT status, CASE WHEN status = 'ANALYZED' AND card IN ('digest', 'listed') THEN card = 'listed' END, count(*)
FROM vacancy_matches WHERE user_id = $1 GROUP BY 1, 2`, userID)
	if err != nil {
		return st, fmt.Errorf("vacancy stats: %w", err)
	}
	for rows.Next() {
		var status string
		var inDigest *bool
		var n int
		if err := rows.Scan(&status, &inDigest, &n); err != nil {
			rows.Close()
			return st, fmt.Errorf("vacancy stats: %w", err)
		}
		switch {
		case inDigest == nil:
			st.Counts[vacancy.Status(status)] += n
		case *inDigest:
			st.InDigest += n
		default:
			st.ForDigest += n
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return st, fmt.Errorf("vacancy stats: %w", err)
	}
	var last *time.Time
	err = s.pool.QueryRow(ctx, `
SELECT (SELECT max(d.updated_at) FROM discovery_state d JOIN searches s ON s.search_key = d.search_key WHERE s.user_id = $1),
       (SELECT count(*) FROM vacancy_matches WHERE status = 'QUEUED')`, userID).Scan(&last, &st.QueueTotal)
	if err != nil {
		return st, fmt.Errorf("vacancy stats: %w", err)
	}
	if last != nil {
		st.LastFetch = *last
	}
	return st, nil
}

// MatchQueue is the vacancy queue as /status shows it: the matches
// waiting for a worker, those of them given back unjudged for a cause
// outside them (the model or HH away, a shutdown) or retried after a
// failure of their own, and the SKIPPED ones recovery still retries.
type MatchQueue struct {
	Queued   int64 `json:"queued"`
	Waiting  int64 `json:"waiting"`  // queued, given back unjudged at least once
	Retrying int64 `json:"retrying"` // queued, failed at least once (below the bound)
	Skipped  int64 `json:"skipped"`  // SKIPPED within the recovery window
	// WaitReason is the commonest latest wait of the queued ones
	// ("breaker_open", "hh_blocked"…); empty with none waiting.
	WaitReason string `json:"wait_reason"`
}

// QueueStats counts MatchQueue; window is VACANCY_RECOVERY_WINDOW. The
// queued matches are read through the queue's partial index and the
// SKIPPED ones through theirs.
func (s *Matches) QueueStats(ctx context.Context, window time.Duration) (MatchQueue, error) {
	var q MatchQueue
	err := s.pool.QueryRow(ctx, `
SELECT q.queued, q.waiting, q.retrying,
       (SELECT count(*) FROM vacancy_matches WHERE status = 'SKIPPED' AND created_at >= now() - $1 * interval '1 microsecond'),
       COALESCE((SELECT wait_reason FROM vacancy_matches WHERE status = 'QUEUED' AND waits > 0
                 GROUP BY wait_reason ORDER BY count(*) DESC, wait_reason LIMIT 1), '')
FROM (SELECT count(*) AS queued, count(*) FILTER (WHERE waits > 0) AS waiting,
             count(*) FILTER (WHERE failures > 0) AS retrying
      FROM vacancy_matches WHERE status = 'QUEUED') q`, micros(window)).Scan(&q.Queued, &q.Waiting, &q.Retrying, &q.Skipped, &q.WaitReason)
	if err != nil {
		return MatchQueue{}, fmt.Errorf("vacancy queue: %w", err)
	}
	return q, nil
}

const matchColumns = `m.id, m.user_id, m.vacancy_id, m.status, m.published_at, m.is_relevant, m.analysis,
m.skip_reason, m.attempts, m.failures, m.failure_reason, m.waits, m.wait_reason,
COALESCE(m.chat_id, 0), COALESCE(m.message_id, 0), m.sent_at, m.created_at, m.updated_at,
COALESCE(m.claim_token::text, '')`

func matchDest(m *vacancy.Match, analysis *[]byte, sentAt **time.Time) []any {
	return []any{&m.ID, &m.UserID, &m.VacancyID, &m.Status, &m.PublishedAt, new(*bool), analysis,
		&m.SkipReason, &m.Attempts, &m.Failures, &m.FailureReason, &m.Waits, &m.WaitReason,
		&m.ChatID, &m.MessageID, sentAt, &m.CreatedAt, &m.UpdatedAt, &m.ClaimToken}
}

// tookOverSQL counts, in a claim's SET (which reads the row as it was),
// the wait of the claim it takes over. A claim token outlives its claim
// only when nobody closed it: every close (a move, Fail, PutBack) clears
// it, so a token still there is a worker that died, or one whose lease ran
// out mid-turn and whose writes will be refused.
const tookOverSQL = `waits = m.waits + (m.claim_token IS NOT NULL)::int,
        wait_reason = CASE WHEN m.claim_token IS NOT NULL THEN '` + vacancy.ReasonLeaseLost + `' ELSE m.wait_reason END`

func finishMatch(m *vacancy.Match, analysis []byte, sentAt *time.Time) error {
	if sentAt != nil {
		m.SentAt = *sentAt
	}
	if len(analysis) > 0 {
		var v vacancy.Verdict
		if err := json.Unmarshal(analysis, &v); err != nil {
			return fmt.Errorf("match %d analysis: %w", m.ID, err)
		}
		m.Verdict = &v
	}
	return nil
}

// claimMatchSQL is Matches.Claim's one statement: $1 the lease, $2 the taste
// examples of each kind, $3 FreshOnly, $4 DetailFresh, $5 DetailLease, $6
// the claimer.
var claimMatchSQL = `
WITH c AS (
    SELECT q.id, q.claim_token FROM vacancy_matches q
    WHERE q.status = 'QUEUED'
      AND (q.claimed_until IS NULL OR q.claimed_until < now())
      -- A QUEUED match waits while another worker fetches its vacancy's
      -- detail, and, while HH blocks us ($3), unless the detail is at hand.
      -- A scalar subquery, evaluated per candidate row as the index walk
      -- reaches it: NOT EXISTS here costs a fifth of the claim rate.
      AND (SELECT d.detail_fetching_until > now()
                  OR $3 AND (d.detail_fetched_at IS NULL OR d.detail_fetched_at <= now() - $4 * interval '1 millisecond')
           FROM vacancies d WHERE d.id = q.vacancy_id) IS NOT TRUE
    ORDER BY q.published_at DESC, q.id
    LIMIT 1
    FOR UPDATE OF q SKIP LOCKED
), m AS (
    UPDATE vacancy_matches m
    SET claimed_until = now() + $1 * interval '1 millisecond', claim_token = gen_random_uuid(),
        claimed_by = NULLIF($6, ''), attempts = m.attempts + 1, updated_at = now(),
        ` + tookOverSQL + `
    FROM c WHERE m.id = c.id
    RETURNING m.*, c.claim_token IS NOT NULL AS took_over
), o AS (
    -- Whether another open match waits on this vacancy: only then is a
    -- fetch lease worth its write (most vacancies have one match).
    SELECT EXISTS (SELECT 1 FROM m, vacancy_matches x
                   WHERE x.vacancy_id = m.vacancy_id AND x.id <> m.id AND x.status = 'QUEUED') AS shared
), l AS (
    -- A QUEUED match whose vacancy's detail is stale takes its fetch lease,
    -- unless another worker holds it: then this claim learns it waits. Two
    -- claims racing for one vacancy serialize on its row here.
    UPDATE vacancies f SET detail_fetching_until = now() + $5 * interval '1 millisecond'
    FROM m, o WHERE f.id = m.vacancy_id AND m.status = 'QUEUED' AND o.shared
      AND (f.detail_fetched_at IS NULL OR f.detail_fetched_at <= now() - $4 * interval '1 millisecond')
      AND (f.detail_fetching_until IS NULL OR f.detail_fetching_until < now())
    RETURNING f.id
)
SELECT ` + matchColumns + `, ` + vacancyColumns + `, u.language, u.telegram_language, u.profile,
       -- What the user excludes, a hidden employer included: one added
       -- since the match was queued drops it unjudged.
       ` + exclusionsSQL("m.user_id") + `,
       -- The user's taste: the applications that got furthest and their
       -- latest ones (storage/applications.go), their latest turned down.
       ` + tasteLikedSQL + `,
       ARRAY(SELECT t.title FROM vacancy_matches d JOIN vacancies t ON t.id = d.vacancy_id
             WHERE d.user_id = m.user_id AND d.status = 'NOT_INTERESTED' ORDER BY d.updated_at DESC, d.id DESC LIMIT $2),
       v.detail_fetched_at IS NULL OR v.detail_fetched_at <= now() - $4 * interval '1 millisecond',
       EXISTS (SELECT 1 FROM l) OR NOT (SELECT shared FROM o),
       -- A jsonb string contains itself and an array its elements, so this
       -- reads searches stored with one experience and with several.
       EXISTS (SELECT 1 FROM searches s WHERE s.user_id = m.user_id AND s.params->'experience' @> '"moreThan6"'),
       -- A new search's first news waits on this match: its end without
       -- a card is checked for the note (a match is queued in the
       -- transaction that makes its search wait, so none becomes one later).
       EXISTS (SELECT 1 FROM searches s WHERE s.user_id = m.user_id AND s.first_news = 'waiting'
               AND m.id = ANY(s.first_matches)),
       -- A rhythm of their own: the move to ANALYZED reads it under its lock.
       EXISTS (SELECT 1 FROM vacancy_settings r WHERE r.user_id = m.user_id),
       m.took_over
FROM m JOIN vacancies v ON v.id = m.vacancy_id JOIN users u ON u.id = m.user_id,
     -- A claim lost in a database crash is only taken again.
     ` + asyncCommit

// Claim claims the newest-published claimable match whose lease is
// free or expired, in one statement with FOR UPDATE SKIP LOCKED so
// concurrent workers on any replica never take the same one. ok is false
// when nothing is claimable.
//
// Claimable are QUEUED matches: an ANALYZED one has its card in the
// outbox, written in the transaction that made it ANALYZED, and claiming
// it would send the card twice.
func (s *Matches) Claim(ctx context.Context, o vacancy.ClaimOptions) (vacancy.Claim, bool, error) {
	var c vacancy.Claim
	var analysis []byte
	var sentAt, fetched *time.Time
	var lang, tgLang string
	var liked []byte
	dest := append(matchDest(&c.Match, &analysis, &sentAt), vacancyDest(&c.Vacancy, &fetched)...)
	dest = append(dest, &lang, &tgLang, &c.User.Profile)
	dest = append(dest, exclusionsDest(&c.User.Exclusions)...)
	dest = append(dest, &liked, &c.User.NotInterested, &c.DetailStale, &c.DetailMine,
		&c.User.Senior, &c.FirstNews, &c.User.Paced, &c.TookOver)
	err := s.pool.QueryRow(ctx, claimMatchSQL,
		o.ClaimLease.Milliseconds(), o.Taste, o.FreshOnly, o.DetailFresh.Milliseconds(), o.FetchLease.Milliseconds(), o.Claimer).Scan(dest...)
	if errors.Is(err, pgx.ErrNoRows) {
		return c, false, nil
	}
	if err != nil {
		return c, false, fmt.Errorf("claim match: %w", err)
	}
	if err := finishMatch(&c.Match, analysis, sentAt); err != nil {
		return c, false, err
	}
	if c.User.Liked, err = likedExamples(liked); err != nil {
		return c, false, err
	}
	if fetched != nil {
		c.DetailFetchedAt = *fetched
	}
	c.User.ID = c.Match.UserID
	c.User.Lang = domain.User{Language: lang, TelegramLanguage: tgLang}.Lang()
	return c, true, nil
}

// NextLeaseExpiry is when the earliest live claim runs out, so an idle
// worker can wake to take over work a dead replica left.
func (s *Matches) NextLeaseExpiry(ctx context.Context) (time.Time, bool, error) {
	return s.nextLeaseExpiry(ctx, "match", `SELECT min(claimed_until) FROM vacancy_matches
WHERE status = 'QUEUED' AND claimed_until > now()`)
}

// nextLeaseExpiry runs a query of the earliest live claim of some work
// (one timestamp, NULL for none); the matches' and the cover letters'
// stores share it.
func (s *db) nextLeaseExpiry(ctx context.Context, what, sql string) (time.Time, bool, error) {
	var at *time.Time
	if err := s.pool.QueryRow(ctx, sql).Scan(&at); err != nil {
		return time.Time{}, false, fmt.Errorf("next %s lease expiry: %w", what, err)
	}
	if at == nil {
		return time.Time{}, false, nil
	}
	return *at, true, nil
}

// PutBack ends a claim of a QUEUED match, claimable again after after;
// with a reason it counts a wait. It does nothing if the claim is no
// longer token's: the turn that lost its claim is counted by the claim
// that took it over (tookOverSQL), once. A match claimable at once (a
// replica stopping gives its matches back so) wakes every replica's idle
// workers, which wake by themselves only for a later time they know of.
func (s *Matches) PutBack(ctx context.Context, id int64, token string, after time.Duration, reason string) error {
	_, err := s.pool.Exec(ctx, `
WITH p AS (
    UPDATE vacancy_matches
    SET claimed_until = now() + $3 * interval '1 millisecond', claim_token = NULL, claimed_by = NULL, updated_at = now(),
        waits = waits + (CASE WHEN $4 = '' THEN 0 ELSE 1 END), wait_reason = COALESCE(NULLIF($4, ''), wait_reason)
    WHERE id = $1 AND status = 'QUEUED' AND claim_token = $2::uuid
    RETURNING id
)
SELECT count(pg_notify($5, '')) FROM p WHERE $3 <= 0`, id, token, after.Milliseconds(), reason, QueueChannel)
	if err != nil {
		return fmt.Errorf("put back match %d: %w", id, err)
	}
	return nil
}

// failMatchSQL is Matches.Fail's statement: $1 the match, $2 its claim
// token, $3 the reason, $4 the failures that make it SKIPPED, $5 the wait
// per failure before a retry, in ms. Counting and deciding in one
// statement under the token, nothing can count a turn twice or decide on a
// count another replica has moved.
var failMatchSQL = transitionSQL(vacancy.Queued, vacancy.Skipped, `
UPDATE vacancy_matches m SET
    failures = m.failures + 1, failure_reason = $3, updated_at = now(),
    status = CASE WHEN m.failures + 1 >= $4 THEN '%[2]s' ELSE m.status END,
    skip_reason = CASE WHEN m.failures + 1 >= $4 THEN $3 ELSE m.skip_reason END,
    claimed_until = CASE WHEN m.failures + 1 >= $4 THEN NULL
                         ELSE now() + (m.failures + 1) * $5 * interval '1 millisecond' END,
    claim_token = NULL, claimed_by = NULL
WHERE m.id = $1 AND m.status = '%[1]s' AND m.claim_token = $2::uuid
RETURNING `+matchColumns)

// Fail records a claimed match's failed turn; see vacancy.Matches.
func (s *Matches) Fail(ctx context.Context, id int64, token string, f vacancy.Failure) (vacancy.Match, bool, error) {
	m, ok, err := closeTurn(ctx, s.pool, failMatchSQL,
		[]any{id, token, f.Reason, f.Max, f.RetryAfter.Milliseconds()}, f.Detail, true)
	if err != nil {
		return m, ok, fmt.Errorf("fail match %d (%s): %w", id, f.Reason, err)
	}
	return m, ok, nil
}

// Transition moves a match from → to in one conditional UPDATE; ok is false
// when the match was not in from (or, with ch.Token, no longer under that
// claim): someone else moved it first. The caller checks the table.
//
// ch.Card is written to the outbox by the move's own statement, only when
// the match moved. Every move releases the claim: a move to ANALYZED
// carries the vacancy's card, and the outbox owns the delivery from then on.
//
// With ch.Pace (a relevant match), the user's rhythm decides the card's
// way in the same transaction (storage/vacancy_settings.go).
//
// With ch.Announce (a match a new search's first news waits on), a move
// that ends the last of that search's first matches without a card writes
// its "nothing new yet" note in the same transaction.
func (s *Matches) Transition(ctx context.Context, id int64, from, to vacancy.Status, ch vacancy.Change) (vacancy.Match, bool, error) {
	if ch.Pace != nil {
		return s.transitionPaced(ctx, id, from, to, ch)
	}
	if ch.Announce == nil {
		return transition(ctx, s.pool, id, from, to, ch, nil)
	}
	var m vacancy.Match
	var ok bool
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		var err error
		if m, ok, err = transition(ctx, tx, id, from, to, ch, nil); err != nil || !ok {
			return err
		}
		return settleFirstNews(ctx, tx, []int64{m.UserID}, []int64{id}, ch.Announce)
	})
	if err != nil {
		return vacancy.Match{}, false, err
	}
	return m, ok, nil
}

// batcher is what a pool and a transaction have in common for a batch.
type batcher interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// cardMark is where a relevant match's card is (vacancy_matches.card and
// card_at, written by the move itself; see transitionPaced).
type cardMark struct {
	card string
	at   time.Time
}

// moveMatchSQL is a match's move ($1 the match, $2 from, $3 to; the
// fields a Change leaves unset are NULL and keep the row's), without its
// RETURNING.
const moveMatchSQL = `
UPDATE vacancy_matches m SET
    status = $3, updated_at = now(),
    is_relevant = COALESCE($4, is_relevant), score = COALESCE($5, score), analysis = COALESCE($6::jsonb, analysis),
    skip_reason = CASE WHEN $3 = 'SKIPPED' THEN $7 ELSE '' END,
    chat_id = COALESCE($8, chat_id), message_id = COALESCE($9, message_id), sent_at = COALESCE($10, sent_at),
    claimed_until = NULL, claim_token = NULL,
    card = COALESCE($12, card), card_at = COALESCE($13, card_at), pasted_by = COALESCE($14::bigint, pasted_by)
WHERE id = $1 AND status = $2 AND ($11::uuid IS NULL OR claim_token = $11::uuid)`

// moveMatchWithCardSQL is the move writing its card ($15 on, queueRows).
var moveMatchWithCardSQL = `
WITH m AS (` + moveMatchSQL + `
    RETURNING m.*
), ` + queueRows(15, "m") + `
SELECT ` + matchColumns + ` FROM m`

func transition(ctx context.Context, q batcher, id int64, from, to vacancy.Status, ch vacancy.Change, mark *cardMark) (vacancy.Match, bool, error) {
	args, err := transitionArgs(id, from, to, ch, mark)
	if err != nil {
		return vacancy.Match{}, false, fmt.Errorf("transition match %d: %w", id, err)
	}
	stmt := moveMatchSQL + "\nRETURNING " + matchColumns
	if len(ch.Card) > 0 {
		// The card rides in the move's statement (queueRows): no
		// transaction of its own, and written only if the move happens.
		rows, err := queueArgs(ch.Card)
		if err != nil {
			return vacancy.Match{}, false, fmt.Errorf("transition match %d: %w", id, err)
		}
		stmt, args = moveMatchWithCardSQL, append(args, rows...)
	}
	m, ok, err := closeTurn(ctx, q, stmt, args, ch.Detail, ch.Token != "")
	if err != nil {
		return m, ok, fmt.Errorf("transition match %d %s → %s: %w", id, from, to, err)
	}
	return m, ok, nil
}

// closeTurn runs stmt, a statement on one match returning matchColumns,
// with the vacancy's detail fetched in the turn (nil: none); ok is false
// when stmt changed no row. claimed: stmt closes a worker's claim.
func closeTurn(ctx context.Context, q batcher, stmt string, args []any, detail *vacancy.Vacancy, claimed bool) (vacancy.Match, bool, error) {
	var m vacancy.Match
	var sent *time.Time
	// With a detail, both statements go in one batch: one round trip and
	// one implicit transaction (or the caller's). The match goes first: a
	// claim locks a match before its vacancy, and this must not lock them
	// the other way round.
	b := &pgx.Batch{}
	b.Queue(stmt, args...)
	if detail != nil {
		b.Queue(saveDetailSQL, detailArgs(*detail)...)
	}
	if claimed {
		// A move under a claim is the workers' own (a press has no
		// claim): its commit does not wait for the disk, as dispatch's
		// steps and the memory chat's stages (ARCHITECTURE "Commits").
		// Lost in a database crash, the match is QUEUED again and judged
		// again; its card, if any, was lost with it and never sent, since
		// a sender's claim commits synchronously and so flushes past it.
		b.Queue(setAsyncCommit)
	}
	br := q.SendBatch(ctx, b)
	defer br.Close()
	var analysis []byte
	err := br.QueryRow().Scan(matchDest(&m, &analysis, &sent)...)
	if detail != nil && (err == nil || errors.Is(err, pgx.ErrNoRows)) {
		// Stored even when the match had moved on: the detail is good, and
		// storing it ends the vacancy's fetch lease.
		if _, derr := br.Exec(); derr != nil {
			return vacancy.Match{}, false, fmt.Errorf("save vacancy %d detail: %w", detail.ID, derr)
		}
	}
	if err == nil {
		err = br.Close()
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return vacancy.Match{}, false, nil
	}
	if err != nil {
		return vacancy.Match{}, false, err
	}
	if err := finishMatch(&m, analysis, sent); err != nil {
		return m, true, err
	}
	return m, true, nil
}

// transitionArgs are the UPDATE's arguments for a move from → to with ch:
// the fields ch leaves unset are NULL, which keeps the row's.
func transitionArgs(id int64, from, to vacancy.Status, ch vacancy.Change, mark *cardMark) ([]any, error) {
	var relevant *bool
	var score *int
	var analysis []byte
	if ch.Verdict != nil {
		r := ch.Verdict.Relevant()
		relevant, score = &r, &ch.Verdict.Score
		var err error
		if analysis, err = json.Marshal(ch.Verdict); err != nil {
			return nil, err
		}
	}
	var token, sentAt any
	if ch.Token != "" {
		token = ch.Token
	}
	if !ch.SentAt.IsZero() {
		sentAt = ch.SentAt
	}
	var chat, msg any
	if ch.MessageID != 0 {
		chat, msg = ch.ChatID, ch.MessageID
	}
	var card, cardAt, pastedBy any
	if mark != nil {
		card = mark.card
		if !mark.at.IsZero() {
			cardAt = mark.at
		}
	}
	if ch.PastedBy != 0 {
		pastedBy = int64(ch.PastedBy)
	}
	return []any{id, from, to, relevant, score, analysis, ch.SkipReason, chat, msg, sentAt, token, card, cardAt, pastedBy}, nil
}

// Delete deletes a QUEUED or SKIPPED match (a ban word hit), and its
// vacancy if no other match holds it. With a token, only under that claim.
// With announce, a new search whose first matches have all ended without
// a card once this one is gone hears "nothing new yet" in the same
// transaction.
func (s *Matches) Delete(ctx context.Context, id int64, token string, announce domain.Render[[]vacancy.FirstNews]) (bool, error) {
	var tok any
	if token != "" {
		tok = token
	}
	deleted := false
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		var vid, uid int64
		err := tx.QueryRow(ctx, `DELETE FROM vacancy_matches
WHERE id = $1 AND status IN ('QUEUED', 'SKIPPED') AND ($2::uuid IS NULL OR claim_token = $2::uuid)
RETURNING vacancy_id, user_id`, id, tok).Scan(&vid, &uid)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		deleted = true
		if _, err = tx.Exec(ctx, `DELETE FROM vacancies v WHERE v.id = $1
AND NOT EXISTS (SELECT 1 FROM vacancy_matches m WHERE m.vacancy_id = v.id)`, vid); err != nil {
			return err
		}
		if announce == nil {
			return nil
		}
		return settleFirstNews(ctx, tx, []int64{uid}, []int64{id}, announce)
	})
	if err != nil {
		return false, fmt.Errorf("delete match %d: %w", id, err)
	}
	return deleted, nil
}

// WithVacancy returns one match and its vacancy, or domain.ErrNotFound.
func (s *Matches) WithVacancy(ctx context.Context, id int64) (vacancy.Match, vacancy.Vacancy, error) {
	var m vacancy.Match
	var v vacancy.Vacancy
	var analysis []byte
	var sent, fetched *time.Time
	dest := append(matchDest(&m, &analysis, &sent), vacancyDest(&v, &fetched)...)
	err := s.pool.QueryRow(ctx, `SELECT `+matchColumns+`, `+vacancyColumns+`
FROM vacancy_matches m JOIN vacancies v ON v.id = m.vacancy_id WHERE m.id = $1`, id).Scan(dest...)
	if err != nil {
		return m, v, fmt.Errorf("match %d: %w", id, interpretError(err))
	}
	return m, v, finishMatch(&m, analysis, sent)
}

// Skipped lists SKIPPED matches created since since, by id after afterID.
func (s *Matches) Skipped(ctx context.Context, since time.Time, afterID int64, limit int) ([]vacancy.SkippedMatch, error) {
	rows, err := s.pool.Query(ctx, `
SELECT `+matchColumns+`, v.title, v.snippet, v.description, v.employer, `+exclusionsSQL("m.user_id")+`
FROM vacancy_matches m JOIN vacancies v ON v.id = m.vacancy_id
WHERE m.status = 'SKIPPED' AND m.created_at >= $1 AND m.id > $2
ORDER BY m.id LIMIT $3`, since, afterID, limit)
	if err != nil {
		return nil, fmt.Errorf("skipped matches: %w", err)
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (vacancy.SkippedMatch, error) {
		var sm vacancy.SkippedMatch
		var analysis []byte
		var sent *time.Time
		v := &sm.Vacancy
		dest := append(matchDest(&sm.Match, &analysis, &sent), &v.Title, &v.Snippet, &v.Description, &v.Employer)
		dest = append(dest, exclusionsDest(&sm.Exclusions)...)
		if err := row.Scan(dest...); err != nil {
			return sm, fmt.Errorf("skipped matches: %w", err)
		}
		return sm, finishMatch(&sm.Match, analysis, sent)
	})
}

// transitionSQL fills a statement moving matches from → to (%[1]s, %[2]s)
// after the workflow's transition table allowed the move; a move the table
// refuses is a programming error, caught at start-up.
func transitionSQL(from, to vacancy.Status, sql string) string {
	if !vacancy.CanTransition(from, to) {
		panic(fmt.Sprintf("storage: vacancy transition %s → %s not in the table", from, to))
	}
	return fmt.Sprintf(sql, from, to)
}

// QueueChannel is the workflow's: the statements that queue matches
// notify it.
const QueueChannel = vacancy.QueueChannel

// Skills counts the skills HH lists on the vacancies of the user's
// relevant matches created since: per skill, case folded, the number of
// vacancies listing it, under the spelling most of them used.
func (s *Matches) Skills(ctx context.Context, userID int64, since time.Time, top int) (int, int, []vacancy.SkillCount, error) {
	var matched, with int
	err := s.pool.QueryRow(ctx, `
SELECT count(*), count(*) FILTER (WHERE cardinality(v.key_skills) > 0)
FROM vacancy_matches m JOIN vacancies v ON v.id = m.vacancy_id
WHERE m.user_id = $1 AND m.is_relevant AND m.created_at >= $2`, userID, since).Scan(&matched, &with)
	if err != nil {
		return 0, 0, nil, fmt.Errorf("matched skills of user %d: %w", userID, err)
	}
	rows, err := s.pool.Query(ctx, `
WITH listed AS (
    -- One row per vacancy and skill, however often HH repeats it.
    SELECT DISTINCT v.id, lower(btrim(k)) AS skill, btrim(k) AS spelling
    FROM vacancy_matches m JOIN vacancies v ON v.id = m.vacancy_id, unnest(v.key_skills) AS k
    WHERE m.user_id = $1 AND m.is_relevant AND m.created_at >= $2 AND btrim(k) <> ''
)
SELECT (SELECT l.spelling FROM listed l WHERE l.skill = c.skill
        GROUP BY l.spelling ORDER BY count(*) DESC, l.spelling LIMIT 1),
       c.n
FROM (SELECT skill, count(DISTINCT id) AS n FROM listed GROUP BY skill) c
ORDER BY c.n DESC, c.skill
LIMIT $3`, userID, since, top)
	if err != nil {
		return 0, 0, nil, fmt.Errorf("matched skills of user %d: %w", userID, err)
	}
	skills, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (vacancy.SkillCount, error) {
		var c vacancy.SkillCount
		return c, row.Scan(&c.Name, &c.Vacancies)
	})
	if err != nil {
		return 0, 0, nil, fmt.Errorf("matched skills of user %d: %w", userID, err)
	}
	return matched, with, skills, nil
}

// Linked reads the user's match of a vacancy whose link they pasted, with
// the vacancy, whether a live claim holds it, whether the vacancy's
// detail is older than detailFresh, and the message whose paste last wrote
// its card; Found is false when there is none.
func (s *Matches) Linked(ctx context.Context, userID, vacancyID int64, detailFresh time.Duration) (vacancy.LinkedMatch, error) {
	var l vacancy.LinkedMatch
	var analysis []byte
	var sent, fetched *time.Time
	dest := append(matchDest(&l.Match, &analysis, &sent), vacancyDest(&l.Vacancy, &fetched)...)
	dest = append(dest, &l.Claimed, &l.DetailStale, &l.PastedBy)
	err := s.pool.QueryRow(ctx, `SELECT `+matchColumns+`, `+vacancyColumns+`,
       COALESCE(m.claimed_until > now(), false),
       v.detail_fetched_at IS NULL OR v.detail_fetched_at <= now() - $3 * interval '1 millisecond',
       COALESCE(m.pasted_by, 0)
FROM vacancy_matches m JOIN vacancies v ON v.id = m.vacancy_id
WHERE m.user_id = $1 AND m.vacancy_id = $2`, userID, vacancyID, detailFresh.Milliseconds()).Scan(dest...)
	if errors.Is(err, pgx.ErrNoRows) {
		return vacancy.LinkedMatch{}, nil
	}
	if err != nil {
		return l, fmt.Errorf("match of user %d for vacancy %d: %w", userID, vacancyID, err)
	}
	l.Found = true
	return l, finishMatch(&l.Match, analysis, sent)
}

// Recipient reads the user as a judgement needs them: language, profile
// and taste, as Claim reads them with a claimed match (domain.ErrNotFound
// for an unknown user).
func (s *Matches) Recipient(ctx context.Context, userID int64, taste int) (vacancy.Recipient, error) {
	r := vacancy.Recipient{ID: userID}
	var lang, tgLang string
	var liked []byte
	dest := append([]any{&lang, &tgLang, &r.Profile}, exclusionsDest(&r.Exclusions)...)
	// m is the user alone: tasteLikedSQL reads m.user_id.
	err := s.pool.QueryRow(ctx, `
SELECT u.language, u.telegram_language, u.profile, `+exclusionsSQL("m.user_id")+`,
       `+tasteLikedSQL+`,
       ARRAY(SELECT t.title FROM vacancy_matches d JOIN vacancies t ON t.id = d.vacancy_id
             WHERE d.user_id = m.user_id AND d.status = 'NOT_INTERESTED' ORDER BY d.updated_at DESC, d.id DESC LIMIT $2)
FROM (SELECT $1::bigint AS user_id) m JOIN users u ON u.id = m.user_id`, userID, taste).
		Scan(append(dest, &liked, &r.NotInterested)...)
	if err != nil {
		return r, fmt.Errorf("recipient %d: %w", userID, interpretError(err))
	}
	if r.Liked, err = likedExamples(liked); err != nil {
		return r, err
	}
	r.Lang = domain.User{Language: lang, TelegramLanguage: tgLang}.Lang()
	return r, nil
}

// claimLinkedSQL claims the user's ($1) match of a vacancy ($2) in status
// $4 for $3 ms, unless a live claim holds it; a NEW or SKIPPED one is
// taken to QUEUED on the way, the steps recovery takes back to back.
var claimLinkedSQL = transitionSQL(vacancy.New, vacancy.Queued, transitionSQL(vacancy.Skipped, vacancy.New, `
UPDATE vacancy_matches m SET status = '%%[2]s', skip_reason = '', claimed_until = now() + $3 * interval '1 millisecond',
    claim_token = gen_random_uuid(), claimed_by = NULL, attempts = m.attempts + 1, updated_at = now(),
    `+tookOverSQL+`
WHERE m.user_id = $1 AND m.vacancy_id = $2 AND m.status = $4 AND m.status IN ('%[1]s', '%%[1]s', '%%[2]s')
  AND (m.claimed_until IS NULL OR m.claimed_until < now())
RETURNING `+matchColumns))

// ClaimLinked claims the user's match of a vacancy whose link they pasted,
// for judging now. With from "" it creates the match QUEUED under the
// claim, and the vacancy's row if nobody has it (its detail is stored
// with the match's move, as a worker's is): ON CONFLICT, so of two pastes
// at once one creates it and the other is told ok false. With from NEW,
// QUEUED or SKIPPED it claims the match in that status, taking it to
// QUEUED; ok is false when it is in another status now or a live claim
// (a worker's, another paste's) holds it.
func (s *Matches) ClaimLinked(ctx context.Context, userID int64, v vacancy.Vacancy, from vacancy.Status, lease time.Duration) (vacancy.Match, bool, error) {
	var m vacancy.Match
	var analysis []byte
	var sent *time.Time
	var row pgx.Row
	if from != "" {
		row = s.pool.QueryRow(ctx, claimLinkedSQL, userID, v.ID, lease.Milliseconds(), from)
	} else {
		b := &pgx.Batch{}
		queueVacancy(b, v)
		b.Queue(`
INSERT INTO vacancy_matches AS m (user_id, vacancy_id, status, published_at, claimed_until, claim_token, attempts)
SELECT $1, v.id, 'QUEUED', v.published_at, now() + $3 * interval '1 millisecond', gen_random_uuid(), 1
FROM vacancies v WHERE v.id = $2
ON CONFLICT (user_id, vacancy_id) DO NOTHING
RETURNING `+matchColumns, userID, v.ID, lease.Milliseconds())
		// One batch is one implicit transaction: the vacancy and its match
		// are there together or not at all.
		br := s.pool.SendBatch(ctx, b)
		defer br.Close()
		if _, err := br.Exec(); err != nil {
			return m, false, fmt.Errorf("claim linked vacancy %d for user %d: save vacancy: %w", v.ID, userID, err)
		}
		row = br.QueryRow()
	}
	err := row.Scan(matchDest(&m, &analysis, &sent)...)
	if errors.Is(err, pgx.ErrNoRows) {
		return m, false, nil
	}
	if err != nil {
		return m, false, fmt.Errorf("claim linked vacancy %d for user %d: %w", v.ID, userID, err)
	}
	return m, true, finishMatch(&m, analysis, sent)
}

// MarkPasted records pastedBy on match id as the message that asked for
// its card while a worker judged it; see vacancy.Matches.
func (s *Matches) MarkPasted(ctx context.Context, id int64, pastedBy int) error {
	if _, err := s.pool.Exec(ctx, `UPDATE vacancy_matches SET pasted_by = $2 WHERE id = $1`, id, int64(pastedBy)); err != nil {
		return fmt.Errorf("mark match %d pasted: %w", id, err)
	}
	return nil
}

// ShowCard writes a card of a match again, with no change of status, in
// the transaction that checks the match is still in status (locking it,
// so a press deciding it meanwhile waits or is seen). A card a digest
// waits to list or lists is written now: marked opened, as a digest's
// press marks it, so no digest offers it again.
//
// pastedBy (0: none) is the message whose paste asks for the card: it is
// recorded on the match, and a match whose card that very message wrote
// already (its update handled a second time) is not shown again, since
// the card rides in this statement's transaction, not under the update's
// outbox origin.
func (s *Matches) ShowCard(ctx context.Context, id int64, status vacancy.Status, pastedBy int, card []domain.Message) (bool, error) {
	shown, err := s.execTelling(ctx, card, `UPDATE vacancy_matches
SET card = CASE WHEN status = 'ANALYZED' AND card IN ('digest', 'listed') THEN 'opened' ELSE card END,
    pasted_by = COALESCE(NULLIF($3::bigint, 0), pasted_by)
WHERE id = $1 AND status = $2 AND ($3::bigint = 0 OR pasted_by IS DISTINCT FROM $3::bigint)`, id, status, int64(pastedBy))
	if err != nil {
		return false, fmt.Errorf("show card of match %d: %w", id, err)
	}
	return shown, nil
}
