package vacancy_test

import (
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"switchboard/domain"
	"switchboard/domain/vacancy"
	"switchboard/llm/llmtest"
)

// linkCards are the vacancy cards written to the outbox for the match.
func (b *bundle) linkCards(t *testing.T, matchID int64) int {
	t.Helper()
	n := 0
	for _, c := range b.cards(t, matchID) {
		n += c
	}
	return n
}

// lastMessage numbers the pastes' messages: each paste a new message,
// as a user's would be, unless a test repeats one.
var lastMessage atomic.Int64

func pasteMessage() int { return int(lastMessage.Add(1)) }

// pasteable puts a vacancy no search found on HH and gives the seeker this
// profile: a link ready to paste. It returns the vacancy's id.
func (b *bundle) pasteable(t *testing.T, first, seed int64, profile string) int64 {
	t.Helper()
	vs := vacancies(1, first, seed)
	b.hh.Add(vs...)
	b.user(t, seeker, profile)
	return id(vs[0])
}

// A pasted link of a vacancy no search found: judged at once, its card
// in the outbox with the move to ANALYZED (rhythm or not); delivered, it
// is SENT_TO_USER and Applied works; pasted again, the card is written
// again from the stored verdict with no second LLM call, as it stands.
func TestPasteJudgesOnceAndShowsTheCardAgain(t *testing.T) {
	t.Parallel()
	b := setupRelevant(t)
	vid := b.pasteable(t, 9100, 91, "Go developer, five years of backend work")
	// A digest rhythm does not hold a pasted vacancy back.
	_, err := b.store.Matches().TuneRhythm(b.ctx, seeker, func(r vacancy.Rhythm) (vacancy.Rhythm, error) {
		r.Mode = vacancy.ModeDigest
		return r, nil
	})
	require.NoError(t, err)

	got, err := b.svc.Paste(b.ctx, seeker, vid, pasteMessage())
	require.NoError(t, err)
	require.Equal(t, vacancy.PastedCard, got)
	require.Equal(t, vacancy.Analyzed, b.status(t, seeker, vid))
	require.Equal(t, 1, b.llm.Calls("relevance"))
	mid := b.matchID(t, seeker, vid)
	require.Equal(t, map[string]int{"pending": 1}, b.cards(t, mid))
	var desc string
	require.NoError(t, b.store.Pool().QueryRow(b.ctx, `SELECT description FROM vacancies WHERE id = $1`, vid).Scan(&desc))
	require.NotEmpty(t, desc, "the detail is stored with the move")

	require.Equal(t, 1, b.deliverOutbox(t))
	require.Equal(t, vacancy.SentToUser, b.status(t, seeker, vid))

	got, err = b.svc.Paste(b.ctx, seeker, vid, pasteMessage())
	require.NoError(t, err)
	require.Equal(t, vacancy.PastedCard, got)
	require.Equal(t, 2, b.linkCards(t, mid), "the card again")
	require.Equal(t, 1, b.llm.Calls("relevance"), "no second judgement")
	require.Equal(t, 1, b.hh.DetailCalls(strconv.FormatInt(vid, 10)), "nor a second fetch")
	require.Equal(t, vacancy.SentToUser, b.status(t, seeker, vid))

	_, _, err = b.svc.Decide(b.ctx, seeker, mid, vacancy.Applied)
	require.NoError(t, err)
	got, err = b.svc.Paste(b.ctx, seeker, vid, pasteMessage())
	require.NoError(t, err)
	require.Equal(t, vacancy.PastedCard, got)
	b.sent.mu.Lock()
	last := b.sent.rendered[len(b.sent.rendered)-1]
	b.sent.mu.Unlock()
	require.Equal(t, vacancy.Applied, last.Status, "shown as it stands")
	require.Equal(t, 80, last.Verdict.Score)
	require.Equal(t, 3, b.linkCards(t, mid))
	require.Equal(t, 1, b.llm.Calls("relevance"))
	require.Equal(t, vacancy.Applied, b.status(t, seeker, vid))
}

// The user asked: a vacancy judged not relevant still gets its card, whose
// score and reasons say why, and its buttons work.
func TestPasteCardsAnIrrelevantVerdict(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.llm.On(llmtest.SystemContains("screen job vacancies")).Named("relevance").
		ReplyJSON(map[string]any{"is_relevant": false, "score": 15, "reasons": []string{"PHP, not Go"}, "matched_skills": []string{}})
	vid := b.pasteable(t, 9200, 92, "Go developer")

	got, err := b.svc.Paste(b.ctx, seeker, vid, pasteMessage())
	require.NoError(t, err)
	require.Equal(t, vacancy.PastedCard, got)
	require.Equal(t, vacancy.Analyzed, b.status(t, seeker, vid))
	require.Equal(t, 1, b.deliverOutbox(t))
	_, _, err = b.svc.Decide(b.ctx, seeker, b.matchID(t, seeker, vid), vacancy.NotInterested)
	require.NoError(t, err)
	require.Equal(t, vacancy.NotInterested, b.status(t, seeker, vid))
}

