package storage_test

import (
	"html"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql's driver, for goose
	"github.com/stretchr/testify/require"

	"switchboard/domain"
	"switchboard/domain/memory"
	"switchboard/internal/testkit"
	"switchboard/storage/storagetest"
)

const (
	memAnn = int64(7_300_001)
	memBob = int64(7_300_002)
	// The text of Ann's memory about Kyiv, which Bob's memory repeats
	// word for word: deleting Ann's must leave Bob's.
	kyivMarker = "lives in Kyiv <near> the river & walrus-7300"
)

type memFx struct{ *testBundle }

func setupMemories(t *testing.T) *memFx {
	t.Helper()
	f := &memFx{setup(t)}
	f.users(domain.User{FirstName: "U", TelegramLanguage: "en"}, memAnn, memBob)
	return f
}

// archivedRun makes a run of the user that is COMPLETED with its answer
// queued, ready to archive, with its raw logs and its answer's outbox row.
func (f *memFx) archivedRun(userID int64, query, answer string, sum *memory.Summary) (int64, int64) {
	f.t.Helper()
	var id int64
	require.NoError(f.t, f.st.Pool().QueryRow(f.ctx, `INSERT INTO pipeline_runs (user_id, chat_id, message_id, user_query, status,
final_answer, delivered_at) VALUES ($1, $1, (SELECT count(*) + 1000 FROM pipeline_runs), $2, 'COMPLETED', $3, now()) RETURNING id`, userID, query, answer).Scan(&id))
	f.exec(`INSERT INTO raw_logs (user_id, log_type, log_data) VALUES
($1, 'query', jsonb_build_object('text', $2::text, 'run_id', $4::bigint)),
($1, 'answer', jsonb_build_object('text', $3::text, 'run_id', $4::bigint))`, userID, query, answer, id)
	f.exec(`INSERT INTO outbox (chat_id, kind, ref, body, state, done_at) VALUES ($1, 'memory_answer', $2, jsonb_build_object('text', $3::text), 'sent', now())`,
		userID, id, "<b>"+html.EscapeString(answer)+"</b>")
	// The answer streamed into a placeholder: its last version, as the
	// outbox keeps it.
	f.exec(`INSERT INTO outbox (chat_id, kind, ref, msg_key, edit, body, state, done_at)
VALUES ($1, 'memory_draft', $2::bigint, 'answer:' || $2::bigint, true, jsonb_build_object('text', $3::text), 'sent', now())`,
		userID, id, html.EscapeString(answer)+" …")
	var memID int64
	if sum != nil {
		sum.SourceRunIDs = []int64{id}
		_, ok, err := f.st.PipelineRuns().Archive(f.ctx, id, sum)
		require.NoError(f.t, err)
		require.True(f.t, ok)
		require.NoError(f.t, f.st.Pool().QueryRow(f.ctx, `SELECT id FROM lsm_storage WHERE $1 = ANY (source_run_ids)`, id).Scan(&memID))
	}
	return id, memID
}

// askCorrection asks for a correction of the user's memory id, waiting
// for wait; false when it is no current memory of theirs.
func (f *memFx) askCorrection(user, id int64, wait time.Duration) bool {
	f.t.Helper()
	_, ok, err := f.st.Memories().AskCorrection(f.ctx, user, id, wait)
	require.NoError(f.t, err)
	return ok
}

// correctionWaiting reports whether a correction of the user's waits.
func (f *memFx) correctionWaiting(user int64) bool {
	f.t.Helper()
	waiting, err := f.st.Memories().CorrectionWaiting(f.ctx, user)
	require.NoError(f.t, err)
	return waiting
}

// correct offers message msg, text, to the user's correction waiting, as
// a memory of week().
func (f *memFx) correct(user int64, msg int, text string) memory.Correction {
	f.t.Helper()
	bs, be := week()
	c, err := f.st.Memories().TakeCorrection(f.ctx, user, msg, memory.Summary{BucketStart: bs, BucketEnd: be, Summary: text})
	require.NoError(f.t, err)
	return c
}

