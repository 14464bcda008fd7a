package storage_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"switchboard/domain"
	"switchboard/domain/vacancy"
)

const pipelineDay = 24 * time.Hour

// pipelineFixture has users 7 and 8 and vacancies 1..n.
type pipelineFixture struct {
	*testBundle
}

func setupPipeline(t *testing.T, vacancies int) pipelineFixture {
	t.Helper()
	f := pipelineFixture{setup(t)}
	f.users(domain.User{Language: "en"}, 7, 8)
	for i := 1; i <= vacancies; i++ {
		f.exec(`INSERT INTO vacancies (id, title, published_at) VALUES ($1, $2, now())`, i, fmt.Sprintf("Vacancy %d", i))
	}
	return f
}

// sent inserts a delivered match of user on vacancy v.
func (f pipelineFixture) sent(user, v int64) int64 {
	f.t.Helper()
	var id int64
	require.NoError(f.t, f.st.Pool().QueryRow(f.ctx, `INSERT INTO vacancy_matches
(user_id, vacancy_id, status, published_at, is_relevant, chat_id, message_id, sent_at)
VALUES ($1, $2, 'SENT_TO_USER', now(), true, $1, $2, now()) RETURNING id`, user, v).Scan(&id))
	return id
}

// walk moves a match through steps, each a day after the last from start.
func (f pipelineFixture) walk(id int64, start time.Time, steps ...vacancy.Status) {
	f.t.Helper()
	from := vacancy.SentToUser
	for i, to := range steps {
		_, ok, err := f.st.Applications().Move(f.ctx, id, from, to, start.Add(time.Duration(i)*pipelineDay))
		require.NoError(f.t, err)
		require.True(f.t, ok, "%s → %s", from, to)
		from = to
	}
}

// A move names the status it leaves: from any other it changes nothing.
// Each report records its time; Applied and Invited keep theirs for the
// funnel, and every report starts a new follow-up period.
func TestMoveApplicationIsConditional(t *testing.T) {
	t.Parallel()
	f := setupPipeline(t, 1)
	id := f.sent(7, 1)
	t0 := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)

	a, ok, err := f.st.Applications().Move(f.ctx, id, vacancy.SentToUser, vacancy.Applied, t0)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, vacancy.Applied, a.Match.Status)
	require.True(t, a.AppliedAt.Equal(t0))
	require.True(t, a.ReportedAt.Equal(t0))
	require.True(t, a.InvitedAt.IsZero())
	require.Equal(t, "Vacancy 1", a.Vacancy.Title)

	// A second press of Applied, and a step from a status it is not in.
	_, ok, err = f.st.Applications().Move(f.ctx, id, vacancy.SentToUser, vacancy.Applied, t0.Add(time.Hour))
	require.NoError(t, err)
	require.False(t, ok)
	_, ok, err = f.st.Applications().Move(f.ctx, id, vacancy.Invited, vacancy.Offer, t0.Add(time.Hour))
	require.NoError(t, err)
	require.False(t, ok)

	f.exec(`UPDATE vacancy_matches SET followed_up_at = now() WHERE id = $1`, id)
	t1 := t0.Add(8 * pipelineDay)
	a, ok, err = f.st.Applications().Move(f.ctx, id, vacancy.Applied, vacancy.Invited, t1)
	require.NoError(t, err)
	require.True(t, ok)
	require.True(t, a.AppliedAt.Equal(t0), "applied_at stays")
	require.True(t, a.InvitedAt.Equal(t1))
	require.True(t, a.ReportedAt.Equal(t1))
	require.Zero(t, f.count(`SELECT count(*) FROM vacancy_matches WHERE id = $1 AND followed_up_at IS NOT NULL`, id),
		"a report starts a new waiting period")

	a, err = f.st.Applications().Get(f.ctx, id)
	require.NoError(t, err)
	require.Equal(t, vacancy.Invited, a.Match.Status)
	_, err = f.st.Applications().Get(f.ctx, id+100)
	require.ErrorIs(t, err, domain.ErrNotFound)

	// The database refuses an application without its times.
	_, err = f.st.Pool().Exec(f.ctx, `UPDATE vacancy_matches SET status = 'OFFER', invited_at = NULL WHERE id = $1`, id)
	require.Error(t, err)
}

