package vacancy_test

import (
	"context"
	"io/fs"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"switchboard/domain"
	"switchboard/domain/domaintest"
	"switchboard/domain/vacancy"
	"switchboard/hh/hhtest"
	"switchboard/llm"
	"switchboard/llm/llmtest"
	"switchboard/migrations"
	"switchboard/storage"
)

const seeker = 7

// queue puts vs on the fake HH, gives the seeker a profile and a search,
// and fetches, leaving one QUEUED match per vacancy.
func (b *bundle) queue(t *testing.T, vs ...hhtest.Vacancy) {
	t.Helper()
	b.hh.Add(vs...)
	b.user(t, seeker, "Go developer, five years of backend work; remote only")
	b.search(t, seeker, "golang")
	require.NoError(t, b.svc.Fetch(b.ctx))
	require.Equal(t, len(vs), b.counts(t)[vacancy.Queued])
}

func (b *bundle) drain(t *testing.T) int {
	t.Helper()
	n, err := b.svc.Drain(b.ctx)
	require.NoError(t, err)
	return n
}

func (b *bundle) skipReason(t *testing.T, vacancyID int64) string {
	t.Helper()
	var r string
	require.NoError(t, b.store.Pool().QueryRow(b.ctx,
		`SELECT skip_reason FROM vacancy_matches WHERE vacancy_id = $1 AND user_id = $2`, vacancyID, seeker).Scan(&r))
	return r
}

// QUEUED → ANALYZED (card queued) → SENT_TO_USER on delivery, newest
// published first, with the vacancy reduced to plain text in the prompt.
func TestProcessDeliversRelevantNewestFirst(t *testing.T) {
	t.Parallel()
	b := setupRelevant(t)
	vs := vacancies(3, 500, 10)
	vs[2].Description = "<p>We build <strong>payments</strong> in Go &amp; Rust.</p><ul><li>gRPC</li><li>PostgreSQL</li></ul><script>x()</script>"
	b.queue(t, vs...)

	require.Equal(t, 3, b.drain(t))
	for _, v := range vs {
		require.Equal(t, vacancy.Analyzed, b.status(t, seeker, id(v)), "waiting for the outbox")
	}
	require.Equal(t, 3.0, b.counter(t, "vacancy_matches_processed_total", "queued"))
	require.Equal(t, 3, b.deliverOutbox(t))
	for _, v := range vs {
		require.Equal(t, vacancy.SentToUser, b.status(t, seeker, id(v)))
	}
	got := b.sent.deliveries()
	require.Len(t, got, 3)
	require.Equal(t, []int64{502, 501, 500}, []int64{got[0].Vacancy.ID, got[1].Vacancy.ID, got[2].Vacancy.ID}, "newest first")
	require.Equal(t, 80, got[0].Verdict.Score)
	require.Equal(t, []string{"Go matches"}, got[0].Verdict.Reasons)
	require.Equal(t, "en", got[0].Lang)

	var sentAt *time.Time
	var msg int64
	require.NoError(t, b.store.Pool().QueryRow(b.ctx, `SELECT sent_at, message_id FROM vacancy_matches WHERE vacancy_id = 502`).
		Scan(&sentAt, &msg))
	require.NotNil(t, sentAt)
	require.NotZero(t, msg)
	// The detail fetched from HH was stored with the transition.
	var desc string
	var fetched *time.Time
	require.NoError(t, b.store.Pool().QueryRow(b.ctx, `SELECT description, detail_fetched_at FROM vacancies WHERE id = 502`).
		Scan(&desc, &fetched))
	require.Equal(t, vs[2].Description, desc)
	require.NotNil(t, fetched)

	prompt := b.llm.RequestsFor("relevance")[0].Prompt
	require.Contains(t, prompt, "five years of backend work")
	require.Contains(t, prompt, "We build payments in Go & Rust.")
	require.Contains(t, prompt, "• gRPC")
	require.NotContains(t, prompt, "<strong>")
	require.NotContains(t, prompt, "x()")
}

func TestProcessNotRelevantIsFinal(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.llm.On().Named("relevance").ReplyJSON(map[string]any{"is_relevant": false, "score": 12, "reasons": []string{"PHP"}, "matched_skills": []string{}})
	vs := vacancies(1, 500, 11)
	b.queue(t, vs...)
	b.drain(t)
	require.Equal(t, vacancy.NotSuitable, b.status(t, seeker, 500))
	require.Empty(t, b.sent.deliveries())
	require.Equal(t, 0, b.drain(t), "nothing left to claim")
}

