package storage_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"switchboard/domain"
	"switchboard/internal/testkit"
)

func msg(chat int64, text string) domain.Message {
	return domain.Message{ChatID: chat, Kind: domain.KindNote, Text: text}
}

func texts(rows []domain.Queued) []string {
	out := testkit.Map(rows, func(r domain.Queued) string { return r.Text })
	sort.Strings(out)
	return out
}

// Only the oldest pending row of a chat is claimable, so a chat's rows go
// out in the order they were written, whoever claims them.
func TestOutboxClaimsOneHeadPerChat(t *testing.T) {
	t.Parallel()
	f := setup(t)
	st, ctx := f.st, f.ctx
	require.NoError(t, st.Outbox().Enqueue(ctx, msg(1, "a1"), msg(1, "a2"), msg(2, "b1"), msg(1, "a3")))

	rows, err := st.Outbox().Claim(ctx, "", 10, time.Minute)
	require.NoError(t, err)
	require.Equal(t, []string{"a1", "b1"}, texts(rows))
	again, err := st.Outbox().Claim(ctx, "", 10, time.Minute)
	require.NoError(t, err)
	require.Empty(t, again, "a claimed head holds its chat back")

	for _, r := range rows {
		ok, err := st.Outbox().Delivered(ctx, r, 100+int(r.ID))
		require.NoError(t, err)
		require.True(t, ok)
	}
	ok, err := st.Outbox().Delivered(ctx, rows[0], 1)
	require.NoError(t, err)
	require.False(t, ok, "a second delivery record changes nothing")

	rows, err = st.Outbox().Claim(ctx, "", 10, time.Minute)
	require.NoError(t, err)
	require.Equal(t, []string{"a2"}, texts(rows))
	require.Equal(t, 1, rows[0].Attempts)
	require.NoError(t, st.Outbox().Retry(ctx, rows[0].ID, rows[0].Token, time.Hour, "", false))
	rows, err = st.Outbox().Claim(ctx, "", 10, time.Minute)
	require.NoError(t, err)
	require.Empty(t, rows, "a row put back for an hour holds its chat back, a3 included")
	require.Zero(t, f.count(`SELECT attempts FROM outbox WHERE body->>'text' = 'a2'`), "put back for pacing: not an attempt")
}

// A claim that runs out (its sender died) is claimed again.
func TestOutboxExpiredClaimIsTakenAgain(t *testing.T) {
	t.Parallel()
	f := setup(t)
	st, ctx := f.st, f.ctx
	require.NoError(t, st.Outbox().Enqueue(ctx, msg(1, "x")))
	first, err := st.Outbox().Claim(ctx, "", 10, 50*time.Millisecond)
	require.NoError(t, err)
	require.Len(t, first, 1)
	require.Eventually(t, func() bool {
		rows, err := st.Outbox().Claim(ctx, "", 10, time.Minute)
		require.NoError(t, err)
		if len(rows) == 0 {
			return false
		}
		require.Equal(t, 2, rows[0].Attempts)
		ok, err := st.Outbox().Delivered(ctx, first[0], 5)
		require.NoError(t, err)
		require.False(t, ok, "the dead sender's late record is refused")
		return true
	}, 5*time.Second, 10*time.Millisecond)
}

// An edit finds the message its key names when it is claimed.
func TestOutboxEditFindsItsMessage(t *testing.T) {
	t.Parallel()
	f := setup(t)
	st, ctx := f.st, f.ctx
	send := domain.Message{ChatID: 7, Kind: domain.KindOffer, Key: "offer:1", Text: "offer"}
	edit := domain.Message{ChatID: 7, Kind: domain.KindOfferClose, Key: "offer:1", Edit: true, Text: "expired"}
	lost := domain.Message{ChatID: 7, Kind: domain.KindOfferClose, Key: "offer:2", Edit: true, Text: "never sent"}
	require.NoError(t, st.Outbox().Enqueue(ctx, send, edit, lost))
	require.Error(t, st.Outbox().Enqueue(ctx, domain.Message{ChatID: 7, Kind: "x", Edit: true}), "an edit needs a key")

	rows, err := st.Outbox().Claim(ctx, "", 10, time.Minute)
	require.NoError(t, err)
	require.Len(t, rows, 1)
	_, err = st.Outbox().Delivered(ctx, rows[0], 4242)
	require.NoError(t, err)
	rows, err = st.Outbox().Claim(ctx, "", 10, time.Minute)
	require.NoError(t, err)
	require.Len(t, rows, 1)
	require.True(t, rows[0].Edit)
	require.Equal(t, 4242, rows[0].Target)
	_, err = st.Outbox().Delivered(ctx, rows[0], 0)
	require.NoError(t, err)
	rows, err = st.Outbox().Claim(ctx, "", 10, time.Minute)
	require.NoError(t, err)
	require.Len(t, rows, 1)
	require.Zero(t, rows[0].Target, "no message was ever sent under offer:2")
}

