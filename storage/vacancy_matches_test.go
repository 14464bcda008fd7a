package storage_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"switchboard/domain"
	"switchboard/domain/vacancy"
	"switchboard/storage"
)

// An ANALYZED match is never claimed: its card is in the outbox, and its
// delivery makes it SENT_TO_USER. A QUEUED match older than it is claimed.
func TestAnalyzedMatchIsNeverClaimed(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx, st, exec := f.ctx, f.st, f.exec
	f.users(domain.User{}, 7)
	exec(`INSERT INTO vacancies (id, title, published_at) VALUES (1, 'queued', now()), (2, 'carded', now() + interval '1 minute')`)
	// 2 is newer, so a claim would take it first if it were claimable.
	exec(`INSERT INTO vacancy_matches (user_id, vacancy_id, status, published_at, is_relevant)
VALUES (7, 1, 'QUEUED', now(), NULL), (7, 2, 'ANALYZED', now() + interval '1 minute', true)`)
	var queued, carded int64
	require.NoError(t, st.Pool().QueryRow(ctx, `SELECT id FROM vacancy_matches WHERE vacancy_id = 1`).Scan(&queued))
	require.NoError(t, st.Pool().QueryRow(ctx, `SELECT id FROM vacancy_matches WHERE vacancy_id = 2`).Scan(&carded))
	require.NoError(t, st.Outbox().Enqueue(ctx, domain.Message{ChatID: 7, Kind: domain.KindVacancy, Ref: carded, Text: "carded"}))

	c, ok, err := st.Matches().Claim(ctx, vacancy.ClaimOptions{ClaimLease: time.Minute, Taste: 5, DetailFresh: time.Hour})
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, queued, c.Match.ID, "the carded match waits for the outbox")
	exec(`UPDATE vacancy_matches SET claimed_until = now() - interval '1 hour'`)
	exec(`DELETE FROM vacancy_matches WHERE id = $1`, queued)
	_, ok, err = st.Matches().Claim(ctx, vacancy.ClaimOptions{ClaimLease: time.Minute, Taste: 5, DetailFresh: time.Hour})
	require.NoError(t, err)
	require.False(t, ok, "an ANALYZED match is not claimable")

	q, err := st.Outbox().Claim(ctx, "", 10, time.Minute)
	require.NoError(t, err)
	require.Len(t, q, 1)
	ok, err = st.Outbox().Delivered(ctx, q[0], 555)
	require.NoError(t, err)
	require.True(t, ok)
	m, _, err := st.Matches().WithVacancy(ctx, carded)
	require.NoError(t, err)
	require.Equal(t, vacancy.SentToUser, m.Status)
	require.Equal(t, 555, m.MessageID)
	require.EqualValues(t, 7, m.ChatID)
	require.False(t, m.SentAt.IsZero())
}