func week() (time.Time, time.Time) {
	start := time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)
	return start, start.AddDate(0, 0, 7)
}

func summary(text string, supersedes ...int64) *memory.Summary {
	bs, be := week()
	return &memory.Summary{BucketStart: bs, BucketEnd: be, Tags: []string{"home"}, Summary: text, Supersedes: supersedes}
}

func memIDs(sums []memory.Summary) []int64 {
	return testkit.Map(sums, func(m memory.Summary) int64 { return m.ID })
}

// The archivist's supersedes touch only the run's user's current
// memories: another user's id, a memory already superseded and an absent
// id are ignored; recall and every list after it see current memories only.
func TestArchiveSupersedesOnlyTheUsersCurrentMemories(t *testing.T) {
	t.Parallel()
	f := setupMemories(t)
	_, kyiv := f.archivedRun(memAnn, "I live in Kyiv", "Nice city", summary("Ann lives in Kyiv"))
	_, job := f.archivedRun(memAnn, "I write Go", "Good", summary("Ann writes Go"))
	_, bobs := f.archivedRun(memBob, "I live in Kyiv too", "Nice", summary("Bob lives in Kyiv"))

	_, lviv := f.archivedRun(memAnn, "I moved from Kyiv to Lviv", "Congratulations", summary("Ann moved to Lviv", kyiv, bobs, 99_999_999))
	require.Equal(t, []int64{lviv, job}, memIDs(must(f.st.Memories().Summaries(f.ctx, memAnn, 10))))
	require.Equal(t, []int64{bobs}, memIDs(must(f.st.Memories().Summaries(f.ctx, memBob, 10))), "Bob's memory is not Ann's to supersede")
	var invalid bool
	var by int64
	require.NoError(t, f.st.Pool().QueryRow(f.ctx, `SELECT invalid_at IS NOT NULL, superseded_by FROM lsm_storage WHERE id = $1`, kyiv).Scan(&invalid, &by))
	require.True(t, invalid)
	require.Equal(t, lviv, by)

	// A later summary naming the superseded memory again changes nothing.
	_, later := f.archivedRun(memAnn, "Still in Lviv", "Good", summary("Ann is settled in Lviv", kyiv))
	require.Equal(t, lviv, f.int64s(`SELECT superseded_by FROM lsm_storage WHERE id = $1`, kyiv)[0])
	require.Equal(t, []int64{later, lviv, job}, memIDs(must(f.st.Memories().Summaries(f.ctx, memAnn, 10))))

	// The next run's recall has the current memories only.
	next := must1(f.st.PipelineRuns().Submit(f.ctx, memAnn, memAnn, 9, "Where do I live?"))
	_, rc, ok, err := f.st.PipelineRuns().Capture(f.ctx, next.ID, memory.New, memory.Analyzing, time.Minute, "", memory.RecallSize{Logs: 10, Summaries: 20})
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, []int64{later, lviv, job}, memIDs(rc.Summaries))

	// /memory's page marks what has history; the history is the chain,
	// newest first, with when each version stopped being true.
	page, total, err := f.st.Memories().Page(f.ctx, memAnn, 0, 2)
	require.NoError(t, err)
	require.Equal(t, 3, total)
	require.Equal(t, []int64{later, lviv}, memIDs(page))
	require.Empty(t, page[0].Supersedes)
	require.Equal(t, []int64{kyiv}, page[1].Supersedes)
	page, _, err = f.st.Memories().Page(f.ctx, memAnn, 2, 2)
	require.NoError(t, err)
	require.Equal(t, []int64{job}, memIDs(page))

	h, err := f.st.Memories().History(f.ctx, memAnn, kyiv)
	require.NoError(t, err)
	require.Equal(t, []int64{lviv, kyiv}, memIDs(h), "from an old version, the whole chain")
	require.True(t, h[0].Current())
	require.False(t, h[1].Current())
	require.Equal(t, lviv, h[1].SupersededBy)
	h, err = f.st.Memories().History(f.ctx, memBob, kyiv)
	require.NoError(t, err)
	require.Empty(t, h, "not Bob's")

	versions, err := f.st.Memories().Versions(f.ctx, memAnn, 10)
	require.NoError(t, err)
	require.Equal(t, []int64{later, lviv, job, kyiv}, memIDs(versions))
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func must1[T any](v T, _ int, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// Deleting a memory deletes its whole chain, the runs it was summarised
// from with their raw logs and answers, and every copy of their texts in
// the user's tables; another user's word-for-word equal memory, and a
// forged delete of Ann's memory by Bob, change nothing.
func TestDeleteMemoryErasesItsChainAndEveryCopy(t *testing.T) {
	t.Parallel()
	f := setupMemories(t)
	const query, answer = "I moved, I now " + kyivMarker + " ok", "So you " + kyivMarker + ", fine"
	run, old := f.archivedRun(memAnn, query, answer, summary("Ann "+kyivMarker))
	_, keep := f.archivedRun(memAnn, "I write Go daily", "Good habit", summary("Ann writes Go daily"))
	_, bobs := f.archivedRun(memBob, "Bob's own words", "Fine", summary("Ann "+kyivMarker))

	// Ann corrects it: the correction supersedes it.
	m, ok, err := f.st.Memories().AskCorrection(f.ctx, memAnn, old, time.Hour)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "Ann "+kyivMarker, m.Summary)
	c := f.correct(memAnn, 0, "Ann "+kyivMarker+" since May")
	require.Equal(t, memory.CorrectionSaved, c.Outcome)
	head := c.New.ID

	// A later run quoted the memory and the first exchange in its
	// contexts; /memory's page showed it, escaped.
	f.exec(`INSERT INTO pipeline_runs (user_id, chat_id, message_id, user_query, status, draft_context, final_context_payload, final_answer)
VALUES ($1, $1, 5, 'Where should I run?', 'COMPLETED', $2, $3, 'Along the river')`, memAnn,
		"## Recent messages\nUser: "+query+"\nMentor: "+answer+"\n- [home] 2026-11-23: Ann "+kyivMarker+" since May\n",
		"## Context notes\nShe runs.\n\n## Remembered\n- 2026-11-23: Ann "+kyivMarker+" since May\n")
	f.exec(`INSERT INTO outbox (chat_id, kind, body, state, done_at) VALUES ($1, 'reply', jsonb_build_object('text', $2::text), 'sent', now())`,
		memAnn, "1. 23 Nov\n"+html.EscapeString("Ann "+kyivMarker+" since May")+"\n2. Ann writes Go daily")
	before := tablesHolding(t, f.ctx, f.st.Pool(), kyivMarker)
	require.Equal(t, map[string]int{"lsm_storage": 3, "pipeline_runs": 2, "raw_logs": 2}, before)
	require.Len(t, tablesHolding(t, f.ctx, f.st.Pool(), html.EscapeString(kyivMarker)), 1, "the outbox, escaped")

	// Bob's forged delete of Ann's memory: nothing.
	e, err := f.st.Memories().Delete(f.ctx, memBob, []int64{head, old})
	require.NoError(t, err)
	require.Zero(t, e)
	require.Equal(t, before, tablesHolding(t, f.ctx, f.st.Pool(), kyivMarker))

	// Deleting the old version takes the chain.
	e, err = f.st.Memories().Delete(f.ctx, memAnn, []int64{old})
	require.NoError(t, err)
	require.Equal(t, memory.Erased{Memories: 2, Runs: 1, Logs: 2, Messages: 2}, e)
	require.Equal(t, map[string]int{"lsm_storage": 1}, tablesHolding(t, f.ctx, f.st.Pool(), kyivMarker), "only Bob's memory")
	require.Empty(t, tablesHolding(t, f.ctx, f.st.Pool(), html.EscapeString(kyivMarker)))
	require.Equal(t, []int64{bobs}, f.int64s(`SELECT id FROM lsm_storage WHERE strpos(summary, $1) > 0`, kyivMarker))
	require.Zero(t, f.count(`SELECT count(*) FROM pipeline_runs WHERE id = $1`, run))
	require.Equal(t, []int64{keep}, memIDs(must(f.st.Memories().Summaries(f.ctx, memAnn, 10))))
	require.Equal(t, []string{"## Recent messages\nUser: [deleted]\nMentor: [deleted]\n- [home] 2026-11-23: [deleted]\n"},
		f.strings(`SELECT draft_context FROM pipeline_runs WHERE message_id = 5`))
	require.Equal(t, []string{"1. 23 Nov\n[deleted]\n2. Ann writes Go daily"},
		f.strings(`SELECT body->>'text' FROM outbox WHERE kind = 'reply'`), "the other memory's line stays")
	require.Equal(t, 1, f.count(`SELECT count(*) FROM pipeline_runs WHERE message_id = 5 AND final_answer = 'Along the river'`))

	// Again: nothing left.
	e, err = f.st.Memories().Delete(f.ctx, memAnn, []int64{old, head})
	require.NoError(t, err)
	require.Zero(t, e)
}