// An unreachable chat drops its pending rows at once, later rows are
// flagged, and the mark goes when the user writes again.
func TestOutboxUnreachableChat(t *testing.T) {
	t.Parallel()
	f := setup(t)
	st, ctx := f.st, f.ctx
	offer := domain.Message{ChatID: 5, Kind: domain.KindOffer, Ref: 77, Text: "offer"}
	require.NoError(t, st.Outbox().Enqueue(ctx, offer, msg(5, "note"), msg(6, "other")))
	dropped, err := st.Outbox().MarkUnreachable(ctx, 5, "Forbidden: bot was blocked by the user")
	require.NoError(t, err)
	require.Equal(t, []domain.Dropped{{ID: dropped[0].ID, Kind: domain.KindOffer, Ref: 77}, {ID: dropped[1].ID, Kind: domain.KindNote}}, dropped)
	gone, err := st.Outbox().Unreachable(ctx, 5)
	require.NoError(t, err)
	require.True(t, gone)

	require.NoError(t, st.Outbox().Enqueue(ctx, msg(5, "later")))
	rows, err := st.Outbox().Claim(ctx, "", 10, time.Minute)
	require.NoError(t, err)
	require.Len(t, rows, 2)
	for _, r := range rows {
		require.Equal(t, r.ChatID == 5, r.Unreachable, "row %q", r.Text)
	}
	stats, err := st.Outbox().Stats(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 1, stats.Unreachable)
	require.EqualValues(t, 2, stats.Dropped)
	require.EqualValues(t, 2, stats.Pending)

	_, err = st.Users().Upsert(ctx, domain.User{ID: 5, FirstName: "Back"})
	require.NoError(t, err)
	gone, err = st.Outbox().Unreachable(ctx, 5)
	require.NoError(t, err)
	require.False(t, gone, "writing to the bot clears the mark")
}

// claimOne claims and returns the only claimable row, failing otherwise.
func claimOne(t *testing.T, st interface {
	Claim(context.Context, string, int, time.Duration) ([]domain.Queued, error)
}) domain.Queued {
	t.Helper()
	rows, err := st.Claim(context.Background(), "", 10, time.Minute)
	require.NoError(t, err)
	require.Len(t, rows, 1)
	return rows[0]
}

// An edit coalesces with what waits for its message: a send still queued
// takes its text, an older queued edit is replaced, and a claimed row (on
// its way to Telegram) is left alone.
func TestOutboxEditCoalesces(t *testing.T) {
	t.Parallel()
	f := setup(t)
	st, ctx := f.st, f.ctx
	send := domain.Message{ChatID: 7, Kind: domain.KindProgress, Key: "progress:1", Text: "0%",
		Buttons: [][]domain.Button{{{Text: "x", Data: "x"}}}}
	edit := func(text string) domain.Message {
		return domain.Message{ChatID: 7, Kind: domain.KindProgress, Key: "progress:1", Edit: true, Text: text, IfGone: domain.IfGoneSend}
	}
	require.NoError(t, st.Outbox().Enqueue(ctx, send))
	require.NoError(t, st.Outbox().Enqueue(ctx, edit("10%")))
	require.NoError(t, st.Outbox().Enqueue(ctx, edit("20%"), edit("30%")))
	require.Equal(t, 1, f.count(`SELECT count(*) FROM outbox`), "the queued send took the edits' text")
	r := claimOne(t, st.Outbox())
	require.False(t, r.Edit)
	require.Equal(t, "30%", r.Text)
	require.Empty(t, r.Buttons, "the latest state's buttons (none) replace the send's")

	// The send is claimed: edits queue behind it, and only the latest stays.
	require.NoError(t, st.Outbox().Enqueue(ctx, edit("40%")))
	require.NoError(t, st.Outbox().Enqueue(ctx, edit("50%")))
	_, err := st.Outbox().Delivered(ctx, r, 99)
	require.NoError(t, err)
	r = claimOne(t, st.Outbox())
	require.True(t, r.Edit)
	require.Equal(t, "50%", r.Text)
	require.Equal(t, 99, r.Target)
	require.False(t, r.Superseded)
	// A claimed edit is not touched by a newer one, which is flagged
	// superseding it at its own claim instead.
	require.NoError(t, st.Outbox().Enqueue(ctx, edit("60%")))
	require.Equal(t, 2, f.count(`SELECT count(*) FROM outbox WHERE state = 'pending'`))
}

