package storage_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"switchboard/domain"
	"switchboard/domain/vacancy"
	"switchboard/storage"
	"switchboard/storage/storagetest"
)

// pruneNow is the injected clock of the prune tests: rows are placed
// relative to it, a minute either side of each boundary.
var pruneNow = time.Date(2031, 3, 10, 12, 0, 0, 0, time.UTC)

const day = 24 * time.Hour

// smallBatches makes every kind take several batches.
var smallBatches = storage.PruneOptions{Batch: 2, StatementTimeout: 2 * time.Second}

// pruneBundle is the prune tests' fixture: a testBundle whose context
// never times out.
type pruneBundle struct{ *testBundle }

func setupPrune(t *testing.T) *pruneBundle {
	t.Helper()
	t.Parallel()
	return &pruneBundle{&testBundle{t: t, ctx: context.Background(), st: storagetest.New(t)}}
}

func (b *pruneBundle) id(q string, args ...any) int64 {
	b.t.Helper()
	var id int64
	require.NoError(b.t, b.st.Pool().QueryRow(b.ctx, q, args...).Scan(&id))
	return id
}

func (b *pruneBundle) user(id int64) {
	b.t.Helper()
	b.users(domain.User{FirstName: "u"}, id)
}

// prune runs one kind as of pruneNow and requires it to succeed.
func (b *pruneBundle) prune(kind string, r storage.Retention) storage.PruneResult {
	b.t.Helper()
	res := b.st.Jobs().PruneKind(b.ctx, kind, pruneNow, r, smallBatches)
	require.NoError(b.t, res.Err)
	require.Zero(b.t, res.Timeouts)
	return res
}

// Group messages dated before the horizon go, except from the start of the
// window of a run not closed; once the run is closed they go too. A closed
// run's proposals (and the RAG lookup over them) do not need the messages
// they cite.
func TestPruneGroupMessages(t *testing.T) {
	b := setupPrune(t)
	keep := 30 * day
	msg := func(id int64, at time.Time) {
		b.exec(`INSERT INTO group_messages (chat_id, message_id, text, date) VALUES (-100, $1, $2, $3)`, id, "m", at)
	}
	msg(1, pruneNow.Add(-keep-45*day))      // before the open run's window
	msg(2, pruneNow.Add(-keep-5*day))       // inside it
	msg(3, pruneNow.Add(-keep-time.Minute)) // after it, but the open run still holds from its start
	msg(4, pruneNow.Add(-keep+time.Minute)) // inside the retention
	msg(5, pruneNow.Add(-keep-50*day))      // cited by a closed run's approved proposal
	open := b.id(`INSERT INTO analysis_runs (state, created_by, window_from, window_to) VALUES ('completed', 1, $1, $2) RETURNING id`,
		pruneNow.Add(-keep-7*day), pruneNow.Add(-keep-3*day))
	closed := b.id(`INSERT INTO analysis_runs (state, created_by, window_from, window_to, accuracy_metrics, proposals_total, proposals_approved)
VALUES ('closed', 1, $1, $2, '{}', 1, 1) RETURNING id`, pruneNow.Add(-keep-51*day), pruneNow.Add(-keep-50*day))
	prop := b.id(`INSERT INTO analysis_proposals (run_id, batch, ordinal, title, priority, decision, decided_at)
VALUES ($1, 1, 1, 'Fix the printer', 'high', 'approved', now()) RETURNING id`, closed)
	b.exec(`INSERT INTO analysis_proposal_sources (proposal_id, run_id, chat_id, message_id) VALUES ($1, $2, -100, 5)`, prop, closed)
	require.NoError(t, b.st.Runs().SaveProposalEmbedding(b.ctx, prop, []float32{1, 0, 0}))

	ret := storage.Retention{GroupMessages: keep}
	res := b.prune(storage.PruneGroupMessages, ret)
	require.EqualValues(t, 2, res.Rows)
	require.Equal(t, []string{"2", "3", "4"}, b.strings(`SELECT message_id::text FROM group_messages ORDER BY message_id`))

	b.exec(`UPDATE analysis_runs SET state = 'closed', accuracy_metrics = '{}' WHERE id = $1`, open)
	res = b.prune(storage.PruneGroupMessages, ret)
	require.EqualValues(t, 2, res.Rows)
	require.Equal(t, []string{"4"}, b.strings(`SELECT message_id::text FROM group_messages ORDER BY message_id`))

	// A later run with rag still finds the approved proposal.
	similar, err := b.st.Runs().SimilarProposals(b.ctx, open+100, []float32{1, 0, 0}, 5)
	require.NoError(t, err)
	require.Len(t, similar, 1)
	require.Equal(t, "Fix the printer", similar[0].Title)
	require.EqualValues(t, 1, b.id(`SELECT count(*) FROM analysis_proposal_sources WHERE proposal_id = $1`, prop), "the citation stays")

	res = b.st.Jobs().PruneKind(b.ctx, storage.PruneGroupMessages, pruneNow, storage.Retention{}, smallBatches)
	require.True(t, res.Off, "0 keeps them for ever")
}