// HH's 404 is checked before anything costly: no LLM call.
func TestProcessArchivedVacancy(t *testing.T) {
	t.Parallel()
	b := setupRelevant(t)
	vs := vacancies(2, 500, 12)
	b.queue(t, vs...)
	b.hh.Archive("500")
	b.drain(t)
	b.deliverOutbox(t)
	require.Equal(t, vacancy.InArchive, b.status(t, seeker, 500))
	require.Equal(t, vacancy.SentToUser, b.status(t, seeker, 501))
	require.Equal(t, 1, b.llm.Calls("relevance"))
}

// A ban word added after the matches were queued: in the full
// description it deletes the match once fetched, and the vacancy when no
// other user's match holds it, without asking the LLM; in the title it
// deletes the match before HH is asked for the detail.
func TestProcessBanWordInDescriptionDeletes(t *testing.T) {
	t.Parallel()
	b := setupRelevant(t)
	vs := vacancies(3, 500, 13)
	vs[0].Description = "<p>Поддержка сайтов на 1С-<b>Битрикс</b>.</p>"
	vs[1].Description = "<p>Поддержка сайтов на 1С-<b>Битрикс</b>.</p>"
	vs[2].Name = "Golang и 1С-Битрикс"
	b.queue(t, vs...)
	b.user(t, 8, "")
	b.search(t, 8, "golang") // user 8 gets them from the shared hits, without the ban
	_, _, err := b.svc.Ban(b.ctx, seeker, "битрикс")
	require.NoError(t, err)
	b.exec(t, `DELETE FROM vacancy_matches WHERE user_id = 8 AND vacancy_id IN (500, 502)`)

	b.drain(t)
	b.deliverOutbox(t)
	require.Equal(t, "(none)", string(b.status(t, seeker, 500)))
	require.Equal(t, "(none)", string(b.status(t, seeker, 501)))
	require.Equal(t, "(none)", string(b.status(t, seeker, 502)))
	require.Equal(t, 1, b.hh.DetailCalls("500"), "the description is read once fetched")
	require.Zero(t, b.hh.DetailCalls("502"), "the title is enough: HH is not asked")
	require.Equal(t, vacancy.SentToUser, b.status(t, 8, 501))
	var left []int64
	require.NoError(t, b.store.Pool().QueryRow(b.ctx, `SELECT array_agg(id ORDER BY id) FROM vacancies`).Scan(&left))
	require.Equal(t, []int64{501}, left, "500 and 502 had no other match; 501 is user 8's")
	require.Equal(t, 1, b.llm.Calls("relevance"), "only user 8's match was judged")
	require.Len(t, b.hits(t, b.search(t, seeker, "golang").Key), 3, "the search still remembers it saw them")
}

// HH failing for a vacancy is the match's failure: retried later, not
// SKIPPED at the first.
func TestProcessRetriesWhenHHFails(t *testing.T) {
	t.Parallel()
	b := setupRelevant(t)
	b.queue(t, vacancies(1, 500, 14)...)
	b.hh.FailNext(1, 503, hhtest.DetailEndpoint)
	require.Equal(t, 1, b.drain(t))
	require.Equal(t, vacancy.Queued, b.status(t, seeker, 500))
	require.Equal(t, turns{Attempts: 1, Failures: 1, FailureReason: vacancy.ReasonHHUnavailable, Status: vacancy.Queued},
		b.turns(t, 500))
	b.waitOver(t)
	require.Equal(t, 1, b.drain(t))
	require.Equal(t, 1, b.deliverOutbox(t))
	require.Equal(t, vacancy.SentToUser, b.status(t, seeker, 500))
}