// A match a search queued and nobody judged yet is judged now, under a
// claim of the paste's own; a SKIPPED one too; one a worker holds is on
// its way, untouched.
func TestPasteJudgesAnUnjudgedMatch(t *testing.T) {
	t.Parallel()
	b := setupRelevant(t)
	vs := vacancies(3, 9300, 93)
	b.queue(t, vs...)
	queued, skipped, claimed := id(vs[0]), id(vs[1]), id(vs[2])
	b.exec(t, `UPDATE vacancy_matches SET status = 'SKIPPED', skip_reason = 'llm_error' WHERE vacancy_id = $1`, skipped)
	b.exec(t, `UPDATE vacancy_matches SET claimed_until = now() + interval '1 minute', claim_token = gen_random_uuid()
WHERE vacancy_id = $1`, claimed)

	for n, vid := range []int64{queued, skipped} {
		got, err := b.svc.Paste(b.ctx, seeker, vid, pasteMessage())
		require.NoError(t, err)
		require.Equal(t, vacancy.PastedCard, got)
		require.Equal(t, vacancy.Analyzed, b.status(t, seeker, vid))
		require.Equal(t, 1, b.linkCards(t, b.matchID(t, seeker, vid)))
		require.Equal(t, n+1, b.llm.Calls("relevance"))
	}
	msg := pasteMessage()
	got, err := b.svc.Paste(b.ctx, seeker, claimed, msg)
	require.NoError(t, err)
	require.Equal(t, vacancy.PastedOnItsWay, got)
	require.Equal(t, vacancy.Queued, b.status(t, seeker, claimed))
	require.Equal(t, 2, b.llm.Calls("relevance"))
	require.Equal(t, 0, b.linkCards(t, b.matchID(t, seeker, claimed)))

	// The worker's card answers that message: once the worker is done
	// (here: the claim lapses, the paste's own judgement stands in), the
	// message handled again writes no second card; a new paste does.
	b.exec(t, `UPDATE vacancy_matches SET claimed_until = NULL, claim_token = NULL WHERE vacancy_id = $1`, claimed)
	got, err = b.svc.Paste(b.ctx, seeker, claimed, msg)
	require.NoError(t, err)
	require.Equal(t, vacancy.PastedCard, got)
	require.Equal(t, 0, b.linkCards(t, b.matchID(t, seeker, claimed)), "the same message, answered already")
	got, err = b.svc.Paste(b.ctx, seeker, claimed, pasteMessage())
	require.NoError(t, err)
	require.Equal(t, vacancy.PastedCard, got)
	require.Equal(t, 1, b.linkCards(t, b.matchID(t, seeker, claimed)), "a new paste is judged and shown")
}

// Without a profile nothing is judged, nor asked of HH, nor kept.
func TestPasteWithoutAProfileIsRefused(t *testing.T) {
	t.Parallel()
	b := setupRelevant(t)
	vid := b.pasteable(t, 9400, 94, "")

	_, err := b.svc.Paste(b.ctx, seeker, vid, pasteMessage())
	var ie *domain.InputError
	require.True(t, errors.As(err, &ie), "%v", err)
	require.Equal(t, "link.no_profile", ie.Key)
	require.Equal(t, 0, b.llm.Calls("relevance"))
	require.Equal(t, 0, b.hh.DetailCallsTotal())
	require.Empty(t, b.counts(t))
}

// A vacancy HH no longer serves is its error, with nothing kept; a user's
// open match of it goes to IN_ARCHIVE, as a worker's fetch takes it.
func TestPasteOfAnArchivedVacancy(t *testing.T) {
	t.Parallel()
	b := setupRelevant(t)
	vs := vacancies(2, 9500, 95)
	b.queue(t, vs[1])
	b.hh.Add(vs[0])
	gone, known := id(vs[0]), id(vs[1])
	b.hh.DetailNotFound(strconv.FormatInt(gone, 10), strconv.FormatInt(known, 10))

	_, err := b.svc.Paste(b.ctx, seeker, gone, pasteMessage())
	require.ErrorIs(t, err, vacancy.ErrArchived)
	require.Equal(t, "(none)", string(b.status(t, seeker, gone)))
	_, err = b.svc.Paste(b.ctx, seeker, known, pasteMessage())
	require.ErrorIs(t, err, vacancy.ErrArchived)
	require.Equal(t, vacancy.InArchive, b.status(t, seeker, known))
	_, err = b.svc.Paste(b.ctx, seeker, known, pasteMessage())
	require.ErrorIs(t, err, vacancy.ErrArchived, "an archived match says so without HH")
	require.Equal(t, 0, b.llm.Calls("relevance"))
	var n int
	require.NoError(t, b.store.Pool().QueryRow(b.ctx, `SELECT count(*) FROM vacancies WHERE id = $1`, gone).Scan(&n))
	require.Zero(t, n)
}

