package storage_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"switchboard/domain"
	"switchboard/domain/vacancy"
)

// letterFixture is a user with n matches whose cards were sent.
type letterFixture struct {
	*testBundle
	matches []int64
}

func setupLetters(t *testing.T, user int64, n int) *letterFixture {
	t.Helper()
	f := &letterFixture{testBundle: setup(t)}
	f.users(domain.User{}, user)
	f.matches = f.addMatches(user, n)
	return f
}

// addMatches gives user n SENT_TO_USER matches of new vacancies.
func (f *letterFixture) addMatches(user int64, n int) []int64 {
	var ids []int64
	for range n {
		var vid int64
		require.NoError(f.t, f.st.Pool().QueryRow(f.ctx, `INSERT INTO vacancies (id, title, published_at, apply_url)
SELECT COALESCE(max(id), 0) + 1, 'Go developer', now(), 'https://hh.ru/applicant/vacancy_response?vacancyId=1'
FROM vacancies RETURNING id`).Scan(&vid))
		var mid int64
		require.NoError(f.t, f.st.Pool().QueryRow(f.ctx, `INSERT INTO vacancy_matches
    (user_id, vacancy_id, status, published_at, is_relevant, chat_id, message_id, sent_at)
VALUES ($1, $2, 'SENT_TO_USER', now(), true, $1, 1, now()) RETURNING id`, user, vid).Scan(&mid))
		ids = append(ids, mid)
	}
	return ids
}

func (f *letterFixture) ask(user, match int64, press string, limit int) vacancy.Asked {
	f.t.Helper()
	a, err := f.st.Applications().AskCoverLetter(f.ctx, vacancy.NewLetter{MatchID: match, UserID: user, Style: vacancy.StyleDraft, PressID: press},
		limit, vacancy.LetterWindow)
	require.NoError(f.t, err)
	return a
}

// settle claims the next letter and finishes it ready (or failed with a
// reason), its message written with it.
func (f *letterFixture) settle(reason string) vacancy.Letter {
	f.t.Helper()
	c, ok, err := f.st.Applications().ClaimCoverLetter(f.ctx, time.Minute, "")
	require.NoError(f.t, err)
	require.True(f.t, ok)
	l := c.Letter
	l.State, l.Text, l.TokensIn, l.TokensOut = vacancy.LetterReady, "Dear hiring team, …", 812, 164
	if reason != "" {
		l.State, l.Text, l.Failure, l.TokensIn, l.TokensOut = vacancy.LetterFailed, "", reason, 0, 0
	}
	ok, err = f.st.Applications().FinishCoverLetter(f.ctx, l, func(done vacancy.Letter) []domain.Message {
		return []domain.Message{{ChatID: done.UserID, Kind: domain.KindCoverLetter, Ref: done.ID, Text: string(done.State)}}
	})
	require.NoError(f.t, err)
	require.True(f.t, ok)
	return l
}

// The limit counts the user's pending and ready letters of the last 24
// hours: at the limit a press writes nothing and learns when the oldest
// counted letter leaves the window; failed letters and older ones do not
// count, nor do another user's.
func TestCoverLetterDailyLimit(t *testing.T) {
	t.Parallel()
	f := setupLetters(t, 7, 4)
	first := f.ask(7, f.matches[0], "p1", 2)
	require.False(t, first.Limited)
	require.Equal(t, 1, first.Letter.Version)
	require.Equal(t, vacancy.LetterPending, first.Letter.State)
	f.settle("") // ready: counts

	second := f.ask(7, f.matches[1], "p2", 2)
	require.False(t, second.Limited, "one of two used")
	over := f.ask(7, f.matches[2], "p3", 2)
	require.True(t, over.Limited, "two of two used, one of them still pending")
	require.Equal(t, 2, over.Limit)
	require.WithinDuration(t, first.Letter.CreatedAt.Add(vacancy.LetterWindow), over.Resets, time.Millisecond,
		"the oldest counted letter leaves the window first")
	require.Equal(t, 2, f.count(`SELECT count(*) FROM cover_letters`), "the refused press wrote nothing")

	f.settle(vacancy.LetterFailedLLM) // the second fails: it stops counting
	again := f.ask(7, f.matches[2], "p4", 2)
	require.False(t, again.Limited, "a failed letter is not counted")
	f.settle("")

	// A day later the first letter is out of the window.
	require.True(t, f.ask(7, f.matches[3], "p5", 2).Limited)
	f.exec(`UPDATE cover_letters SET created_at = now() - interval '25 hours' WHERE id = $1`, first.Letter.ID)
	require.False(t, f.ask(7, f.matches[3], "p6", 2).Limited)

	f.users(domain.User{}, 8)
	require.False(t, f.ask(8, f.addMatches(8, 1)[0], "bob-1", 1).Limited, "Ann's letters are not Bob's")
}