// Reminders go to applications waiting in APPLIED or INVITED since before
// the due time, not yet reminded in this period: seeded on both sides of
// every boundary. Each is marked and queued in one transaction, so a
// second run sends nothing; a later report makes it due again.
func TestRemindApplications(t *testing.T) {
	t.Parallel()
	f := setupPipeline(t, 8)
	now := time.Date(2026, 3, 20, 12, 0, 0, 0, time.UTC)
	due := now.Add(-7 * pipelineDay)
	m := map[string]int64{}
	seed := func(name string, user, v int64, at time.Time, steps ...vacancy.Status) {
		m[name] = f.sent(user, v)
		f.walk(m[name], at.Add(-time.Duration(len(steps)-1)*pipelineDay), steps...)
	}
	seed("applied due", 7, 1, due.Add(-time.Minute), vacancy.Applied)
	seed("applied not yet", 7, 2, due.Add(time.Minute), vacancy.Applied)
	seed("invited due", 8, 3, due.Add(-pipelineDay), vacancy.Applied, vacancy.Invited)
	seed("no answer", 7, 4, due.Add(-pipelineDay), vacancy.Applied, vacancy.NoAnswer)
	seed("offer", 7, 5, due.Add(-pipelineDay), vacancy.Applied, vacancy.Invited, vacancy.Offer)
	seed("rejected", 7, 6, due.Add(-pipelineDay), vacancy.Applied, vacancy.Rejected)
	seed("reminded", 7, 7, due.Add(-pipelineDay), vacancy.Applied)
	f.exec(`UPDATE vacancy_matches SET followed_up_at = now() WHERE id = $1`, m["reminded"])
	f.sent(7, 8) // a card never answered

	var got []vacancy.FollowUp
	remind := func(fu vacancy.FollowUp) []domain.Message {
		got = append(got, fu)
		return []domain.Message{{ChatID: fu.Application.Match.UserID, Kind: domain.KindReply, Ref: fu.Application.Match.ID, Text: "how did it go?"}}
	}
	n, err := f.st.Applications().Remind(f.ctx, due, 100, remind)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	require.Len(t, got, 2)
	require.Equal(t, m["invited due"], got[0].Application.Match.ID, "the longest waiting first")
	require.Equal(t, m["applied due"], got[1].Application.Match.ID)
	require.Equal(t, "en", got[1].Lang)
	require.Equal(t, 2, f.count(`SELECT count(*) FROM outbox WHERE body->>'text' = 'how did it go?'`))
	require.Equal(t, 1, f.count(`SELECT count(*) FROM outbox WHERE chat_id = 8 AND ref = $1`, m["invited due"]))

	n, err = f.st.Applications().Remind(f.ctx, due, 100, remind)
	require.NoError(t, err)
	require.Zero(t, n, "once per waiting period")

	// Invited after the reminder: a new period, due a week after it.
	invitedAt := due.Add(time.Hour)
	_, ok, err := f.st.Applications().Move(f.ctx, m["applied due"], vacancy.Applied, vacancy.Invited, invitedAt)
	require.NoError(t, err)
	require.True(t, ok)
	n, err = f.st.Applications().Remind(f.ctx, due, 100, remind)
	require.NoError(t, err)
	require.Zero(t, n)
	n, err = f.st.Applications().Remind(f.ctx, invitedAt.Add(time.Minute), 100, remind)
	require.NoError(t, err)
	require.Equal(t, 2, n, "the invitation, and the application that was not due before")
	require.Equal(t, m["applied not yet"], got[2].Application.Match.ID)
	require.Equal(t, vacancy.Invited, got[3].Application.Match.Status)

	// The limit bounds one transaction.
	f.exec(`UPDATE vacancy_matches SET followed_up_at = NULL WHERE status IN ('APPLIED', 'INVITED')`)
	n, err = f.st.Applications().Remind(f.ctx, now, 1, remind)
	require.NoError(t, err)
	require.Equal(t, 1, n)
}

// The funnel counts applications made within the window by how far they
// got (an invitation then a rejection is invited and answered), overall
// and per search whose hits hold the vacancy; another user's and older
// applications are not counted.
func TestApplicationFunnel(t *testing.T) {
	t.Parallel()
	f := setupPipeline(t, 8)
	now := time.Date(2026, 3, 31, 12, 0, 0, 0, time.UTC)
	since := now.Add(-vacancy.ApplicationsWindow)
	keyA, keyB := key('a'), key('b')
	f.exec(`INSERT INTO searches (user_id, params, search_key) VALUES (7, '{"text": "golang"}', $1), (7, '{"text": "rust"}', $2),
(8, '{"text": "golang"}', $1)`, keyA, keyB)
	f.exec(`INSERT INTO search_hits (search_key, vacancy_id) VALUES ($1, 1), ($1, 2), ($1, 3), ($2, 3), ($2, 4), ($1, 6)`, keyA, keyB)
	f.walk(f.sent(7, 1), now.Add(-3*pipelineDay), vacancy.Applied, vacancy.Invited, vacancy.Offer)
	f.walk(f.sent(7, 2), now.Add(-3*pipelineDay), vacancy.Applied, vacancy.Invited, vacancy.Rejected)
	f.walk(f.sent(7, 3), now.Add(-3*pipelineDay), vacancy.Applied, vacancy.NoAnswer)
	f.walk(f.sent(7, 4), now.Add(-3*pipelineDay), vacancy.Applied, vacancy.Rejected)
	f.walk(f.sent(7, 5), now.Add(-3*pipelineDay), vacancy.Applied)                // found by no search of theirs
	f.walk(f.sent(7, 6), since.Add(-time.Hour), vacancy.Applied, vacancy.Invited) // applied before the window
	f.walk(f.sent(8, 1), now.Add(-pipelineDay), vacancy.Applied, vacancy.Invited) // someone else's
	f.sent(7, 7)                                                                  // not applied

	all, per, err := f.st.Applications().Funnel(f.ctx, 7, since)
	require.NoError(t, err)
	require.Equal(t, vacancy.Funnel{Applied: 5, Answered: 3, Invited: 2, Offer: 1}, all)
	require.Len(t, per, 2)
	require.Equal(t, keyA, per[0].Search.Key)
	require.Equal(t, "golang", per[0].Search.Params.Text)
	require.Equal(t, vacancy.Funnel{Applied: 3, Answered: 2, Invited: 2, Offer: 1}, per[0].Funnel)
	require.Equal(t, keyB, per[1].Search.Key)
	require.Equal(t, vacancy.Funnel{Applied: 2, Answered: 1}, per[1].Funnel)

	all, per, err = f.st.Applications().Funnel(f.ctx, 7, now)
	require.NoError(t, err)
	require.Zero(t, all)
	require.Empty(t, per)
}