// A run closed before the horizon loses its draft and assembled context;
// the row, its query and its answer stay. Newer and unfinished runs keep
// theirs.
func TestPruneRunContext(t *testing.T) {
	b := setupPrune(t)
	b.user(7)
	keep := 72 * time.Hour
	run := func(status string, closed *time.Time) int64 {
		answer := "the answer"
		return b.id(`INSERT INTO pipeline_runs (user_id, chat_id, message_id, user_query, status, draft_context,
final_context_payload, final_answer, error_message, closed_at, created_at)
VALUES (7, 7, (SELECT count(*) + 1000 FROM pipeline_runs), 'q', $1, 'draft', 'payload', $2, 'e', $3, $4) RETURNING id`, status, answer, closed, pruneNow.Add(-10*day))
	}
	at := func(d time.Duration) *time.Time { t := pruneNow.Add(d); return &t }
	old := run("COMPLETED", at(-keep-time.Minute))
	failed := run("FAILED", at(-keep-time.Hour))
	recent := run("COMPLETED", at(-keep+time.Minute))
	live := run("RESPONDING", nil)

	res := b.prune(storage.PruneRunContext, storage.Retention{RunContext: keep})
	require.EqualValues(t, 2, res.Rows)
	ctxOf := func(id int64) string {
		var s string
		require.NoError(t, b.st.Pool().QueryRow(b.ctx, `SELECT COALESCE(draft_context, '-') || '/' || COALESCE(final_context_payload, '-')
|| '/' || final_answer || '/' || user_query FROM pipeline_runs WHERE id = $1`, id).Scan(&s))
		return s
	}
	require.Equal(t, "-/-/the answer/q", ctxOf(old))
	require.Equal(t, "-/-/the answer/q", ctxOf(failed))
	require.Equal(t, "draft/payload/the answer/q", ctxOf(recent))
	require.Equal(t, "draft/payload/the answer/q", ctxOf(live))

	res = b.prune(storage.PruneRunContext, storage.Retention{RunContext: keep})
	require.Zero(t, res.Rows, "a cleared run is not visited again")
}

// Raw logs and summaries are kept for ever by default; with RETAIN_MEMORY
// set, the older ones go.
func TestPruneMemory(t *testing.T) {
	b := setupPrune(t)
	b.user(7)
	keep := 365 * day
	for i, d := range []time.Duration{-keep - 2*day, -keep - time.Minute, -keep + time.Minute, -time.Hour} {
		b.exec(`INSERT INTO raw_logs (user_id, log_type, log_data, created_at) VALUES (7, 'query', jsonb_build_object('i', $1::int), $2)`,
			i, pruneNow.Add(d))
		b.exec(`INSERT INTO lsm_storage (user_id, time_bucket_start, time_bucket_end, summary, created_at)
VALUES (7, $1, $2, $3, $1)`, pruneNow.Add(d), pruneNow.Add(d+time.Hour), string(rune('a'+i)))
	}
	for _, kind := range []string{storage.PruneRawLogs, storage.PruneSummaries} {
		require.True(t, b.st.Jobs().PruneKind(b.ctx, kind, pruneNow, storage.Retention{}, smallBatches).Off)
	}
	require.Len(t, b.strings(`SELECT log_data::text FROM raw_logs`), 4)

	ret := storage.Retention{Memory: keep}
	require.EqualValues(t, 2, b.prune(storage.PruneRawLogs, ret).Rows)
	require.EqualValues(t, 2, b.prune(storage.PruneSummaries, ret).Rows)
	require.Equal(t, []string{"2", "3"}, b.strings(`SELECT log_data->>'i' FROM raw_logs ORDER BY id`))
	require.Equal(t, []string{"c", "d"}, b.strings(`SELECT summary FROM lsm_storage ORDER BY id`))
}