// A correction waits for the user's next text: it supersedes the memory
// once, is void for another user's memory, a superseded one or after its
// time, and reports a memory deleted meanwhile.
func TestMemoryCorrection(t *testing.T) {
	t.Parallel()
	f := setupMemories(t)
	_, a := f.archivedRun(memAnn, "I like tea", "ok", summary("Ann likes tea"))
	_, b := f.archivedRun(memAnn, "I own a cat", "ok", summary("Ann owns a cat"))
	_, bobs := f.archivedRun(memBob, "I like coffee", "ok", summary("Bob likes coffee"))
	require.Equal(t, memory.CorrectionNone, f.correct(memAnn, 0, "hello").Outcome)

	require.False(t, f.askCorrection(memAnn, bobs, time.Hour), "Bob's memory")
	require.False(t, f.correctionWaiting(memAnn))

	// Asking for b replaces asking for a: one correction waits.
	for _, id := range []int64{a, b} {
		require.True(t, f.askCorrection(memAnn, id, time.Hour))
	}
	require.Equal(t, 1, f.count(`SELECT count(*) FROM memory_requests WHERE user_id = $1`, memAnn))
	ok, err := f.st.Memories().CancelCorrection(f.ctx, memAnn, a)
	require.NoError(t, err)
	require.False(t, ok, "a's was replaced")
	c := f.correct(memAnn, 0, "Ann owns two cats")
	require.Equal(t, memory.CorrectionSaved, c.Outcome)
	require.Equal(t, []string{"home"}, c.New.Tags, "the tags of the memory corrected")
	require.Equal(t, []int64{c.New.ID, a}, memIDs(must(f.st.Memories().Summaries(f.ctx, memAnn, 10))))
	require.Equal(t, memory.CorrectionNone, f.correct(memAnn, 0, "Ann owns three cats").Outcome, "taken once")
	require.Equal(t, []int64{bobs}, memIDs(must(f.st.Memories().Summaries(f.ctx, memBob, 10))))

	// A superseded memory cannot be corrected; an expired request is
	// dropped by the next text, which goes to the chat.
	require.False(t, f.askCorrection(memAnn, b, time.Hour))
	require.True(t, f.askCorrection(memAnn, a, -time.Second))
	require.False(t, f.correctionWaiting(memAnn))
	require.Equal(t, memory.CorrectionExpired, f.correct(memAnn, 0, "late").Outcome)
	require.Zero(t, f.count(`SELECT count(*) FROM memory_requests`))

	// Deleted meanwhile: nothing saved.
	require.True(t, f.askCorrection(memAnn, a, time.Hour))
	_, err = f.st.Memories().Delete(f.ctx, memAnn, []int64{a})
	require.NoError(t, err)
	require.Equal(t, memory.CorrectionGone, f.correct(memAnn, 0, "Ann likes green tea").Outcome)
	require.Zero(t, f.count(`SELECT count(*) FROM lsm_storage WHERE summary = 'Ann likes green tea'`))
}