// Waiting are APPLIED, NO_ANSWER and INVITED, the longest without news
// first, up to the limit, with the count of all.
func TestWaitingApplications(t *testing.T) {
	t.Parallel()
	f := setupPipeline(t, 6)
	now := time.Date(2026, 3, 31, 12, 0, 0, 0, time.UTC)
	a := f.sent(7, 1)
	f.walk(a, now.Add(-2*pipelineDay), vacancy.Applied)
	b := f.sent(7, 2)
	f.walk(b, now.Add(-10*pipelineDay), vacancy.Applied, vacancy.NoAnswer)
	c := f.sent(7, 3)
	f.walk(c, now.Add(-6*pipelineDay), vacancy.Applied, vacancy.Invited)
	f.walk(f.sent(7, 4), now.Add(-20*pipelineDay), vacancy.Applied, vacancy.Rejected)
	f.walk(f.sent(7, 5), now.Add(-20*pipelineDay), vacancy.Applied, vacancy.Invited, vacancy.Offer)
	f.walk(f.sent(8, 6), now.Add(-30*pipelineDay), vacancy.Applied)

	list, total, err := f.st.Applications().Waiting(f.ctx, 7, 2)
	require.NoError(t, err)
	require.Equal(t, 3, total)
	require.Len(t, list, 2)
	require.Equal(t, b, list[0].Match.ID)
	require.Equal(t, vacancy.NoAnswer, list[0].Match.Status)
	require.Equal(t, c, list[1].Match.ID)

	list, total, err = f.st.Applications().Waiting(f.ctx, 7, 5)
	require.NoError(t, err)
	require.Equal(t, 3, total)
	require.Len(t, list, 3)
	require.Equal(t, a, list[2].Match.ID)
}

// The claim reads the user's taste with the applications that got
// furthest first: an offer, then invitations (a rejection after one too),
// then the rest, newest first, marked by how far they got.
func TestClaimReadsTasteByHowFarApplicationsGot(t *testing.T) {
	t.Parallel()
	f := setupPipeline(t, 7)
	now := time.Now()
	f.walk(f.sent(7, 1), now.Add(-time.Hour), vacancy.Applied)
	f.walk(f.sent(7, 2), now.Add(-30*pipelineDay), vacancy.Applied, vacancy.Invited, vacancy.Rejected)
	f.walk(f.sent(7, 3), now.Add(-40*pipelineDay), vacancy.Applied, vacancy.Invited, vacancy.Offer)
	f.walk(f.sent(7, 4), now.Add(-2*pipelineDay), vacancy.Applied, vacancy.NoAnswer)
	f.walk(f.sent(8, 5), now, vacancy.Applied, vacancy.Invited, vacancy.Offer) // someone else's
	f.exec(`UPDATE vacancy_matches SET updated_at = now() - (vacancy_id || ' days')::interval`)
	f.exec(`INSERT INTO vacancy_matches (user_id, vacancy_id, status, published_at) VALUES (7, 7, 'QUEUED', now())`)

	c, ok, err := f.st.Matches().Claim(f.ctx, vacancy.ClaimOptions{ClaimLease: time.Minute, Taste: 3, DetailFresh: time.Hour})
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, []vacancy.Liked{
		{Title: "Vacancy 3", Stage: vacancy.Offer},
		{Title: "Vacancy 2", Stage: vacancy.Invited},
		{Title: "Vacancy 1", Stage: vacancy.Applied},
	}, c.User.Liked)
}