// /skills counts each skill once a vacancy, case folded, under the
// spelling most vacancies used, over the user's relevant matches of the
// window only.
func TestMatchedSkills(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx, st, exec := f.ctx, f.st, f.exec
	f.users(domain.User{}, 7, 8)
	exec(`INSERT INTO vacancies (id, title, published_at, key_skills) VALUES
 (1, 'a', now(), '{Go,PostgreSQL,Docker}'),
 (2, 'b', now(), '{go,Go,Kubernetes}'),
 (3, 'c', now(), '{GO, PostgreSQL }'),
 (4, 'd', now(), '{}'),
 (5, 'judged not relevant', now(), '{Java}'),
 (6, 'too old', now(), '{Rust}'),
 (7, 'someone else''s', now(), '{Python}')`)
	exec(`INSERT INTO vacancy_matches (user_id, vacancy_id, status, published_at, is_relevant, created_at, sent_at, message_id) VALUES
 (7, 1, 'SENT_TO_USER', now(), true, now(), now(), 1),
 (7, 2, 'SENT_TO_USER', now(), true, now() - interval '10 days', now(), 2),
 (7, 3, 'ANALYZED', now(), true, now(), NULL, NULL),
 (7, 4, 'NOT_INTERESTED', now(), true, now(), now(), 4),
 (7, 5, 'NOT_SUITABLE', now(), false, now(), NULL, NULL),
 (7, 6, 'SENT_TO_USER', now(), true, now() - interval '40 days', now(), 6),
 (8, 7, 'SENT_TO_USER', now(), true, now(), now(), 7)`)
	exec(`UPDATE vacancy_matches SET status = 'APPLIED', applied_at = now(), reported_at = now() WHERE vacancy_id = 2`)

	matched, with, skills, err := st.Matches().Skills(ctx, 7, time.Now().Add(-30*24*time.Hour), 10)
	require.NoError(t, err)
	require.Equal(t, 4, matched, "relevant matches of the window: 1, 2, 3, 4")
	require.Equal(t, 3, with, "4 lists no skills")
	require.Equal(t, []vacancy.SkillCount{
		{Name: "Go", Vacancies: 3},         // once per vacancy; "Go" twice, "go" and "GO" once each
		{Name: "PostgreSQL", Vacancies: 2}, // trimmed
		{Name: "Docker", Vacancies: 1},
		{Name: "Kubernetes", Vacancies: 1},
	}, skills)

	_, _, top, err := st.Matches().Skills(ctx, 7, time.Now().Add(-30*24*time.Hour), 2)
	require.NoError(t, err)
	require.Len(t, top, 2)

	matched, with, skills, err = st.Matches().Skills(ctx, 9, time.Now().Add(-30*24*time.Hour), 10)
	require.NoError(t, err)
	require.Zero(t, matched)
	require.Zero(t, with)
	require.Empty(t, skills)
}

// A digest slot is handled once, however many replicas and runs reach it
// at once: one digest, one message, every waiting match listed in it; a
// slot with nothing judged by then is handled all the same, and an
// earlier slot than the last handled does nothing.
func TestWriteDigestOncePerSlot(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx, st, exec := f.ctx, f.st, f.exec
	f.users(domain.User{}, 7)
	_, err := st.Matches().TuneRhythm(ctx, 7, func(r vacancy.Rhythm) (vacancy.Rhythm, error) {
		r.Mode, r.DigestSize = vacancy.ModeDigest, 2
		return r, nil
	})
	require.NoError(t, err)
	slot := time.Now().Truncate(time.Second)
	exec(`INSERT INTO vacancies (id, title, published_at) SELECT g, 'v' || g, now() FROM generate_series(1, 3) g`)
	exec(`INSERT INTO vacancy_matches (user_id, vacancy_id, status, published_at, is_relevant, score, card, card_at)
SELECT 7, g, 'ANALYZED', now(), true, 50 + g, 'digest', $1::timestamptz - interval '1 minute' FROM generate_series(1, 3) g`, slot)
	// Judged after the slot: waits for the next one.
	exec(`INSERT INTO vacancies (id, title, published_at) VALUES (4, 'later', now())`)
	exec(`INSERT INTO vacancy_matches (user_id, vacancy_id, status, published_at, is_relevant, score, card, card_at)
VALUES (7, 4, 'ANALYZED', now(), true, 99, 'digest', $1::timestamptz + interval '1 minute')`, slot)

	tell := func(d vacancy.Digest) []domain.Message {
		return []domain.Message{{ChatID: d.UserID, Kind: domain.KindDigest, Ref: d.ID, Text: "digest"}}
	}
	var wg sync.WaitGroup
	var written atomic.Int32
	for range 4 {
		wg.Go(func() {
			d, ok, err := st.Matches().WriteDigest(ctx, 7, slot, tell)
			assert.NoError(t, err)
			if ok {
				written.Add(1)
				assert.Equal(t, 3, d.Total)
				assert.Len(t, d.Items, 2, "the first page")
			}
		})
	}
	wg.Wait()
	require.EqualValues(t, 1, written.Load(), "one caller handles the slot")
	require.Equal(t, 1, f.count(`SELECT count(*) FROM vacancy_digests WHERE user_id = 7`))
	require.Equal(t, 1, f.count(`SELECT count(*) FROM outbox WHERE kind = 'digest' AND chat_id = 7`))
	require.Equal(t, 3, f.count(`SELECT count(*) FROM vacancy_matches WHERE card = 'listed' AND digest_id IS NOT NULL`))
	require.Equal(t, 1, f.count(`SELECT count(*) FROM vacancy_matches WHERE card = 'digest'`), "the later one waits")

	_, ok, err := st.Matches().WriteDigest(ctx, 7, slot.Add(-time.Hour), tell)
	require.NoError(t, err)
	require.False(t, ok, "an earlier slot than the last handled")
	_, ok, err = st.Matches().WriteDigest(ctx, 7, slot.Add(30*time.Second), tell)
	require.NoError(t, err)
	require.True(t, ok, "a later slot with nothing judged by then is handled")
	require.Equal(t, 1, f.count(`SELECT count(*) FROM vacancy_digests WHERE user_id = 7`), "and writes no digest")
}