// Memory requests (a correction, a forget confirmation) whose user never
// came back go once a minute past their expiry, in batches, whatever the
// retention settings; those within that minute and live ones stay, and a
// live correction still waits for its text.
func TestPruneMemoryRequests(t *testing.T) {
	b := setupPrune(t)
	for _, u := range []int64{7, 8, 9} {
		b.user(u)
	}
	row := func(user int64, kind string, expires time.Duration) {
		b.exec(`INSERT INTO memory_requests (user_id, kind, memory_ids, expires_at, created_at) VALUES ($1, $2, '{1}', $3, $4)`,
			user, kind, pruneNow.Add(expires), pruneNow.Add(expires-time.Hour))
	}
	row(7, "correct", -30*day)
	row(7, "forget", -2*time.Minute)
	row(8, "forget", -time.Hour)
	row(8, "forget", -time.Minute+time.Second) // expired, within the grace
	row(9, "correct", time.Hour)
	row(9, "forget", time.Hour)

	res := b.prune(storage.PruneMemoryRequests, storage.Retention{})
	require.False(t, res.Off, "always on: an expired request is void")
	require.EqualValues(t, 3, res.Rows)
	require.Equal(t, 2, res.Batches, "two rows a batch: a full one, then the rest")
	require.Equal(t, []string{"8 forget", "9 correct", "9 forget"},
		b.strings(`SELECT user_id || ' ' || kind FROM memory_requests ORDER BY user_id, kind`))
	waiting, err := b.st.Memories().CorrectionWaiting(b.ctx, 9)
	require.NoError(t, err)
	require.True(t, waiting)
	require.Zero(t, b.prune(storage.PruneMemoryRequests, storage.Retention{}).Rows, "nothing more to do")
}