// LLM errors are the matches' failures, retried later; once the breaker
// opens, the others wait QUEUED without calling the LLM at all, and
// nothing is SKIPPED.
func TestProcessFailsOnLLMErrorsAndWaitsOnOpenBreaker(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.llm.On().Named("relevance").Fault(llmtest.ServerError())
	b.queue(t, vacancies(5, 500, 15)...)
	b.drain(t)
	require.Equal(t, map[vacancy.Status]int{vacancy.Queued: 5}, b.counts(t))
	require.Equal(t, 3, b.llm.Calls("relevance"), "the breaker opened after three failures")
	for _, vid := range []int64{504, 503, 502} {
		require.Equal(t, turns{Attempts: 1, Failures: 1, FailureReason: vacancy.ReasonLLMError, Status: vacancy.Queued},
			b.turns(t, vid), "vacancy %d", vid)
	}
	for _, vid := range []int64{501, 500} {
		require.Equal(t, turns{Attempts: 1, Waits: 1, WaitReason: vacancy.ReasonBreakerOpen, Status: vacancy.Queued},
			b.turns(t, vid), "vacancy %d", vid)
	}
	// The three judged ones had their detail fetched, and it was kept
	// with the failure; the other two never got that far.
	withDetail := domaintest.Column[int64](t, b.ctx, b.store.Pool(), `SELECT id FROM vacancies WHERE detail_fetched_at IS NOT NULL ORDER BY id`)
	require.Equal(t, []int64{502, 503, 504}, withDetail)
	st, err := b.svc.Stats(b.ctx, seeker)
	require.NoError(t, err)
	require.True(t, st.LLMDown)
	require.Zero(t, st.Counts[vacancy.Skipped])
}

func TestProcessRetriesInvalidJSONOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.relevant().FaultNext(1, llmtest.InvalidJSON())
	b.queue(t, vacancies(1, 500, 16)...)
	b.drain(t)
	b.deliverOutbox(t)
	require.Equal(t, vacancy.SentToUser, b.status(t, seeker, 500))
	require.Equal(t, 2, b.llm.Calls("relevance"))

	b2 := setup(t)
	// Valid JSON that breaks the schema counts as invalid too.
	b2.llm.On().Named("relevance").Replies(`{"score": 50}`, `{"is_relevant": true, "score": 400}`)
	b2.queue(t, vacancies(1, 500, 16)...)
	b2.drain(t)
	require.Equal(t, turns{Attempts: 1, Failures: 1, FailureReason: vacancy.ReasonInvalidJSON, Status: vacancy.Queued},
		b2.turns(t, 500), "invalid twice: one failed turn")
	require.Equal(t, 2, b2.llm.Calls("relevance"))
}

// The user's latest decisions go into the prompt as examples of their
// taste, an application that got an offer first and marked so.
func TestProcessPromptCarriesTaste(t *testing.T) {
	t.Parallel()
	b := setupRelevant(t)
	b.queue(t, vacancies(4, 500, 17)...)
	b.exec(t, `UPDATE vacancies SET title = 'Staff Go engineer' WHERE id = 502`)
	b.exec(t, `UPDATE vacancy_matches SET status = 'OFFER', is_relevant = true, sent_at = now(), message_id = 3,
applied_at = now() - interval '9 days', invited_at = now() - interval '8 days', reported_at = now() - interval '7 days',
updated_at = now() - interval '7 days' WHERE vacancy_id = 502`)
	b.exec(t, `UPDATE vacancies SET title = 'Senior Rust engineer' WHERE id = 500`)
	b.exec(t, `UPDATE vacancies SET title = '1C programmer' WHERE id = 501`)
	b.exec(t, `UPDATE vacancy_matches SET status = 'APPLIED', is_relevant = true, sent_at = now(), message_id = 1, applied_at = now(), reported_at = now() WHERE vacancy_id = 500`)
	b.exec(t, `UPDATE vacancy_matches SET status = 'NOT_INTERESTED', is_relevant = true, sent_at = now(), message_id = 2 WHERE vacancy_id = 501`)
	b.drain(t)
	prompt := b.llm.RequestsFor("relevance")[0].Prompt
	require.Contains(t, prompt, "applied to, strongest signals first\n- Staff Go engineer (got an offer)\n- Senior Rust engineer\n")
	require.Contains(t, prompt, "not interesting\n- 1C programmer")
}