// A turn is counted once, under its claim: Fail and PutBack with a token
// that is no longer the match's count nothing (the claim that took the
// match over counted the lost turn as a wait), of two closes of one turn
// racing (two replicas, or a save retried after its answer was lost) one
// counts, and the failure at the bound moves the match to SKIPPED in the
// same statement that counts it.
func TestATurnIsCountedOnceUnderItsClaim(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx, ms := f.ctx, f.st.Matches()
	f.users(domain.User{}, 7)
	f.exec(`INSERT INTO vacancies (id, title, published_at) VALUES (1, 'go', now())`)
	f.exec(`INSERT INTO vacancy_matches (user_id, vacancy_id, status, published_at) VALUES (7, 1, 'QUEUED', now())`)
	opts := vacancy.ClaimOptions{ClaimLease: time.Minute, Taste: 5, DetailFresh: time.Hour}
	claim := func(tookOver bool) vacancy.Claim {
		t.Helper()
		c, ok, err := ms.Claim(ctx, opts)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, tookOver, c.TookOver)
		return c
	}
	// ended: no claim holds the match, and none may take it before its time.
	row := func() (failures, waits int, status, reason, waitReason string, ended bool) {
		t.Helper()
		require.NoError(t, f.st.Pool().QueryRow(ctx, `SELECT failures, waits, status, skip_reason, wait_reason,
    claim_token IS NULL AND (claimed_until IS NULL OR claimed_until > now()) FROM vacancy_matches`).
			Scan(&failures, &waits, &status, &reason, &waitReason, &ended))
		return
	}
	fail := vacancy.Failure{Reason: vacancy.ReasonLLMError, Max: 2, RetryAfter: time.Hour}

	lost := claim(false)
	f.exec(`UPDATE vacancy_matches SET claimed_until = now() - interval '1 second'`)
	c := claim(true)
	require.Equal(t, 1, c.Match.Waits)
	require.Equal(t, vacancy.ReasonLeaseLost, c.Match.WaitReason)
	_, ok, err := ms.Fail(ctx, lost.Match.ID, lost.Match.ClaimToken, fail)
	require.NoError(t, err)
	require.False(t, ok, "the lost claim's failure comes too late")
	require.NoError(t, ms.PutBack(ctx, lost.Match.ID, lost.Match.ClaimToken, 0, vacancy.ReasonShutdown))
	failures, waits, status, _, waitReason, _ := row()
	require.Equal(t, []any{0, 1, "QUEUED", vacancy.ReasonLeaseLost}, []any{failures, waits, status, waitReason})

	var wins atomic.Int32
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			m, ok, err := ms.Fail(ctx, c.Match.ID, c.Match.ClaimToken, fail)
			assert.NoError(t, err)
			if ok {
				wins.Add(1)
				assert.Equal(t, 1, m.Failures)
				assert.Equal(t, vacancy.Queued, m.Status)
			}
		})
	}
	wg.Wait()
	require.Equal(t, int32(1), wins.Load())
	failures, _, status, reason, _, ended := row()
	require.Equal(t, []any{1, "QUEUED", "", true}, []any{failures, status, reason, ended}, "retried later, its claim ended")

	f.exec(`UPDATE vacancy_matches SET claimed_until = now()`)
	c = claim(false)
	m, ok, err := ms.Fail(ctx, c.Match.ID, c.Match.ClaimToken, fail)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, vacancy.Skipped, m.Status)
	require.Equal(t, vacancy.ReasonLLMError, m.SkipReason)
	failures, waits, status, reason, _, _ = row()
	require.Equal(t, []any{2, 1, "SKIPPED", vacancy.ReasonLLMError}, []any{failures, waits, status, reason})
	_, ok, err = ms.Claim(ctx, opts)
	require.NoError(t, err)
	require.False(t, ok, "a SKIPPED match waits for recovery")
}