// One batch mixing everything the insert decides per row: a send and two
// edits of a new key (the send and the last edit are written), an edit
// folded into a send already queued (no row of its own), an edit of a key
// nothing waits for and a plain message, all in the batch's order.
func TestOutboxBatchFoldsPerRow(t *testing.T) {
	t.Parallel()
	f := setup(t)
	st, ctx := f.st, f.ctx
	m := func(key, text string, edit bool) domain.Message {
		return domain.Message{ChatID: 7, Kind: domain.KindProgress, Key: key, Edit: edit, Text: text}
	}
	require.NoError(t, st.Outbox().Enqueue(ctx, m("b", "b0", false)))
	require.NoError(t, st.Outbox().Enqueue(ctx, m("a", "a0", false), m("a", "a1", true), m("b", "b1", true),
		m("c", "c1", true), m("a", "a2", true), msg(7, "plain")))
	rows, err := f.st.Pool().Query(ctx, `SELECT msg_key, edit, body->>'text' FROM outbox ORDER BY id`)
	require.NoError(t, err)
	var got []string
	for rows.Next() {
		var key, text string
		var edit bool
		require.NoError(t, rows.Scan(&key, &edit, &text))
		got = append(got, fmt.Sprintf("%s %v %s", key, edit, text))
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []string{"b false b1", "a false a0", "c true c1", "a true a2", " false plain"}, got)
}

// A lane goes its own way: a paced lane waiting does not hold the chat's
// main lane, its edit waits for its message's send, and it delivers at
// most once per Every.
func TestOutboxLanes(t *testing.T) {
	t.Parallel()
	f := setup(t)
	st, ctx := f.st, f.ctx
	const every = 400 * time.Millisecond
	send := domain.Message{ChatID: 7, Kind: domain.KindProgress, Key: "p:1", Text: "0%"}
	edit := func(text string) domain.Message {
		return domain.Message{ChatID: 7, Kind: domain.KindProgress, Key: "p:1", Edit: true, Text: text, Lane: "p:1", Every: every}
	}
	require.NoError(t, st.Outbox().Enqueue(ctx, send))
	first := claimOne(t, st.Outbox()) // the send, in flight
	require.NoError(t, st.Outbox().Enqueue(ctx, edit("10%"), msg(7, "line")))
	rows, err := st.Outbox().Claim(ctx, "", 10, time.Minute)
	require.NoError(t, err)
	require.Empty(t, rows, "the main lane's head is claimed, and the edit waits for its send")
	_, err = st.Outbox().Delivered(ctx, first, 5)
	require.NoError(t, err)

	rows, err = st.Outbox().Claim(ctx, "", 10, time.Minute)
	require.NoError(t, err)
	require.Equal(t, []string{"10%", "line"}, texts(rows), "two lanes of one chat at once")
	// The lane's interval runs from the database's record of the send, which
	// is after this moment and may be well before Delivered returns on a busy
	// host: measured from here, the wait cannot be shorter than every (but
	// for the wall clock's slew against the monotonic one).
	sentAt := time.Now()
	for _, r := range rows {
		_, err := st.Outbox().Delivered(ctx, r, 0)
		require.NoError(t, err)
	}
	require.NoError(t, st.Outbox().Enqueue(ctx, edit("20%")))
	require.NoError(t, st.Outbox().Enqueue(ctx, msg(7, "line 2")))
	require.Equal(t, "line 2", claimOne(t, st.Outbox()).Text, "the paced lane waits; the main lane does not wait for it")
	var claimed domain.Queued
	require.Eventually(t, func() bool {
		rows, err := st.Outbox().Claim(ctx, "", 10, time.Minute)
		require.NoError(t, err)
		if len(rows) == 0 {
			return false
		}
		claimed = rows[0]
		return true
	}, 5*time.Second, 20*time.Millisecond)
	require.Equal(t, "20%", claimed.Text)
	require.GreaterOrEqual(t, time.Since(sentAt), every-5*time.Millisecond, "claimed before its lane's interval ran out")
}