// A relevant verdict makes the match ANALYZED and writes its one card to
// the outbox in the same transaction, which also releases the claim: the
// match is not claimed again (it would be sent twice), and the card's
// delivery, not the worker, makes it SENT_TO_USER.
func TestProcessQueuesCardWithAnalyzed(t *testing.T) {
	t.Parallel()
	b := setupRelevant(t)
	b.queue(t, vacancies(1, 500, 18)...)
	matchID := b.matchID(t, seeker, 500)
	require.Empty(t, b.cards(t, matchID), "no card before the verdict")

	require.Equal(t, 1, b.drain(t))
	require.Equal(t, vacancy.Analyzed, b.status(t, seeker, 500))
	require.Equal(t, map[string]int{"pending": 1}, b.cards(t, matchID))
	var chat, ref int64
	var body string
	var token *string
	var claimed *time.Time
	require.NoError(t, b.store.Pool().QueryRow(b.ctx, `SELECT o.chat_id, o.ref, o.body->>'text', m.claim_token::text, m.claimed_until
FROM outbox o JOIN vacancy_matches m ON m.id = o.ref WHERE o.kind = 'vacancy'`).Scan(&chat, &ref, &body, &token, &claimed))
	require.EqualValues(t, seeker, chat)
	require.Equal(t, matchID, ref)
	require.Contains(t, body, "Score: 80/100")
	require.Nil(t, token, "the outbox owns the match: no claim")
	require.Nil(t, claimed)

	// A second pass, even with every lease long gone, finds nothing.
	b.exec(t, `UPDATE vacancy_matches SET claimed_until = now() - interval '1 hour'`)
	require.Equal(t, 0, b.drain(t))
	other := b.newService(t)
	n, err := other.Drain(b.ctx)
	require.NoError(t, err)
	require.Zero(t, n, "another replica finds nothing either")
	require.Equal(t, map[string]int{"pending": 1}, b.cards(t, matchID), "queued once")

	require.Equal(t, 1, b.deliverOutbox(t))
	var msgID, chatID int64
	var sentAt *time.Time
	require.NoError(t, b.store.Pool().QueryRow(b.ctx, `SELECT status, chat_id, message_id, sent_at FROM vacancy_matches WHERE id = $1`, matchID).
		Scan(new(string), &chatID, &msgID, &sentAt))
	require.Equal(t, vacancy.SentToUser, b.status(t, seeker, 500))
	require.EqualValues(t, seeker, chatID)
	require.NotZero(t, msgID)
	require.NotNil(t, sentAt)
	require.Equal(t, map[string]int{"sent": 1}, b.cards(t, matchID))
	require.Equal(t, 1, b.llm.Calls("relevance"), "judged once")
	require.Equal(t, 0, b.drain(t))
}

// The card and the transition commit together or not at all.
func TestAnalyzedAndCardAreOneTransaction(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.queue(t, vacancies(1, 500, 23)...)
	c, ok, err := b.store.Matches().Claim(b.ctx, vacancy.ClaimOptions{ClaimLease: time.Minute, Taste: 5, DetailFresh: time.Hour})
	require.NoError(t, err)
	require.True(t, ok)
	verdict := vacancy.Verdict{IsRelevant: new(bool), Score: 90}
	*verdict.IsRelevant = true
	card := b.sent.Card(vacancy.CardData{MatchID: c.Match.ID, UserID: seeker, Vacancy: c.Vacancy, Verdict: verdict})

	// Another worker's claim: nothing moves, nothing is queued.
	_, ok, err = b.store.Matches().Transition(b.ctx, c.Match.ID, vacancy.Queued, vacancy.Analyzed,
		vacancy.Change{Verdict: &verdict, Token: "00000000-0000-0000-0000-000000000000", Card: card})
	require.NoError(t, err)
	require.False(t, ok)
	require.Empty(t, b.cards(t, c.Match.ID))

	// A card the outbox refuses to store rolls the transition back.
	bad := append([]domain.Message(nil), card...)
	bad[0].ChatID = 0
	_, _, err = b.store.Matches().Transition(b.ctx, c.Match.ID, vacancy.Queued, vacancy.Analyzed,
		vacancy.Change{Verdict: &verdict, Token: c.Match.ClaimToken, Card: bad})
	require.Error(t, err)
	require.Equal(t, vacancy.Queued, b.status(t, seeker, 500))
	require.Empty(t, b.cards(t, c.Match.ID))

	m, ok, err := b.store.Matches().Transition(b.ctx, c.Match.ID, vacancy.Queued, vacancy.Analyzed,
		vacancy.Change{Verdict: &verdict, Token: c.Match.ClaimToken, Card: card})
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, vacancy.Analyzed, m.Status)
	require.Empty(t, m.ClaimToken)
	require.Equal(t, map[string]int{"pending": 1}, b.cards(t, c.Match.ID))
}

