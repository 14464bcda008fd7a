package vacancy_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"switchboard/domain"
	"switchboard/domain/vacancy"
	"switchboard/llm"
	"switchboard/llm/llmtest"
)

// letterNotes records the letters' messages in place of the bot's renderer.
type letterNotes struct {
	mu     sync.Mutex
	ready  []vacancy.LetterData
	failed []vacancy.LetterData
	// panicOn makes Letter panic for that match's letter, as a
	// renderer's bug on one letter would.
	panicOn int64
}

func (n *letterNotes) Letter(d vacancy.LetterData) []domain.Message {
	n.mu.Lock()
	defer n.mu.Unlock()
	if d.Letter.MatchID == n.panicOn {
		panic(fmt.Sprint("a renderer's bug on the letter of match ", d.Letter.MatchID))
	}
	n.ready = append(n.ready, d)
	return []domain.Message{{ChatID: d.Letter.UserID, Kind: domain.KindCoverLetter, Ref: d.Letter.ID, Text: d.Letter.Text}}
}

func (n *letterNotes) LetterFailed(d vacancy.LetterData) []domain.Message {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.failed = append(n.failed, d)
	return []domain.Message{{ChatID: d.Letter.UserID, Kind: domain.KindCoverLetter, Ref: d.Letter.ID, Text: "failed " + d.Letter.Failure}}
}

// letterWorld is the bundle with the letters over it: the real store and
// the scripted model behind the real client.
type letterWorld struct {
	*bundle
	letters *vacancy.Letters
	notes   *letterNotes
	press   int
}

const goodLetter = "Dear hiring team,\n\nI have written Go for five years, mostly services on PostgreSQL, " +
	"which is what this role asks for.\n\nI would be glad to talk.\n\nAnn"

func setupLetters(t *testing.T, cfg vacancy.LetterConfig) *letterWorld {
	t.Helper()
	w := &letterWorld{bundle: setup(t), notes: &letterNotes{}}
	var err error
	w.letters, err = vacancy.NewLetters(cfg, vacancy.LetterDeps{
		Applications: w.store.Applications(), Matches: w.store.Matches(), Profiles: w.store.Users(), LLM: llm.LetterPort{Client: w.llmc}, Notifier: w.notes,
		Log: slog.New(slog.DiscardHandler), Registerer: w.reg,
	})
	require.NoError(t, err)
	return w
}

// match gives user a match of a new vacancy in status.
func (w *letterWorld) match(t *testing.T, user int64, status vacancy.Status) int64 {
	t.Helper()
	var id int64
	require.NoError(t, w.store.Pool().QueryRow(w.ctx, `
WITH v AS (
    INSERT INTO vacancies (id, title, employer, published_at, description, apply_url)
    SELECT COALESCE(max(id), 0) + 1, 'Go developer', 'ACME', now(), '<p>Go and PostgreSQL services.</p>',
           'https://hh.ru/applicant/vacancy_response?vacancyId=1'
    FROM vacancies RETURNING id
)
INSERT INTO vacancy_matches (user_id, vacancy_id, status, published_at, is_relevant, chat_id, message_id, sent_at,
    applied_at, reported_at)
SELECT $1, v.id, $2, now(), CASE WHEN $2 = 'QUEUED' THEN NULL ELSE true END, $1, 1, now(),
       CASE WHEN $2 = 'APPLIED' THEN now() END, CASE WHEN $2 = 'APPLIED' THEN now() END FROM v RETURNING id`,
		user, status).Scan(&id))
	return id
}

func (w *letterWorld) ask(a vacancy.LetterAsk) (vacancy.Asked, error) {
	w.press++
	a.PressID = fmt.Sprint("press-", w.press)
	return w.letters.Ask(w.ctx, a)
}

func (w *letterWorld) drain(t *testing.T) {
	t.Helper()
	_, err := w.letters.Drain(w.ctx)
	require.NoError(t, err)
}

// written asks for a letter and lets the workers write it (or fail to);
// it returns the letter as it ended.
func (w *letterWorld) written(t *testing.T, a vacancy.LetterAsk) vacancy.Letter {
	t.Helper()
	asked, err := w.ask(a)
	require.NoError(t, err)
	w.drain(t)
	return w.letter(t, asked.Letter.ID)
}

func (w *letterWorld) letter(t *testing.T, id int64) vacancy.Letter {
	t.Helper()
	l, err := w.store.Applications().CoverLetter(w.ctx, id)
	require.NoError(t, err)
	return l
}