// A correction's message handled again (its replica died before the
// update's done-mark) finds the version it saved: the same answer, and a
// correction asked for meanwhile still waits.
func TestMemoryCorrectionTakenOncePerMessage(t *testing.T) {
	t.Parallel()
	f := setupMemories(t)
	_, a := f.archivedRun(memAnn, "I like tea", "ok", summary("Ann likes tea"))
	_, b := f.archivedRun(memAnn, "I own a cat", "ok", summary("Ann owns a cat"))
	require.True(t, f.askCorrection(memAnn, a, time.Hour))
	first := f.correct(memAnn, 41, "Ann likes green tea")
	require.Equal(t, memory.CorrectionSaved, first.Outcome)

	require.True(t, f.askCorrection(memAnn, b, time.Hour))
	again := f.correct(memAnn, 41, "Ann likes green tea")
	require.Equal(t, first, again, "the same message: the version it saved")
	require.True(t, f.correctionWaiting(memAnn), "the correction of b, asked for since, still waits")
	require.Equal(t, 1, f.count(`SELECT count(*) FROM lsm_storage WHERE summary = 'Ann likes green tea'`))

	next := f.correct(memAnn, 42, "Ann owns two cats")
	require.Equal(t, memory.CorrectionSaved, next.Outcome)
	require.NotEqual(t, first.New.ID, next.New.ID)
	require.Equal(t, memory.CorrectionNone, f.correct(memAnn, 43, "hello").Outcome, "nothing waits now")
}