// A match ANALYZED with no card in the outbox (written by a version whose
// worker sent cards itself) would never be told. Migration 00022 puts such
// matches back in the queue once: judged again, they get their cards the
// usual way, each once.
func TestAnalyzedBeforeTheOutboxGetsItsCard(t *testing.T) {
	t.Parallel()
	b := setupRelevant(t)
	b.queue(t, vacancies(2, 500, 24)...)
	verdict := `{"is_relevant": true, "score": 66, "reasons": ["old"], "matched_skills": []}`
	// As the old worker left them: 500's delivery failed a while ago, 501's
	// was postponed for a day (the user had blocked the bot).
	b.exec(t, `UPDATE vacancy_matches SET status = 'ANALYZED', is_relevant = true, score = 66, analysis = $1,
    claim_token = gen_random_uuid(), claimed_until = CASE WHEN vacancy_id = 500 THEN now() - interval '1 second'
                                                          ELSE now() + interval '1 day' END`, verdict)
	m500, m501 := b.matchID(t, seeker, 500), b.matchID(t, seeker, 501)
	require.Equal(t, 0, b.drain(t), "an ANALYZED match is never claimed")

	b.exec(t, migrationUp(t, "00022_owed_vacancy_cards.sql"))
	require.Equal(t, 2, b.drain(t))
	require.Equal(t, 0, b.drain(t), "each card queued once")
	require.Equal(t, map[string]int{"pending": 1}, b.cards(t, m500))
	require.Equal(t, map[string]int{"pending": 1}, b.cards(t, m501))
	require.Equal(t, 2, b.llm.Calls("relevance"), "judged again: the old verdict has no card")
	require.Equal(t, 2, b.deliverOutbox(t))
	require.Equal(t, map[vacancy.Status]int{vacancy.SentToUser: 2}, b.counts(t))
}

// migrationUp is the Up part of one of the schema's migrations.
func migrationUp(t *testing.T, name string) string {
	t.Helper()
	body, err := fs.ReadFile(migrations.FS, name)
	require.NoError(t, err)
	up, _, ok := strings.Cut(string(body), "-- +goose Down")
	require.True(t, ok, "%s has no Down part", name)
	return up
}

// A card that cannot be rendered (a renderer's bug) leaves no ANALYZED
// match without its card: the match is SKIPPED, for recovery.
func TestUnrenderedCardSkipsTheMatch(t *testing.T) {
	t.Parallel()
	b := setupRelevant(t)
	b.queue(t, vacancies(1, 500, 25)...)
	b.sent.mu.Lock()
	b.sent.blank = true
	b.sent.mu.Unlock()
	require.Equal(t, 1, b.drain(t))
	require.Equal(t, vacancy.Skipped, b.status(t, seeker, 500))
	require.Empty(t, b.cards(t, b.matchID(t, seeker, 500)))
	require.Equal(t, 1.0, b.counter(t, "vacancy_matches_skipped_total", vacancy.ReasonNoCard))
	require.Equal(t, 0, b.drain(t), "not claimable until recovery")
}

// Stopping mid-analysis puts the matches back QUEUED, claimable at once
// (by another replica), each a wait, not a failure.
func TestShutdownPutsMatchesInFlightBack(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.llm.On().Named("relevance").Fault(llmtest.Hang())
	b.queue(t, vacancies(2, 500, 19)...)
	ctx, cancel := context.WithCancel(b.ctx)
	done := make(chan struct{})
	go func() { b.svc.Run(ctx); close(done) }()
	require.Eventually(t, func() bool { return b.llm.Calls("relevance") == 2 }, 10*time.Second, 10*time.Millisecond)
	cancel()
	<-done
	require.Equal(t, map[vacancy.Status]int{vacancy.Queued: 2}, b.counts(t))
	for _, vid := range []int64{500, 501} {
		require.Equal(t, turns{Attempts: 1, Waits: 1, WaitReason: vacancy.ReasonShutdown, Status: vacancy.Queued},
			b.turns(t, vid), "vacancy %d", vid)
	}
	b.relevant()
	require.Equal(t, 2, b.drain(t), "claimable at once")
}