// One letter per press: the same press handled twice is a repeat with the
// letter it asked for, and a second press while the match's letter is
// pending is busy; both write nothing. Once it is settled the match takes
// the next version.
func TestCoverLetterPressIsIdempotent(t *testing.T) {
	t.Parallel()
	f := setupLetters(t, 7, 1)
	m := f.matches[0]
	first := f.ask(7, m, "press-1", 10)
	require.False(t, first.Repeat || first.Busy || first.Limited)

	again := f.ask(7, m, "press-1", 10)
	require.True(t, again.Repeat)
	require.Equal(t, first.Letter.ID, again.Letter.ID)
	busy := f.ask(7, m, "press-2", 10)
	require.True(t, busy.Busy)
	require.Equal(t, 1, f.count(`SELECT count(*) FROM cover_letters`))

	f.settle("")
	next := f.ask(7, m, "press-3", 10)
	require.False(t, next.Busy)
	require.Equal(t, 2, next.Letter.Version)
	require.True(t, f.ask(7, m, "press-1", 10).Repeat, "an old press stays a repeat")
}

// Presses on several matches at once cannot pass the limit together: the
// user's row is locked while they are counted.
func TestCoverLetterLimitHoldsUnderConcurrentPresses(t *testing.T) {
	t.Parallel()
	f := setupLetters(t, 7, 8)
	results := raceAll(8, func(i int) vacancy.Asked {
		a, err := f.st.Applications().AskCoverLetter(f.ctx, vacancy.NewLetter{MatchID: f.matches[i], UserID: 7, Style: vacancy.StyleDraft,
			PressID: fmt.Sprint("press-", i)}, 3, vacancy.LetterWindow)
		require.NoError(t, err)
		return a
	})
	taken := 0
	for _, a := range results {
		if !a.Limited {
			taken++
		}
	}
	require.Equal(t, 3, taken)
	require.Equal(t, 3, f.count(`SELECT count(*) FROM cover_letters`))
}