// The claim finds the head of every lane of every chat however the rows
// interleave (chats out of id order, lanes of one chat mixed, negative
// group ids), and only the heads; the oldest due heads first.
func TestOutboxClaimsEveryLaneHead(t *testing.T) {
	t.Parallel()
	f := setup(t)
	st, ctx := f.st, f.ctx
	lane := func(chat int64, l, text string) domain.Message {
		m := msg(chat, text)
		m.Lane = l
		return m
	}
	var msgs []domain.Message
	for i := range 5 {
		for _, c := range []int64{30, -5, 10, 20} {
			msgs = append(msgs, msg(c, fmt.Sprintf("%d main %d", c, i)), lane(c, "b", fmt.Sprintf("%d b %d", c, i)))
		}
		msgs = append(msgs, lane(10, "a", fmt.Sprintf("10 a %d", i)))
	}
	require.NoError(t, st.Outbox().Enqueue(ctx, msgs...))

	first, err := st.Outbox().Claim(ctx, "", 4, time.Minute)
	require.NoError(t, err)
	require.Equal(t, []string{"-5 b 0", "-5 main 0", "30 b 0", "30 main 0"}, texts(first), "the oldest heads first")
	rest, err := st.Outbox().Claim(ctx, "", 100, time.Minute)
	require.NoError(t, err)
	require.Equal(t, []string{"10 a 0", "10 b 0", "10 main 0", "20 b 0", "20 main 0"}, texts(rest))
	for _, r := range append(first, rest...) {
		ok, err := st.Outbox().Delivered(ctx, r, int(r.ID))
		require.NoError(t, err)
		require.True(t, ok)
	}
	next, err := st.Outbox().Claim(ctx, "", 100, time.Minute)
	require.NoError(t, err)
	require.Len(t, next, 9)
	for _, r := range next {
		require.True(t, strings.HasSuffix(r.Text, " 1"), "%q: each lane's second row", r.Text)
	}
}

// Merging rows behind a claimed head go with it, in order, as long as
// they fit one message; they are settled together.
func TestOutboxMerge(t *testing.T) {
	t.Parallel()
	f := setup(t)
	st, ctx := f.st, f.ctx
	line := func(text string) domain.Message {
		return domain.Message{ChatID: -100, Kind: domain.KindLiveLog, Text: text, Lane: "live_log", Merge: true}
	}
	long := strings.Repeat("я", 4093)
	require.NoError(t, st.Outbox().Enqueue(ctx, line("1"), line("2"), line("3"), msg(-100, "main"), line(long), line("5")))
	require.Error(t, st.Outbox().Enqueue(ctx, domain.Message{ChatID: 1, Kind: "x", Text: "x", Merge: true}), "a merging row needs a lane")

	rows, err := st.Outbox().Claim(ctx, "", 10, time.Minute)
	require.NoError(t, err)
	require.Len(t, rows, 2, "the main lane and the live log")
	var head domain.Queued
	for _, r := range rows {
		if r.Lane == "live_log" {
			head = r
		}
	}
	require.Equal(t, "1\n2\n3", head.Text, "the 4093-character line does not fit behind them")
	require.Equal(t, 3, head.Merged)
	require.NoError(t, st.Outbox().Retry(ctx, head.ID, head.Token, 0, "flood", true))
	require.Equal(t, 5, f.count(`SELECT count(*) FROM outbox WHERE lane = 'live_log' AND claim_token IS NULL AND state = 'pending'`),
		"putting the head back puts back its followers")

	head = claimOne(t, st.Outbox())
	require.Equal(t, 3, head.Merged)
	ok, err := st.Outbox().Delivered(ctx, head, 77)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, 3, f.count(`SELECT count(*) FROM outbox WHERE lane = 'live_log' AND state = 'sent' AND message_id = 77`))
	head = claimOne(t, st.Outbox())
	require.Equal(t, long+"\n5", head.Text)
}

// Merged lines stop at Telegram's 100 entities as at its 4096 characters:
// past them Telegram would show the rest of the message as plain text.
func TestOutboxMergeKeepsToTelegramsEntities(t *testing.T) {
	t.Parallel()
	f := setup(t)
	st, ctx := f.st, f.ctx
	var lines []domain.Message
	for i := range 60 {
		// Two entities a line (an escaped "<" in between is no tag).
		text := fmt.Sprintf("<b>#%d</b> 1 &lt; 2 <i>done</i>", i)
		lines = append(lines, domain.Message{ChatID: -100, Kind: domain.KindLiveLog, Text: text, Lane: "live_log", Merge: true})
	}
	require.NoError(t, st.Outbox().Enqueue(ctx, lines...))
	head := claimOne(t, st.Outbox())
	require.Equal(t, 50, head.Merged, "50 lines: 100 entities")
	require.Equal(t, 100, strings.Count(head.Text, "<b>")+strings.Count(head.Text, "<i>"))
	ok, err := st.Outbox().Delivered(ctx, head, 77)
	require.NoError(t, err)
	require.True(t, ok)
	head = claimOne(t, st.Outbox())
	require.Equal(t, 10, head.Merged, "the other ten lines")
	require.True(t, strings.HasPrefix(head.Text, "<b>#50</b>"), head.Text)
}