// shutdownMidClaim is the store with a shutdown (stop) arriving while a
// claim's statement runs: the claim commits, and the caller hears of it
// only if its context is still live, as pgx answers a query whose context
// ended with the cancellation whether or not the server had finished it.
type shutdownMidClaim struct {
	*storage.Matches
	stop context.CancelFunc
}

func (r shutdownMidClaim) Claim(ctx context.Context, o vacancy.ClaimOptions) (vacancy.Claim, bool, error) {
	c, ok, err := r.Matches.Claim(context.WithoutCancel(ctx), o)
	r.stop()
	if ctx.Err() != nil {
		return vacancy.Claim{}, false, ctx.Err()
	}
	return c, ok, err
}

// A shutdown during a claim: the match claimed is in flight like any
// other and is put back, not held by a process that is gone.
func TestShutdownDuringAClaimLeavesNoClaim(t *testing.T) {
	t.Parallel()
	b := setupRelevant(t)
	b.queue(t, vacancies(1, 500, 21)...)
	ctx, cancel := context.WithCancel(b.ctx)
	defer cancel()
	svc := b.serviceWith(t, shutdownMidClaim{Matches: b.store.Matches(), stop: cancel})
	_, _ = svc.ProcessNext(ctx)
	require.Equal(t, map[vacancy.Status]int{vacancy.Queued: 1}, b.counts(t))
	require.Equal(t, vacancy.ReasonShutdown, b.turns(t, 500).WaitReason)
	var held int
	require.NoError(t, b.store.Pool().QueryRow(b.ctx,
		`SELECT count(*) FROM vacancy_matches WHERE claim_token IS NOT NULL OR claimed_until > now()`).Scan(&held))
	require.Zero(t, held, "no claim outlives the shutdown")
}

// A claim whose worker died (kill -9) is taken over when its lease runs
// out; an idle worker wakes for it without waiting for the sweep.
func TestExpiredClaimIsTakenOver(t *testing.T) {
	t.Parallel()
	b := setup(t, withConfig(vacancy.Config{SweepInterval: time.Hour}))
	b.relevant()
	b.queue(t, vacancies(1, 500, 20)...)
	_, ok, err := b.store.Matches().Claim(b.ctx, vacancy.ClaimOptions{ClaimLease: 700 * time.Millisecond, Taste: 5, DetailFresh: time.Hour}) // the dead worker's claim
	require.NoError(t, err)
	require.True(t, ok)

	ctx, cancel := context.WithCancel(b.ctx)
	defer cancel()
	go b.svc.Run(ctx)
	go b.runSender(t, ctx)
	require.Eventually(t, func() bool { return b.status(t, seeker, 500) == vacancy.SentToUser }, 10*time.Second, 20*time.Millisecond)
	require.Equal(t, turns{Attempts: 2, Waits: 1, WaitReason: vacancy.ReasonLeaseLost, Status: vacancy.SentToUser},
		b.turns(t, 500), "the dead worker's turn is a wait, counted by the claim that took over")
}

// Two replicas' workers on one queue: every match delivered exactly once.
func TestTwoReplicasDeliverEachMatchOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, withConfig(vacancy.Config{Workers: 4, FetchLimit: 200}))
	b.relevant()
	b.queue(t, vacancies(120, 1000, 21)...)
	other := b.newService(t)
	ctx, cancel := context.WithCancel(b.ctx)
	defer cancel()
	go b.svc.Run(ctx)
	go other.Run(ctx)
	go b.runSender(t, ctx)
	b.svc.Wake()
	other.Wake()
	require.Eventually(t, func() bool { return b.counts(t)[vacancy.SentToUser] == 120 }, 30*time.Second, 20*time.Millisecond)
	require.Len(t, b.sent.deliveries(), 120)
	require.Empty(t, b.sent.duplicates())
	var rows, refs int
	require.NoError(t, b.store.Pool().QueryRow(b.ctx, `SELECT count(*), count(DISTINCT ref) FROM outbox WHERE kind = 'vacancy'`).Scan(&rows, &refs))
	require.Equal(t, 120, rows, "one card per match")
	require.Equal(t, 120, refs)
}