// The LLM failing is ErrNotJudged, and the match the paste made is gone:
// nothing half-written for the workers; the next paste judges it.
func TestPasteWhenTheLLMFailsKeepsNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.relevant().FaultNext(1, llmtest.ServerError())
	vid := b.pasteable(t, 9600, 96, "Go developer")

	_, err := b.svc.Paste(b.ctx, seeker, vid, pasteMessage())
	require.ErrorIs(t, err, vacancy.ErrNotJudged)
	require.Empty(t, b.counts(t))
	var cards int
	require.NoError(t, b.store.Pool().QueryRow(b.ctx, `SELECT count(*) FROM outbox WHERE kind = 'vacancy'`).Scan(&cards))
	require.Zero(t, cards)

	got, err := b.svc.Paste(b.ctx, seeker, vid, pasteMessage())
	require.NoError(t, err)
	require.Equal(t, vacancy.PastedCard, got)
	require.Equal(t, vacancy.Analyzed, b.status(t, seeker, vid))
}

// Two pastes at once (two replicas' services): one match, one judgement,
// and a card for each paste or one card and "on its way".
func TestTwoPastesAtOnceJudgeOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.relevant().Latency(300 * time.Millisecond)
	vid := b.pasteable(t, 9700, 97, "Go developer")
	other := b.newService(t)

	var wg sync.WaitGroup
	results := make([]vacancy.Pasted, 2)
	errs := make([]error, 2)
	for i, svc := range []*vacancy.Service{b.svc, other} {
		wg.Go(func() { results[i], errs[i] = svc.Paste(b.ctx, seeker, vid, pasteMessage()) })
	}
	wg.Wait()
	require.NoError(t, errs[0])
	require.NoError(t, errs[1])
	require.Contains(t, results, vacancy.PastedCard)
	require.Equal(t, 1, b.llm.Calls("relevance"))
	require.Equal(t, map[vacancy.Status]int{vacancy.Analyzed: 1}, b.counts(t))
}

// The same message handled again (its replica died after the paste's
// commit, before the update's done-mark) writes no second card, whether
// its first run judged the vacancy or showed the card of a verdict kept;
// a new message with the same link shows the card again.
func TestPasteOfOneMessageTwiceWritesOneCard(t *testing.T) {
	t.Parallel()
	b := setupRelevant(t)
	vid := b.pasteable(t, 9800, 98, "Go developer, five years of backend work")

	// Judged by the first run.
	first := pasteMessage()
	for range 2 {
		got, err := b.svc.Paste(b.ctx, seeker, vid, first)
		require.NoError(t, err)
		require.Equal(t, vacancy.PastedCard, got)
	}
	mid := b.matchID(t, seeker, vid)
	require.Equal(t, 1, b.linkCards(t, mid), "one message, one card")
	require.Equal(t, 1, b.llm.Calls("relevance"))
	require.Equal(t, 1, b.deliverOutbox(t))
	got, err := b.svc.Paste(b.ctx, seeker, vid, first)
	require.NoError(t, err)
	require.Equal(t, vacancy.PastedCard, got)
	require.Equal(t, 1, b.linkCards(t, mid), "nor once its card is delivered")

	// Shown from the verdict kept by a later message.
	again := pasteMessage()
	for range 2 {
		got, err := b.svc.Paste(b.ctx, seeker, vid, again)
		require.NoError(t, err)
		require.Equal(t, vacancy.PastedCard, got)
	}
	require.Equal(t, 2, b.linkCards(t, mid), "a new paste, the card again; its rerun, nothing")
	require.Equal(t, 1, b.llm.Calls("relevance"))

	// Only the last paste is remembered, which is enough: a chat's updates
	// run in order, so a message runs again before the next one runs at
	// all. An older message is a paste like any other.
	got, err = b.svc.Paste(b.ctx, seeker, vid, first)
	require.NoError(t, err)
	require.Equal(t, vacancy.PastedCard, got)
	require.Equal(t, 3, b.linkCards(t, mid))
}