// Matches in a prunable state, created and last changed before the
// horizon, go; SKIPPED ones only past the recovery window; each user's
// latest taste examples stay, and ClaimMatch still reads them; open work
// stays. Vacancies no match points to go once old; their hits stay.
func TestPruneVacancyMatches(t *testing.T) {
	b := setupPrune(t)
	b.user(7)
	b.user(8)
	b.user(9)
	keep := 24 * time.Hour
	ret := storage.Retention{VacancyMatches: keep, RecoveryWindow: 48 * time.Hour, TasteExamples: 3}
	var vid int64 = 1000
	vac := func(created time.Time) int64 {
		vid++
		b.exec(`INSERT INTO vacancies (id, title, published_at, created_at) VALUES ($1, $2, $3, $3)`, vid, "V"+time.Duration(vid).String(), created)
		return vid
	}
	type seeded struct {
		user    int64
		status  string
		age     time.Duration
		stays   bool
		invited bool
	}
	cases := []seeded{
		{7, "NOT_SUITABLE", keep + time.Minute, false, false},
		{7, "NOT_SUITABLE", keep - time.Minute, true, false},
		{7, "IN_ARCHIVE", keep + time.Minute, false, false},
		{7, "SENT_TO_USER", keep + time.Minute, false, false},
		{7, "SENT_TO_USER", keep - time.Minute, true, false},
		{7, "SKIPPED", 48*time.Hour - time.Minute, true, false}, // recovery may still return it
		{7, "SKIPPED", 48*time.Hour + time.Minute, false, false},
		{7, "QUEUED", 10 * day, true, false},
		{7, "ANALYZED", 10 * day, true, false},
		// taste: the three latest APPLIED stay whatever their age
		{7, "APPLIED", 5 * day, true, false},
		{7, "APPLIED", 6 * day, true, false},
		{7, "APPLIED", 7 * day, true, false},
		{7, "APPLIED", 8 * day, false, false},
		{7, "APPLIED", 9 * day, false, false},
		{7, "NOT_INTERESTED", 9 * day, true, false},
		{8, "NOT_INTERESTED", 2 * day, true, false},
		{8, "NOT_INTERESTED", 3 * day, true, false},
		{8, "NOT_INTERESTED", 4 * day, true, false},
		{8, "NOT_INTERESTED", 5 * day, false, false},
		// An application weighs by how far it got: an offer, then an
		// invitation (one rejected after it too), then the latest others;
		// every step of the pipeline is prunable otherwise.
		{9, "OFFER", 20 * day, true, true},
		{9, "INVITED", 8 * day, true, true},
		{9, "REJECTED", 30 * day, true, true},
		{9, "APPLIED", 5 * day, false, false},
		{9, "NO_ANSWER", 6 * day, false, false},
		{9, "REJECTED", 7 * day, false, false},
	}
	want := map[int64]bool{}
	var stayingVacancy int64
	for _, c := range cases {
		at := pruneNow.Add(-c.age)
		v := vac(at)
		var invitedAt *time.Time
		if c.invited {
			invitedAt = &at
		}
		id := b.id(`INSERT INTO vacancy_matches (user_id, vacancy_id, status, published_at, is_relevant, sent_at, message_id,
created_at, updated_at, applied_at, reported_at, invited_at) VALUES ($1, $2, $3, $4, false, $4, 1, $4, $4, $4, $4, $5) RETURNING id`,
			c.user, v, c.status, at, invitedAt)
		want[id] = c.stays
		if c.stays && c.age > keep {
			stayingVacancy = v
		}
	}
	// A vacancy matched by nobody: old goes, new stays.
	lonelyOld := vac(pruneNow.Add(-keep - time.Minute))
	lonelyNew := vac(pruneNow.Add(-keep + time.Minute))
	b.exec(`INSERT INTO search_hits (search_key, vacancy_id) VALUES ($1, $2)`, key('a'), lonelyOld)

	res := b.prune(storage.PruneVacancyMatches, ret)
	var gone int64
	for _, stays := range want {
		if !stays {
			gone++
		}
	}
	require.Equal(t, gone, res.Rows)
	for id, stays := range want {
		var n int
		require.NoError(t, b.st.Pool().QueryRow(b.ctx, `SELECT count(*) FROM vacancy_matches WHERE id = $1`, id).Scan(&n))
		require.Equal(t, stays, n == 1, "match %d", id)
	}

	res = b.prune(storage.PruneVacancies, ret)
	require.Equal(t, gone+1, res.Rows, "the vacancies of the deleted matches and the lonely old one")
	var left []int64
	rows, err := b.st.Pool().Query(b.ctx, `SELECT id FROM vacancies v WHERE NOT EXISTS (SELECT 1 FROM vacancy_matches m WHERE m.vacancy_id = v.id)`)
	require.NoError(t, err)
	left, err = pgx.CollectRows(rows, pgx.RowTo[int64])
	require.NoError(t, err)
	require.Equal(t, []int64{lonelyNew}, left)
	require.NotZero(t, b.id(`SELECT count(*) FROM vacancies WHERE id = $1`, stayingVacancy))
	require.EqualValues(t, 1, b.id(`SELECT count(*) FROM search_hits`), "hits are search_hits' rule")

	// The worker still gets user 7's taste.
	b.exec(`UPDATE vacancy_matches SET updated_at = now() WHERE status = 'QUEUED'`)
	c, ok, err := b.st.Matches().Claim(b.ctx, vacancy.ClaimOptions{ClaimLease: time.Minute, Taste: 3})
	require.NoError(t, err)
	require.True(t, ok)
	require.Len(t, c.User.Liked, 3)
	require.Len(t, c.User.NotInterested, 1)
}

func key(c byte) string {
	k := make([]byte, 64)
	for i := range k {
		k[i] = c
	}
	return string(k)
}