func TestDecide(t *testing.T) {
	t.Parallel()
	b := setupRelevant(t)
	b.queue(t, vacancies(2, 500, 22)...)
	b.user(t, 8, "")
	b.drain(t)
	b.deliverOutbox(t)
	var matchID, other int64
	require.NoError(t, b.store.Pool().QueryRow(b.ctx, `SELECT id FROM vacancy_matches WHERE vacancy_id = 500`).Scan(&matchID))
	require.NoError(t, b.store.Pool().QueryRow(b.ctx, `SELECT id FROM vacancy_matches WHERE vacancy_id = 501`).Scan(&other))

	_, _, err := b.svc.Decide(b.ctx, 8, matchID, vacancy.Applied)
	require.ErrorIs(t, err, vacancy.ErrForbidden)
	require.Equal(t, vacancy.SentToUser, b.status(t, seeker, 500))

	m, v, err := b.svc.Decide(b.ctx, seeker, matchID, vacancy.Applied)
	require.NoError(t, err)
	require.Equal(t, vacancy.Applied, m.Status)
	require.Equal(t, int64(500), v.ID)
	require.NotNil(t, m.Verdict, "the edit re-renders the verdict")

	_, _, err = b.svc.Decide(b.ctx, seeker, matchID, vacancy.Applied)
	require.ErrorIs(t, err, vacancy.ErrAlreadyDecided)
	_, _, err = b.svc.Decide(b.ctx, seeker, matchID, vacancy.NotInterested)
	require.ErrorIs(t, err, vacancy.ErrAlreadyDecided)
	require.Equal(t, vacancy.Applied, b.status(t, seeker, 500))

	_, _, err = b.svc.Decide(b.ctx, seeker, other, vacancy.NotInterested)
	require.NoError(t, err)
	require.Equal(t, vacancy.NotInterested, b.status(t, seeker, 501))

	_, _, err = b.svc.Decide(b.ctx, seeker, other, vacancy.Skipped)
	require.ErrorIs(t, err, vacancy.ErrIllegalTransition)

	// Racing double presses: one wins.
	b.exec(t, `UPDATE vacancy_matches SET status = 'SENT_TO_USER' WHERE id = $1`, matchID)
	errs := make(chan error, 10)
	for range 10 {
		go func() { _, _, err := b.svc.Decide(b.ctx, seeker, matchID, vacancy.NotInterested); errs <- err }()
	}
	wins := 0
	for range 10 {
		if err := <-errs; err == nil {
			wins++
		} else {
			require.ErrorIs(t, err, vacancy.ErrAlreadyDecided)
		}
	}
	require.Equal(t, 1, wins)
	require.Equal(t, 2.0, b.counter(t, "vacancy_transitions_total", "SENT_TO_USER", "NOT_INTERESTED"))
}

func (b *bundle) counter(t *testing.T, name string, labels ...string) float64 {
	t.Helper()
	return domaintest.Counter(t, b.reg, name, labels...)
}

// A model the provider does not have (404 "model not found") is a
// misconfiguration, not the matches' failure: one call finds it out, the
// matches wait QUEUED without more calls (no retry storm, none SKIPPED),
// and once the model is pulled they are judged and their cards queued.
func TestMatchesWaitWhileTheModelIsMissing(t *testing.T) {
	t.Parallel()
	// Open long enough that draining five matches on a busy machine ends
	// before the breaker half-opens: a half-open breaker makes the next
	// match the probe, a second call this test would count.
	b := setup(t, withBreakerOpenFor(2*time.Second))
	b.relevant()
	b.llm.ServeModels("something-else")
	b.queue(t, vacancies(5, 500, 17)...)
	b.drain(t)
	require.Equal(t, map[vacancy.Status]int{vacancy.Queued: 5}, b.counts(t))
	require.Len(t, b.llm.Requests(), 1, "one call found the model missing")
	require.True(t, b.llmc.Refused())
	require.Contains(t, b.llmc.Health().Reason, `ollama pull cheap`)

	b.llm.ServeModels("cheap")
	require.Eventually(t, func() bool { return b.llmc.BreakerState() != llm.BreakerOpen }, 5*time.Second, 20*time.Millisecond)
	require.Eventually(t, func() bool {
		_, err := b.svc.Drain(b.ctx)
		require.NoError(t, err)
		return b.counts(t)[vacancy.Analyzed] == 5
	}, 10*time.Second, 50*time.Millisecond, "judged once the model is there")
	require.Equal(t, 5, b.deliverOutbox(t))
	require.Zero(t, b.counts(t)[vacancy.Skipped])
}