// A claim takes a pending letter once, with what drafting needs; the
// finish writes its message in the same transaction and records the
// tokens; a finish under a lost claim changes nothing; a released letter
// is claimable at once, an expired claim after its lease.
func TestCoverLetterClaimAndFinish(t *testing.T) {
	t.Parallel()
	f := setupLetters(t, 7, 2)
	f.exec(`UPDATE users SET profile = 'Go, 5 years', language = 'ru' WHERE id = 7`)
	asked := f.ask(7, f.matches[0], "p1", 10)

	c, ok, err := f.st.Applications().ClaimCoverLetter(f.ctx, time.Minute, "")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, asked.Letter.ID, c.Letter.ID)
	require.Equal(t, "Go, 5 years", c.Profile)
	require.Equal(t, "ru", c.Lang)
	require.Equal(t, "Go developer", c.Vacancy.Title)
	require.Equal(t, "https://hh.ru/applicant/vacancy_response?vacancyId=1", c.Vacancy.ApplyURL)
	require.Equal(t, 1, c.Letter.Attempts)
	_, ok, err = f.st.Applications().ClaimCoverLetter(f.ctx, time.Minute, "")
	require.NoError(t, err)
	require.False(t, ok, "claimed")

	// The lease runs out; another worker takes it over, and the first
	// worker's finish is refused.
	f.exec(`UPDATE cover_letters SET claimed_until = now() - interval '1 second'`)
	c2, ok, err := f.st.Applications().ClaimCoverLetter(f.ctx, time.Minute, "")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, 2, c2.Letter.Attempts)
	stale := c.Letter
	stale.State, stale.Text = vacancy.LetterReady, "stale"
	ok, err = f.st.Applications().FinishCoverLetter(f.ctx, stale, domain.Fixed[vacancy.Letter](domain.Message{ChatID: 7, Kind: domain.KindCoverLetter, Text: "stale"}))
	require.NoError(t, err)
	require.False(t, ok)
	require.Zero(t, f.count(`SELECT count(*) FROM outbox`), "nothing told for a lost claim")

	// Given back (shutdown): claimable at once, the attempt uncounted.
	require.NoError(t, f.st.Applications().ReleaseCoverLetter(f.ctx, c2.Letter.ID, c2.Letter.ClaimToken))
	l := f.settle("")
	require.Equal(t, 2, l.Attempts)
	require.Equal(t, 1, f.count(`SELECT count(*) FROM outbox WHERE kind = 'cover_letter' AND ref = $1`, l.ID))
	var state, text string
	var in, out int
	require.NoError(t, f.st.Pool().QueryRow(f.ctx, `SELECT state, text, tokens_in, tokens_out FROM cover_letters WHERE id = $1`, l.ID).
		Scan(&state, &text, &in, &out))
	require.Equal(t, []any{"ready", "Dear hiring team, …", 812, 164}, []any{state, text, in, out})
	got, err := f.st.Applications().CoverLetter(f.ctx, l.ID)
	require.NoError(t, err)
	require.Equal(t, vacancy.LetterReady, got.State)
	_, err = f.st.Applications().CoverLetter(f.ctx, l.ID+100)
	require.ErrorIs(t, err, domain.ErrNotFound)

	// A rewrite claims its base's text.
	rewrite, err := f.st.Applications().AskCoverLetter(f.ctx, vacancy.NewLetter{MatchID: f.matches[0], UserID: 7, BaseID: l.ID,
		Style: vacancy.StyleShorter, PressID: "p2"}, 10, vacancy.LetterWindow)
	require.NoError(t, err)
	require.Equal(t, 2, rewrite.Letter.Version)
	c3, ok, err := f.st.Applications().ClaimCoverLetter(f.ctx, time.Minute, "")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, vacancy.StyleShorter, c3.Letter.Style)
	require.Equal(t, l.ID, c3.Letter.BaseID)
	require.Equal(t, "Dear hiring team, …", c3.Base)
	at, ok, err := f.st.Applications().NextCoverLetterLeaseExpiry(f.ctx)
	require.NoError(t, err)
	require.True(t, ok)
	require.WithinDuration(t, time.Now().Add(time.Minute), at, 10*time.Second)
}

// /forget erases the user's letters, and only theirs.
func TestForgetErasesCoverLetters(t *testing.T) {
	t.Parallel()
	f := setupLetters(t, 7, 2)
	f.users(domain.User{}, 8)
	bobs := f.addMatches(8, 1)
	f.ask(7, f.matches[0], "ann-1", 10)
	f.settle("")
	f.ask(7, f.matches[1], "ann-2", 10)
	f.ask(8, bobs[0], "bob-1", 10)
	require.Equal(t, 2, f.count(`SELECT count(*) FROM cover_letters WHERE user_id = 7`))

	var created time.Time
	require.NoError(t, f.st.Pool().QueryRow(f.ctx, `SELECT created_at FROM users WHERE id = 7`).Scan(&created))
	_, err := f.st.Users().Forget(f.ctx, 7, created)
	require.NoError(t, err)
	require.Zero(t, f.count(`SELECT count(*) FROM cover_letters WHERE user_id = 7`), "no letter of the user's is left")
	require.Zero(t, f.count(`SELECT count(*) FROM cover_letters l JOIN vacancy_matches m ON m.id = l.match_id WHERE m.user_id = 7`))
	require.Equal(t, 1, f.count(`SELECT count(*) FROM cover_letters WHERE user_id = 8`), "another user's letter stays")
}