// Hits found before the horizon go, and discovery still counts them as
// seen: every id up to the highest pruned one of the key.
func TestPruneSearchHitsKeepsDedupe(t *testing.T) {
	b := setupPrune(t)
	keep := 90 * day
	hit := func(k string, id int64, age time.Duration) {
		b.exec(`INSERT INTO search_hits (search_key, vacancy_id, found_at) VALUES ($1, $2, $3)`, k, id, pruneNow.Add(-age))
	}
	a, c := key('a'), key('c')
	hit(a, 100, keep+2*day)
	hit(a, 120, keep+time.Minute)
	hit(a, 110, keep-time.Minute) // republished: an old id found lately
	hit(a, 200, time.Hour)
	hit(c, 150, keep+time.Minute)
	b.exec(`INSERT INTO discovery_state (search_key, last_seen_max_id) VALUES ($1, 200)`, a)

	res := b.prune(storage.PruneSearchHits, storage.Retention{SearchHits: keep})
	require.EqualValues(t, 3, res.Rows)
	require.Equal(t, []string{a + " 110", a + " 200"}, b.strings(`SELECT search_key || ' ' || vacancy_id FROM search_hits ORDER BY 1`))

	unseen, err := b.st.Matches().UnseenVacancies(b.ctx, a, []int64{90, 100, 115, 120, 121, 200, 201})
	require.NoError(t, err)
	require.Equal(t, map[int64]bool{121: true, 201: true}, unseen)
	unseen, err = b.st.Matches().UnseenVacancies(b.ctx, c, []int64{100, 150, 151})
	require.NoError(t, err)
	require.Equal(t, map[int64]bool{151: true}, unseen, "a key without markers gets its row")
	m, err := b.st.Matches().DiscoveryMarkers(b.ctx, a)
	require.NoError(t, err)
	require.EqualValues(t, 200, m.LastSeenMaxID, "markers untouched")
}

// Outbox rows done before the horizon go; pending ones, newer ones and a
// sent message a pending edit still needs stay. Throttle records go after
// a day.
func TestPruneOutbox(t *testing.T) {
	b := setupPrune(t)
	keep := 7 * day
	row := func(text, state string, done *time.Time, key string, edit bool) {
		b.exec(`INSERT INTO outbox (chat_id, kind, msg_key, edit, body, state, done_at, message_id)
VALUES (1, 'reply', $1, $2, jsonb_build_object('text', $3::text), $4, $5, 9)`, key, edit, text, state, done)
	}
	at := func(d time.Duration) *time.Time { t := pruneNow.Add(d); return &t }
	row("sent-old", "sent", at(-keep-time.Minute), "", false)
	row("dropped-old", "dropped", at(-keep-time.Minute), "", false)
	row("failed-old", "failed", at(-keep-time.Minute), "", false)
	row("sent-new", "sent", at(-keep+time.Minute), "", false)
	row("needed", "sent", at(-keep-time.Hour), "progress:1", false)
	row("pending", "pending", nil, "", false)
	row("edit", "pending", nil, "progress:1", true)
	b.exec(`INSERT INTO outbox_throttles (at, chat_id, retry_after_ms) VALUES ($1, 1, 5), ($2, 1, 5)`,
		pruneNow.Add(-day-time.Minute), pruneNow.Add(-day+time.Minute))

	require.EqualValues(t, 3, b.prune(storage.PruneOutboxRows, storage.Retention{Outbox: keep}).Rows)
	require.Equal(t, []string{"sent-new", "needed", "pending", "edit"}, b.strings(`SELECT body->>'text' FROM outbox ORDER BY id`))
	require.EqualValues(t, 1, b.prune(storage.PruneOutboxThrottles, storage.Retention{}).Rows)
}

// Inbox rows handled or failed before the horizon go; pending ones (waiting,
// backing off or claimed) stay whatever their age, and so do newer ones.
func TestPruneInbox(t *testing.T) {
	b := setupPrune(t)
	row := func(id int64, state string, done *time.Time) {
		b.exec(`INSERT INTO inbox (update_id, chat_id, body, state, done_at, received_at) VALUES ($1, 1, '{}', $2, $3, $4)`,
			id, state, done, pruneNow.Add(-400*day))
	}
	at := func(d time.Duration) *time.Time { t := pruneNow.Add(d); return &t }
	row(1, "done", at(-day-time.Minute))
	row(2, "failed", at(-day-time.Minute))
	row(3, "done", at(-day+time.Minute))
	row(4, "pending", nil)
	require.True(t, b.prune(storage.PruneInbox, storage.Retention{}).Off, "kept for ever unless set")
	require.EqualValues(t, 2, b.prune(storage.PruneInbox, storage.Retention{Inbox: day}).Rows)
	require.Equal(t, []string{"3", "4"}, b.strings(`SELECT update_id::text FROM inbox ORDER BY update_id`))
}