// A "forget what I told you" request is answered once, by its user.
func TestForgetMemoriesRequest(t *testing.T) {
	t.Parallel()
	f := setupMemories(t)
	_, a := f.archivedRun(memAnn, "I like tea", "ok", summary("Ann likes tea"))
	_, b := f.archivedRun(memAnn, "I like green tea", "ok", summary("Ann likes green tea"))
	_, c := f.archivedRun(memAnn, "I own a cat", "ok", summary("Ann owns a cat"))
	req, _, err := f.st.Memories().AskForget(f.ctx, memAnn, 0, []int64{a, b}, time.Hour)
	require.NoError(t, err)

	_, ok, err := f.st.Memories().Forget(f.ctx, memBob, req)
	require.NoError(t, err)
	require.False(t, ok, "Bob's press of Ann's request")
	ok, err = f.st.Memories().DropForgetRequest(f.ctx, memBob, req)
	require.NoError(t, err)
	require.False(t, ok)

	e, ok, err := f.st.Memories().Forget(f.ctx, memAnn, req)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, memory.Erased{Memories: 2, Runs: 2, Logs: 4, Messages: 4}, e)
	require.Equal(t, []int64{c}, memIDs(must(f.st.Memories().Summaries(f.ctx, memAnn, 10))))
	_, ok, err = f.st.Memories().Forget(f.ctx, memAnn, req)
	require.NoError(t, err)
	require.False(t, ok, "answered already")

	// Kept: the request goes, the memory stays; an expired one deletes
	// nothing.
	req, _, err = f.st.Memories().AskForget(f.ctx, memAnn, 0, []int64{c}, time.Hour)
	require.NoError(t, err)
	ok, err = f.st.Memories().DropForgetRequest(f.ctx, memAnn, req)
	require.NoError(t, err)
	require.True(t, ok)
	req, _, err = f.st.Memories().AskForget(f.ctx, memAnn, 0, []int64{c}, -time.Second)
	require.NoError(t, err)
	_, ok, err = f.st.Memories().Forget(f.ctx, memAnn, req)
	require.NoError(t, err)
	require.False(t, ok)
	require.Equal(t, []int64{c}, memIDs(must(f.st.Memories().Summaries(f.ctx, memAnn, 10))))
	require.Zero(t, f.count(`SELECT count(*) FROM memory_requests`))
}