// A notice is told once however many replicas notice it, and so is its
// end; each start is a generation, and an end names the one it ends.
func TestNoticeOnce(t *testing.T) {
	t.Parallel()
	f := setup(t)
	st, ctx := f.st, f.ctx
	// once, open and end are the statements of the one notice here,
	// llm_refused; once and end tell chat -5 what is said.
	once := func(why, said string) (gen int64, told bool) {
		t.Helper()
		gen, told, err := st.Notices().Once(ctx, "llm_refused", why, domain.Fixed[string](msg(-5, said)))
		require.NoError(t, err)
		return gen, told
	}
	open := func() (gen int64, ok bool) {
		t.Helper()
		gen, ok, err := st.Notices().Open(ctx, "llm_refused")
		require.NoError(t, err)
		return gen, ok
	}
	end := func(gen int64, said string) (ended bool) {
		t.Helper()
		ended, err := st.Notices().End(ctx, "llm_refused", gen, domain.Fixed[string](msg(-5, said)))
		require.NoError(t, err)
		return ended
	}

	told := 0
	for range 3 {
		gen, ok := once("model missing", "LLM refused")
		require.EqualValues(t, 1, gen)
		if ok {
			told++
		}
	}
	require.Equal(t, 1, told)
	gen, ok := open()
	require.True(t, ok)
	require.EqualValues(t, 1, gen)
	require.False(t, end(2, "LLM back"), "the end of a later start than the one open")
	ended := 0
	for range 2 {
		if end(1, "LLM back") {
			ended++
		}
	}
	require.Equal(t, 1, ended)
	_, ok = open()
	require.False(t, ok)

	gen, ok = once("key refused", "LLM refused again")
	require.True(t, ok)
	require.EqualValues(t, 2, gen)
	require.True(t, end(0, "LLM back again"), "0 ends whichever start is open")
	var texts []string
	require.NoError(t, st.Pool().QueryRow(ctx, `SELECT array_agg(body->>'text' ORDER BY id) FROM outbox`).Scan(&texts))
	require.Equal(t, []string{"LLM refused", "LLM back", "LLM refused again", "LLM back again"}, texts)
}

// Replicas that first notice a condition at the same moment tell it once.
func TestNoticeOnceRacing(t *testing.T) {
	t.Parallel()
	f := setup(t)
	st, ctx := f.st, f.ctx
	var told atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			_, ok, err := st.Notices().Once(ctx, "hh_refused", "captcha", domain.Fixed[string](msg(-5, "HH refused")))
			assert.NoError(t, err)
			if ok {
				told.Add(1)
			}
		})
	}
	wg.Wait()
	require.EqualValues(t, 1, told.Load())
}

// A message with an origin is written once: a handler's replies run again
// (the same update after its replica died) add nothing, whether the
// batch holds edits or not, while messages without one are all written.
func TestOutboxWritesAnOriginOnce(t *testing.T) {
	t.Parallel()
	f := setup(t)
	st, ctx := f.st, f.ctx
	reply := func(text, origin string) domain.Message {
		m := msg(1, text)
		m.Origin = origin
		return m
	}
	edit := domain.Message{ChatID: 1, Kind: domain.KindReply, Key: "k:1", Edit: true, Text: "edit"}
	require.NoError(t, st.Outbox().Enqueue(ctx, reply("first", "7.1"), reply("second", "7.2")))
	require.NoError(t, st.Outbox().Enqueue(ctx, reply("first again", "7.1"), reply("second again", "7.2"), reply("third", "7.3")))
	require.NoError(t, st.Outbox().Enqueue(ctx, edit, reply("third again", "7.3"), reply("fourth", "7.4")))
	require.NoError(t, st.Outbox().Enqueue(ctx, msg(1, "plain"), msg(1, "plain")))
	rows, err := st.Pool().Query(ctx, `SELECT body->>'text' FROM outbox WHERE NOT edit ORDER BY id`)
	require.NoError(t, err)
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{"first", "second", "third", "fourth", "plain", "plain"}, got)
}