// The customer's address, name and phone of orders closed or cancelled
// before the horizon are cleared, a minute either side of it; the orders
// stay, and open, done and recent ones keep theirs.
func TestPruneOrderContacts(t *testing.T) {
	b := setupPrune(t)
	keep := 30 * day
	b.user(10)
	b.exec(`INSERT INTO masters (user_id, city, district, skills) VALUES (10, 'c', 'd', '{x}')`)
	order := func(note, state string, ended *time.Time) {
		var closed, cancelled *time.Time
		switch state {
		case "CLOSED":
			closed = ended
		case "CANCELLED":
			cancelled = ended
		}
		var master *int64
		if state != "SEARCHING" && state != "CANCELLED" {
			id := int64(10)
			master = &id
		}
		// Each order's customer opened its link (user 555) and got a
		// message about it.
		b.exec(`INSERT INTO orders (created_by, city, district, skill, price, description, state, master_id, done_at,
                    closed_at, cancelled_at, address, customer_name, customer_phone, visit_date, customer_id)
VALUES (1, 'c', 'd', 'x', 100, $1, $2, $3, $4, $4, $5, 'Main St 1', 'Ivan', '+7 999', '2031-01-01', 555)`,
			note, state, master, closed, cancelled)
		b.exec(`INSERT INTO order_messages (chat_id, message_id, order_id) SELECT 555, id, id FROM orders WHERE description = $1`, note)
	}
	at := func(d time.Duration) *time.Time { t := pruneNow.Add(d); return &t }
	order("closed-old", "CLOSED", at(-keep-time.Minute))
	order("cancelled-old", "CANCELLED", at(-keep-time.Minute))
	order("cancelled-older", "CANCELLED", at(-keep-400*day))
	order("closed-new", "CLOSED", at(-keep+time.Minute))
	order("cancelled-new", "CANCELLED", at(-keep+time.Minute))
	order("searching", "SEARCHING", nil)
	order("assigned", "ASSIGNED", nil)
	b.exec(`INSERT INTO orders (created_by, city, district, skill, price, description, state, master_id, done_at,
                    address, customer_name, customer_phone)
VALUES (1, 'c', 'd', 'x', 100, 'done-old', 'DONE', 10, $1, 'Main St 1', 'Ivan', '+7 999')`, pruneNow.Add(-400*day))

	ret := storage.Retention{OrderContacts: keep}
	require.EqualValues(t, 3, b.prune(storage.PruneOrderContacts, ret).Rows)
	require.Equal(t, []string{"cancelled-old", "cancelled-older", "closed-old"}, b.strings(`SELECT description FROM orders
WHERE address IS NULL AND customer_name IS NULL AND customer_phone IS NULL AND contacts_pruned_at IS NOT NULL ORDER BY description`))
	require.Equal(t, []string{"assigned", "cancelled-new", "closed-new", "done-old", "searching"}, b.strings(`SELECT description FROM orders
WHERE address = 'Main St 1' AND customer_name = 'Ivan' AND customer_phone = '+7 999' AND contacts_pruned_at IS NULL ORDER BY description`))
	require.EqualValues(t, 8, b.id(`SELECT count(*) FROM orders`), "the orders stay")
	require.Equal(t, []string{"assigned", "cancelled-new", "closed-new", "searching"}, b.strings(`SELECT description FROM orders
WHERE customer_id = 555 ORDER BY description`), "the customer's Telegram id goes with the contacts")
	require.Equal(t, []string{"assigned", "cancelled-new", "closed-new", "searching"}, b.strings(`SELECT o.description
FROM order_messages m JOIN orders o ON o.id = m.order_id ORDER BY o.description`), "and the bot's messages in their chat about the order")
	require.EqualValues(t, 3, b.id(`SELECT count(*) FROM orders WHERE visit_date IS NOT NULL AND state IN ('CLOSED', 'CANCELLED')
AND contacts_pruned_at IS NOT NULL`), "the visit is no one's personal data: it stays")
	require.Zero(t, b.prune(storage.PruneOrderContacts, ret).Rows, "a second run finds nothing")

	res := b.st.Jobs().PruneKind(b.ctx, storage.PruneOrderContacts, pruneNow, storage.Retention{}, smallBatches)
	require.True(t, res.Off)
}