// A "forget what I told you" message asked again (its update handled
// again) gets the request it made, naming what it named then, and no
// second one; another message, or another user's with the same id, asks
// anew.
func TestForgetRequestByItsMessage(t *testing.T) {
	t.Parallel()
	f := setupMemories(t)
	_, a := f.archivedRun(memAnn, "I like tea", "ok", summary("Ann likes tea"))
	_, b := f.archivedRun(memAnn, "I own a cat", "ok", summary("Ann owns a cat"))
	_, c := f.archivedRun(memBob, "I like tea", "ok", summary("Bob likes tea"))
	ask := func(user int64, msg int, ids ...int64) (int64, []int64) {
		req, asked, err := f.st.Memories().AskForget(f.ctx, user, msg, ids, time.Hour)
		require.NoError(t, err)
		return req, asked
	}
	first, asked := ask(memAnn, 7, a)
	require.Equal(t, []int64{a}, asked)
	again, asked := ask(memAnn, 7, a, b)
	require.Equal(t, first, again)
	require.Equal(t, []int64{a}, asked, "as it was made")
	require.Equal(t, 1, f.count(`SELECT count(*) FROM memory_requests`))

	other, asked := ask(memAnn, 8, a, b)
	require.NotEqual(t, first, other)
	require.Equal(t, []int64{a, b}, asked)
	bobs, _ := ask(memBob, 7, c)
	require.NotEqual(t, first, bobs, "message ids are per chat")
	unkeyed, _ := ask(memAnn, 0, a)
	unkeyedAgain, _ := ask(memAnn, 0, a)
	require.NotEqual(t, unkeyed, unkeyedAgain, "no message, no key")
	require.Equal(t, 5, f.count(`SELECT count(*) FROM memory_requests`))
}

// /forget erases superseded memories and a correction waiting too.
func TestForgetUserErasesMemoryVersionsAndRequests(t *testing.T) {
	t.Parallel()
	f := setupMemories(t)
	_, a := f.archivedRun(memAnn, "I live in Kyiv", "ok", summary("Ann "+kyivMarker))
	_, b := f.archivedRun(memAnn, "I moved to Lviv", "ok", summary("Ann lives in Lviv", a))
	require.True(t, f.askCorrection(memAnn, b, time.Hour))
	_, _, err := f.st.Memories().AskForget(f.ctx, memAnn, 0, []int64{a}, time.Hour)
	require.NoError(t, err)
	u, err := f.st.Users().Get(f.ctx, memAnn)
	require.NoError(t, err)
	got, err := f.st.Users().Forget(f.ctx, memAnn, u.CreatedAt)
	require.NoError(t, err)
	require.Equal(t, 2, got.Summaries)
	require.Empty(t, tablesHolding(t, f.ctx, f.st.Pool(), kyivMarker))
	require.Zero(t, f.count(`SELECT count(*) FROM memory_requests`))
	require.Zero(t, f.count(`SELECT count(*) FROM lsm_storage`))
}

// The migration that lets the archivist supersede changes its prompt
// only where it is still the one shipped: an admin's own stays active;
// down and up again leave the shipped one, then the new one, active.
func TestMemoryVersionsMigrationKeepsAnAdminsArchivistPrompt(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	_, db, p := storagetest.Migrator(t)
	active := func() string {
		var s string
		require.NoError(t, db.QueryRowContext(ctx, `SELECT version || ': ' || left(prompt_template, 26) || CASE WHEN strpos(prompt_template, '"supersedes"') > 0 THEN ' +supersedes' ELSE '' END
FROM system_prompts WHERE role_name = 'archivist' AND is_active`).Scan(&s))
		return s
	}
	_, err := p.Up(ctx)
	require.NoError(t, err)
	require.Equal(t, "2: You summarise one exchange +supersedes", active())
	_, err = p.DownTo(ctx, 28) // to just before the memory versions, whatever came after them
	require.NoError(t, err)
	require.Equal(t, "1: You summarise one exchange", active())
	_, err = db.ExecContext(ctx, `UPDATE system_prompts SET is_active = false WHERE role_name = 'archivist';
INSERT INTO system_prompts (role_name, prompt_template, version) VALUES ('archivist', 'An admin''s own archivist', 2)`)
	require.NoError(t, err)
	_, err = p.Up(ctx)
	require.NoError(t, err)
	require.Equal(t, "2: An admin's own archivist", active())
}
