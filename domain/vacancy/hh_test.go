package vacancy_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"switchboard/domain/vacancy"
	"switchboard/hh/hhtest"
	"switchboard/llm/llmtest"
)

// HH turns captcha on while 200 matches are queued: after the first
// refusals (the requests already in flight) the breaker lets only its
// probes through, no match turns SKIPPED or is judged, and once the
// captcha ends every match is delivered, each vacancy fetched once.
func TestCaptchaHoldsMatchesQueued(t *testing.T) {
	t.Parallel()
	const workers = 8
	b := setup(t, withConfig(vacancy.Config{Workers: workers, FetchLimit: 200}), withHHBreaker(200*time.Millisecond, 400*time.Millisecond))
	b.relevant()
	b.queue(t, vacancies(200, 1000, 31)...)
	b.hh.ResetLog()
	b.hh.SetCaptcha(true)

	ctx, cancel := context.WithCancel(b.ctx)
	defer cancel()
	go b.svc.Run(ctx)
	go b.runSender(t, ctx)
	b.svc.Wake()

	// Six hold periods of the capped breaker: at most one probe each.
	time.Sleep(6 * 400 * time.Millisecond)
	refused := len(b.hh.Requests())
	require.NotZero(t, refused, "the workers asked HH")
	require.LessOrEqual(t, refused, workers+6, "after the first refusal only probes reach HH")
	require.Equal(t, map[vacancy.Status]int{vacancy.Queued: 200}, b.counts(t), "nothing SKIPPED while HH refuses")
	require.Empty(t, b.llm.Requests(), "nothing judged without its detail")
	st, err := b.svc.Stats(b.ctx, seeker)
	require.NoError(t, err)
	require.True(t, st.HHBlocked)
	require.Contains(t, st.HHReason, "captcha_required")
	require.Contains(t, st.HHReason, hhtest.CaptchaURL)
	require.NoError(t, b.svc.Fetch(b.ctx), "a fetch tick while HH refuses is skipped, not failed")

	b.hh.SetCaptcha(false)
	require.Eventually(t, func() bool { return b.counts(t)[vacancy.SentToUser] == 200 }, 60*time.Second, 50*time.Millisecond)
	require.Empty(t, b.sent.duplicates())
	require.Len(t, b.llm.Requests(), 200, "each match judged once")
	for _, r := range b.hh.Requests() {
		if r.Status == 200 && r.Endpoint == hhtest.DetailEndpoint {
			require.Equal(t, 1, countOK(b.hh.Requests(), r.VacancyID), "vacancy %s fetched once", r.VacancyID)
		}
	}
	st, err = b.svc.Stats(b.ctx, seeker)
	require.NoError(t, err)
	require.False(t, st.HHBlocked)
}

func countOK(rs []hhtest.Request, id string) int {
	n := 0
	for _, r := range rs {
		if r.Endpoint == hhtest.DetailEndpoint && r.VacancyID == id && r.Status == 200 {
			n++
		}
	}
	return n
}

// 50 users whose searches share 300 vacancies, worked by two replicas:
// each vacancy's detail is asked of HH once, not once per user.
func TestDetailFetchedOncePerVacancy(t *testing.T) {
	t.Parallel()
	// 20 users share each of 300 vacancies: 6000 matches two services race
	// for (more only made the test slow on a slow disk, not the race harder).
	const users, shared = 20, 300
	b := setup(t, withConfig(vacancy.Config{Workers: 8, FetchLimit: shared}))
	// Most users find the vacancies unsuitable, which keeps the outbox out
	// of it; the detail is what is counted.
	b.llm.On(llmtest.SystemContains("screen job vacancies")).Named("relevance").
		ReplyJSON(map[string]any{"is_relevant": false, "score": 10, "reasons": []string{"no"}, "matched_skills": []string{}})
	b.hh.Add(vacancies(shared, 5000, 41)...)
	for u := int64(1); u <= users; u++ {
		b.user(t, 1000+u, "Go developer")
		b.search(t, 1000+u, "golang")
	}
	require.NoError(t, b.svc.Fetch(b.ctx))
	require.Equal(t, users*shared, b.counts(t)[vacancy.Queued])
	b.hh.ResetLog()

	other := b.newService(t)
	ctx, cancel := context.WithCancel(b.ctx)
	defer cancel()
	go b.svc.Run(ctx)
	go other.Run(ctx)
	b.svc.Wake()
	other.Wake()
	require.Eventually(t, func() bool { return b.counts(t)[vacancy.NotSuitable] == users*shared }, 240*time.Second, 100*time.Millisecond)
	require.Equal(t, shared, b.hh.DetailCallsTotal(), "one detail request per vacancy")
}

// A vacancy HH reports archived takes every open match of it to
// IN_ARCHIVE in one statement: queued, skipped and the claimed one.
func TestArchivedVacancyArchivesEveryMatch(t *testing.T) {
	t.Parallel()
	b := setupRelevant(t)
	vs := vacancies(1, 700, 51)
	b.hh.Add(vs...)
	for u := int64(1); u <= 3; u++ {
		b.user(t, 2000+u, "Go developer")
		b.search(t, 2000+u, "golang")
	}
	require.NoError(t, b.svc.Fetch(b.ctx))
	require.Equal(t, 3, b.counts(t)[vacancy.Queued])
	b.exec(t, `UPDATE vacancy_matches SET status = 'SKIPPED', skip_reason = 'hh_unavailable' WHERE user_id = 2003`)
	b.hh.Archive(vs[0].ID)
	b.hh.ResetLog()

	require.Equal(t, 1, b.drain(t), "one claim archives them all")
	require.Equal(t, map[vacancy.Status]int{vacancy.InArchive: 3}, b.counts(t))
	require.Equal(t, 1, b.hh.DetailCallsTotal())
	var claimed int
	require.NoError(t, b.store.Pool().QueryRow(b.ctx, `SELECT count(*) FROM vacancy_matches WHERE claim_token IS NOT NULL`).Scan(&claimed))
	require.Zero(t, claimed)
}