// A batch that hits the statement timeout (here: a table locked by a long
// transaction) ends its kind's turn, is counted, and the next kinds run.
func TestPruneStatementTimeout(t *testing.T) {
	b := setupPrune(t)
	b.exec(`INSERT INTO group_messages (chat_id, message_id, text, date) VALUES (1, 1, 'm', $1)`, pruneNow.Add(-400*day))
	b.exec(`INSERT INTO outbox (chat_id, kind, body, state, done_at) VALUES (1, 'reply', '{}', 'sent', $1)`, pruneNow.Add(-400*day))
	tx := b.holding(`LOCK TABLE group_messages IN ACCESS EXCLUSIVE MODE`)

	type batch struct {
		kind string
		rows int64
		took time.Duration
		err  error
	}
	var batches []batch
	results := b.st.Jobs().Prune(b.ctx, pruneNow, storage.Retention{GroupMessages: 30 * day, Outbox: day},
		storage.PruneOptions{Batch: 10, StatementTimeout: 100 * time.Millisecond, OnBatch: func(kind string, rows int64, took time.Duration, err error) {
			batches = append(batches, batch{kind, rows, took, err})
		}})
	// OnBatch hears of every batch, the cancelled one with its error.
	require.Len(t, batches, 5, "%+v", batches)
	require.Equal(t, storage.PruneGroupMessages, batches[0].kind)
	var pe *pgconn.PgError
	require.ErrorAs(t, batches[0].err, &pe)
	require.Equal(t, "57014", pe.Code)
	require.Zero(t, batches[0].rows)
	require.GreaterOrEqual(t, batches[0].took, 100*time.Millisecond)
	require.Equal(t, batch{kind: storage.PruneOutboxRows, rows: 1, took: batches[1].took}, batches[1])
	require.Equal(t, storage.PruneOutboxThrottles, batches[2].kind)
	byKind := map[string]storage.PruneResult{}
	for _, r := range results {
		byKind[r.Kind] = r
	}
	require.Len(t, results, len(storage.PruneKinds()))
	require.Equal(t, 1, byKind[storage.PruneGroupMessages].Timeouts)
	require.GreaterOrEqual(t, byKind[storage.PruneGroupMessages].Duration, 100*time.Millisecond, "the kind's time includes its batches")
	require.NoError(t, byKind[storage.PruneGroupMessages].Err)
	require.Zero(t, byKind[storage.PruneGroupMessages].Rows)
	require.EqualValues(t, 1, byKind[storage.PruneOutboxRows].Rows, "the next kinds still ran")
	require.True(t, byKind[storage.PruneRawLogs].Off)
	require.NoError(t, tx.Rollback(b.ctx))

	require.NoError(t, b.st.Jobs().RecordPrune(b.ctx, pruneNow, results))
	runs, err := b.st.Jobs().PruneRuns(b.ctx)
	require.NoError(t, err)
	var kinds []string
	for _, r := range runs {
		kinds = append(kinds, r.Kind)
	}
	require.Equal(t, []string{storage.PruneGroupMessages, storage.PruneOutboxRows, storage.PruneOutboxThrottles, storage.PruneProfileDrafts,
		storage.PruneMemoryRequests}, kinds,
		"every kind that is on, in order")
	require.Equal(t, 1, runs[0].Timeouts)
	require.True(t, runs[0].At.Equal(pruneNow))

	// The next run finishes the job; the totals add up.
	results = b.st.Jobs().Prune(b.ctx, pruneNow, storage.Retention{GroupMessages: 30 * day, Outbox: day}, smallBatches)
	require.NoError(t, b.st.Jobs().RecordPrune(b.ctx, pruneNow.Add(time.Hour), results))
	runs, err = b.st.Jobs().PruneRuns(b.ctx)
	require.NoError(t, err)
	require.Equal(t, storage.PruneGroupMessages, runs[0].Kind)
	require.EqualValues(t, 1, runs[0].Rows)
	require.Zero(t, runs[0].Timeouts)
	require.EqualValues(t, 1, runs[0].Total)
	require.Equal(t, storage.PruneOutboxRows, runs[1].Kind)
	require.EqualValues(t, 0, runs[1].Rows)
	require.EqualValues(t, 1, runs[1].Total)
}