// A press is taken only from the match's owner, for a match with a card,
// and from a user with a profile; a rewrite only of the presser's own
// ready letter.
func TestLetterAskAuthorizes(t *testing.T) {
	t.Parallel()
	w := setupLetters(t, vacancy.LetterConfig{})
	w.user(t, 1, "Go developer, 5 years, PostgreSQL")
	w.user(t, 2, "Designer")
	w.user(t, 3, "")
	ann := w.match(t, 1, vacancy.SentToUser)
	queued := w.match(t, 1, vacancy.Queued)
	nobody := w.match(t, 3, vacancy.SentToUser)

	_, err := w.ask(vacancy.LetterAsk{UserID: 2, MatchID: ann, Style: vacancy.StyleDraft})
	require.ErrorIs(t, err, vacancy.ErrForbidden)
	_, err = w.ask(vacancy.LetterAsk{UserID: 1, MatchID: ann + 100, Style: vacancy.StyleDraft})
	require.ErrorIs(t, err, domain.ErrNotFound)
	_, err = w.ask(vacancy.LetterAsk{UserID: 1, MatchID: queued, Style: vacancy.StyleDraft})
	require.ErrorIs(t, err, vacancy.ErrNotLetterable, "no card yet")
	_, err = w.ask(vacancy.LetterAsk{UserID: 3, MatchID: nobody, Style: vacancy.StyleDraft})
	require.ErrorIs(t, err, vacancy.ErrNoProfile)
	require.Zero(t, countRows(t, w, `SELECT count(*) FROM cover_letters`), "no refused press wrote a letter")

	asked, err := w.ask(vacancy.LetterAsk{UserID: 1, MatchID: ann, Style: vacancy.StyleDraft})
	require.NoError(t, err)
	_, err = w.ask(vacancy.LetterAsk{UserID: 1, FromID: asked.Letter.ID, Style: vacancy.StyleShorter})
	require.ErrorIs(t, err, vacancy.ErrNotLetterable, "a pending letter has nothing to shorten yet")
	_, err = w.ask(vacancy.LetterAsk{UserID: 2, FromID: asked.Letter.ID, Style: vacancy.StyleAnother})
	require.ErrorIs(t, err, vacancy.ErrForbidden, "another user's letter")
	_, err = w.ask(vacancy.LetterAsk{UserID: 1, FromID: asked.Letter.ID, Style: vacancy.StyleAnother, Language: "de"})
	require.ErrorIs(t, err, domain.ErrNotFound, "a language nobody offered")
}

func countRows(t *testing.T, w *letterWorld, sql string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, w.store.Pool().QueryRow(w.ctx, sql, args...).Scan(&n))
	return n
}

// A draft is written from the profile and the vacancy with the rule
// against invented facts, in the vacancy's language; a rewrite quotes the
// letter it starts from and keeps the language chosen for it. Each
// letter's tokens are recorded with it.
func TestLetterDraftedAndRewritten(t *testing.T) {
	t.Parallel()
	w := setupLetters(t, vacancy.LetterConfig{})
	w.llm.On(llmtest.SystemContains("cover letter")).Named("letter").Reply(goodLetter)
	w.user(t, 1, "Go developer, 5 years, PostgreSQL")
	m := w.match(t, 1, vacancy.SentToUser)

	first := w.written(t, vacancy.LetterAsk{UserID: 1, MatchID: m, Style: vacancy.StyleDraft})
	require.Equal(t, vacancy.LetterReady, first.State)
	require.Equal(t, goodLetter, first.Text)
	require.Positive(t, first.TokensIn)
	require.Positive(t, first.TokensOut)
	req := w.llm.RequestsFor("letter")[0]
	require.Contains(t, req.System, "Use only facts the seeker's profile states")
	require.Contains(t, req.System, "in the language the vacancy is written in")
	require.Contains(t, req.Prompt, "Go developer, 5 years, PostgreSQL")
	require.Contains(t, req.Prompt, "Go and PostgreSQL services.")
	require.NotContains(t, req.Prompt, "## Letter", "a draft quotes no letter")
	require.Len(t, w.notes.ready, 1)
	require.Equal(t, "Go developer", w.notes.ready[0].Vacancy.Title)
	require.Equal(t, 1, countRows(t, w, `SELECT count(*) FROM outbox WHERE kind = 'cover_letter' AND ref = $1`, first.ID))

	// In English, then shorter: the language stays.
	en := w.written(t, vacancy.LetterAsk{UserID: 1, FromID: first.ID, Style: vacancy.StyleAnother, Language: "en"})
	require.Contains(t, w.llm.RequestsFor("letter")[1].System, "Write in English")
	got := w.written(t, vacancy.LetterAsk{UserID: 1, FromID: en.ID, Style: vacancy.StyleShorter})
	req = w.llm.RequestsFor("letter")[2]
	require.Contains(t, req.System, "Write in English")
	require.Contains(t, req.Prompt, "## Letter\n"+goodLetter)
	require.Contains(t, req.Prompt, "half its length")
	require.Equal(t, 3, got.Version)
	require.Equal(t, en.ID, got.BaseID)
	require.Equal(t, "en", got.Language)
}