// The vacancy queue /status shows counts the queued matches, those of them
// given back unjudged (with their commonest reason) and those failed below
// the bound, and the SKIPPED ones within the recovery window; a match
// judged or skipped long ago counts nowhere.
func TestMatchQueueStats(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx, ms := f.ctx, f.st.Matches()
	f.users(domain.User{}, 7)
	queue := func() storage.MatchQueue {
		t.Helper()
		q, err := ms.QueueStats(ctx, 48*time.Hour)
		require.NoError(t, err)
		return q
	}
	require.Equal(t, storage.MatchQueue{}, queue())
	for id := 1; id <= 8; id++ {
		f.exec(`INSERT INTO vacancies (id, title, published_at) VALUES ($1, 'go', now())`, id)
	}
	f.exec(`INSERT INTO vacancy_matches (user_id, vacancy_id, status, published_at)
SELECT 7, id, 'QUEUED', now() FROM vacancies WHERE id <= 5`)
	f.exec(`INSERT INTO vacancy_matches (user_id, vacancy_id, status, published_at, skip_reason, created_at, is_relevant) VALUES
    (7, 6, 'SKIPPED', now(), 'llm_error', now() - interval '1 hour', NULL),
    (7, 7, 'SKIPPED', now(), 'llm_error', now() - interval '72 hours', NULL),
    (7, 8, 'ANALYZED', now(), '', now(), true)`)
	opts := vacancy.ClaimOptions{ClaimLease: time.Minute, Taste: 5, DetailFresh: time.Hour}
	turn := func(end func(c vacancy.Claim) error) {
		t.Helper()
		c, ok, err := ms.Claim(ctx, opts)
		require.NoError(t, err)
		require.True(t, ok)
		require.NoError(t, end(c))
	}
	putBack := func(reason string) func(c vacancy.Claim) error {
		return func(c vacancy.Claim) error { return ms.PutBack(ctx, c.Match.ID, c.Match.ClaimToken, time.Hour, reason) }
	}
	turn(putBack(vacancy.ReasonHHBlocked))
	turn(putBack(vacancy.ReasonBreakerOpen))
	turn(putBack(vacancy.ReasonBreakerOpen))
	turn(func(c vacancy.Claim) error {
		_, ok, err := ms.Fail(ctx, c.Match.ID, c.Match.ClaimToken, vacancy.Failure{Reason: vacancy.ReasonLLMError, Max: 3, RetryAfter: time.Hour})
		require.True(t, ok)
		return err
	})
	require.Equal(t, storage.MatchQueue{Queued: 5, Waiting: 3, Retrying: 1, Skipped: 1, WaitReason: vacancy.ReasonBreakerOpen}, queue())
}