// The model failing, answering with no letter, or the claim outliving its
// attempts: the letter fails with its reason and the user is told, the
// limit not charged; retrying asks the same again.
func TestLetterFailuresAreToldAndRetried(t *testing.T) {
	t.Parallel()
	w := setupLetters(t, vacancy.LetterConfig{PerDay: 1, MaxAttempts: 2})
	rule := w.llm.On(llmtest.SystemContains("cover letter")).Named("letter").Fault(llmtest.ServerError())
	w.user(t, 1, "Go developer")
	m := w.match(t, 1, vacancy.Applied)

	failed := w.written(t, vacancy.LetterAsk{UserID: 1, MatchID: m, Style: vacancy.StyleDraft})
	require.Equal(t, vacancy.LetterFailed, failed.State)
	require.Equal(t, vacancy.LetterFailedLLM, failed.Failure)
	require.Len(t, w.notes.failed, 1)

	rule.Fault(llmtest.Fault{}).Reply("Sorry.")
	retry, err := w.ask(vacancy.LetterAsk{UserID: 1, FromID: failed.ID, Style: vacancy.StyleRetry})
	require.NoError(t, err)
	require.False(t, retry.Limited, "a failed letter is not charged")
	require.Equal(t, vacancy.StyleDraft, retry.Letter.Style)
	w.drain(t)
	require.Equal(t, vacancy.LetterFailedInvalid, w.letter(t, retry.Letter.ID).Failure, "too short to be a letter")

	// A letter claimed more often than MaxAttempts (replicas dying mid-way)
	// fails without another call.
	rule.Reply(goodLetter)
	third, err := w.ask(vacancy.LetterAsk{UserID: 1, FromID: retry.Letter.ID, Style: vacancy.StyleRetry})
	require.NoError(t, err)
	calls := w.llm.Calls("letter")
	for range 2 {
		_, ok, err := w.store.Applications().ClaimCoverLetter(w.ctx, time.Minute, "")
		require.NoError(t, err)
		require.True(t, ok)
		_, err = w.store.Pool().Exec(w.ctx, `UPDATE cover_letters SET claimed_until = now() - interval '1 second'`)
		require.NoError(t, err)
	}
	w.drain(t)
	require.Equal(t, vacancy.LetterFailedAttempts, w.letter(t, third.Letter.ID).Failure)
	require.Equal(t, calls, w.llm.Calls("letter"))
	require.Len(t, w.notes.failed, 3)

	rule.Reply(goodLetter)
	fourth := w.written(t, vacancy.LetterAsk{UserID: 1, FromID: third.Letter.ID, Style: vacancy.StyleRetry})
	require.Equal(t, vacancy.LetterReady, fourth.State)
	over, err := w.ask(vacancy.LetterAsk{UserID: 1, FromID: fourth.ID, Style: vacancy.StyleShorter})
	require.NoError(t, err)
	require.True(t, over.Limited, "one ready letter is the limit of one")
}

// A worker stopping mid-call gives the letter back at once: another
// replica's worker drafts it without waiting for the lease.
func TestLetterGivenBackOnShutdown(t *testing.T) {
	t.Parallel()
	w := setupLetters(t, vacancy.LetterConfig{Lease: time.Hour})
	rule := w.llm.On(llmtest.SystemContains("cover letter")).Named("letter").Latency(time.Hour).Reply(goodLetter)
	w.user(t, 1, "Go developer")
	asked, err := w.ask(vacancy.LetterAsk{UserID: 1, MatchID: w.match(t, 1, vacancy.SentToUser), Style: vacancy.StyleDraft})
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(w.ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.letters.Run(ctx)
	}()
	require.Eventually(t, func() bool { return w.llm.InFlight() == 1 }, 10*time.Second, 10*time.Millisecond)
	cancel()
	<-done
	l := w.letter(t, asked.Letter.ID)
	require.Equal(t, vacancy.LetterPending, l.State)
	require.Zero(t, l.Attempts, "a given-back attempt is not counted")
	require.Zero(t, countRows(t, w, `SELECT count(*) FROM cover_letters WHERE claimed_until IS NOT NULL`))
	require.Empty(t, w.notes.failed, "nothing told")

	rule.Latency(0)
	w.drain(t)
	require.Equal(t, vacancy.LetterReady, w.letter(t, asked.Letter.ID).State)
}
