package storage_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"switchboard/domain"
	"switchboard/domain/memory"
	"switchboard/domain/vacancy"
)

// Ids no serial column reaches in these tests, so that finding one in any
// bigint column means the user is still there.
const (
	forgetAnn       = int64(7_100_001) // forgets
	forgetBob       = int64(7_100_002) // stays
	forgetMax       = int64(7_100_003) // a master with an order; forgets
	forgetAdmin     = int64(7_100_009)
	forgetTeam      = int64(-1_007_100_000)
	forgetAdminChat = int64(-1_007_100_099)
	annMarker       = "zebra-quartz-7100"
	maxMarker       = "walrus-ember-7100"
	sharedKey       = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	annOnlyKey      = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
)

type forgetFx struct{ *testBundle }

// created is the creation time of a user's row, which /forget's button
// carries.
func (f *forgetFx) created(id int64) time.Time {
	f.t.Helper()
	u, err := f.st.Users().Get(f.ctx, id)
	require.NoError(f.t, err)
	return u.CreatedAt
}

// setupForget seeds Ann and Bob with something in every workflow: memory,
// profile, searches (one shared with Bob), ban words, matches, group
// messages (one of Ann's cited by a proposal that copies it), outbox rows
// and an unreachable mark; Max is a master with a DONE order.
func setupForget(t *testing.T) *forgetFx {
	t.Helper()
	f := &forgetFx{setup(t)}
	for _, u := range []domain.User{
		{ID: forgetAnn, Username: "ann_" + annMarker, FirstName: "Ann", TelegramLanguage: "en"},
		{ID: forgetBob, Username: "bob", FirstName: "Bob", TelegramLanguage: "en"},
		{ID: forgetMax, Username: "max_" + maxMarker, FirstName: "Max", TelegramLanguage: "ru"},
		{ID: forgetAdmin, Username: "boss", FirstName: "Boss"},
	} {
		_, err := f.st.Users().Upsert(f.ctx, u)
		require.NoError(t, err)
	}
	for _, id := range []int64{forgetAnn, forgetBob} {
		who := map[int64]string{forgetAnn: "Ann " + annMarker, forgetBob: "Bob"}[id]
		f.exec(`UPDATE users SET language = 'uk', profile = $2 WHERE id = $1`, id, who+" profile")
		// Memory chat.
		f.exec(`INSERT INTO pipeline_runs (user_id, chat_id, message_id, user_query, status, final_answer)
VALUES ($1, $1, (SELECT count(*) + 1000 FROM pipeline_runs), $2, 'COMPLETED', 'answer to ' || $2)`, id, who+" asks")
		f.exec(`INSERT INTO raw_logs (user_id, log_type, log_data) VALUES ($1, 'query', jsonb_build_object('text', $2::text))`, id, who+" asks")
		f.exec(`INSERT INTO lsm_storage (user_id, time_bucket_start, time_bucket_end, summary)
VALUES ($1, '2026-01-05', '2026-01-12', $2)`, id, who+" summary")
		// Vacancies.
		f.exec(`INSERT INTO searches (user_id, params, search_key) VALUES ($1, jsonb_build_object('text', $2::text), $3)`,
			id, "golang", sharedKey)
		f.exec(`INSERT INTO ban_words (user_id, word) VALUES ($1, $2)`, id, strings.ToLower(who)+" ban")
		// Outbox: a sent and a waiting message to their chat.
		f.exec(`INSERT INTO outbox (chat_id, kind, body, state, done_at) VALUES ($1, 'memory_answer', jsonb_build_object('text', $2::text), 'sent', now())`,
			id, "answer to "+who)
		f.exec(`INSERT INTO outbox (chat_id, kind, body) VALUES ($1, 'vacancy', jsonb_build_object('text', $2::text))`, id, "card for "+who)
	}
	f.exec(`INSERT INTO searches (user_id, params, search_key) VALUES ($1, jsonb_build_object('text', $2::text), $3)`,
		forgetAnn, annMarker, annOnlyKey)
	f.exec(`INSERT INTO discovery_state (search_key, last_seen_max_id) VALUES ($1, 10), ($2, 10)`, sharedKey, annOnlyKey)
	f.exec(`INSERT INTO vacancies (id, title, published_at) VALUES (10, 'Go developer', now()), (11, 'Rust developer', now()),
(12, 'Zig developer', now()), (13, 'C developer', now())`)
	f.exec(`INSERT INTO search_hits (search_key, vacancy_id) VALUES ($1, 10), ($2, 11)`, sharedKey, annOnlyKey)
	for _, id := range []int64{forgetAnn, forgetBob} {
		for _, v := range []int64{10, 11} {
			f.exec(`INSERT INTO vacancy_matches (user_id, vacancy_id, status, published_at, is_relevant, analysis, chat_id)
VALUES ($1, $2, 'ANALYZED', now(), true, '{"reasons": ["fits"]}', $1)`, id, v)
		}
		// Applications along the pipeline, one reminded of.
		f.exec(`INSERT INTO vacancy_matches (user_id, vacancy_id, status, published_at, is_relevant, chat_id, message_id, sent_at,
applied_at, invited_at, reported_at, followed_up_at) VALUES
($1, 12, 'OFFER', now(), true, $1, 5, now(), now() - interval '9 days', now() - interval '5 days', now(), NULL),
($1, 13, 'INVITED', now(), true, $1, 6, now(), now() - interval '20 days', now() - interval '10 days', now() - interval '10 days', now())`, id)
	}
	f.exec(`INSERT INTO unreachable_chats (chat_id, reason) VALUES ($1, 'blocked')`, forgetAnn)
	f.exec(`INSERT INTO outbox_throttles (chat_id, retry_after_ms) VALUES ($1, 1000), ($2, 1000)`, forgetAnn, forgetBob)

	// Group messages: Ann's 1 is cited by a proposal that copies it, her 2
	// is not cited; Bob's 3 is cited by a second proposal.
	f.exec(`INSERT INTO group_chats (id, title) VALUES ($1, 'Team')`, forgetTeam)
	f.exec(`INSERT INTO group_messages (chat_id, message_id, author_id, author, text, date) VALUES
($1, 1, $2, 'Ann', $4, now()), ($1, 2, $2, 'Ann', 'chatter ' || $5, now()), ($1, 3, $3, 'Bob', 'please review the <PR> & merge', now())`,
		forgetTeam, forgetAnn, forgetBob, "  please fix the login <page> "+annMarker+" ", annMarker)
	f.exec(`INSERT INTO analysis_runs (id, state, created_by, window_from, window_to, proposals_total, proposals_pending)
VALUES (1, 'completed', $1, now() - interval '1 day', now(), 2, 2)`, forgetAdmin)
	f.exec(`INSERT INTO analysis_proposals (id, run_id, ordinal, batch, title, description, priority) VALUES
(1, 1, 1, 1, $1, 'asked in the chat', 'high'), (2, 1, 2, 1, 'please review the <PR> & merge', 'from Bob', 'medium')`,
		"please fix the login <page> "+annMarker)
	f.exec(`INSERT INTO analysis_proposal_sources (proposal_id, run_id, chat_id, message_id) VALUES (1, 1, $1, 1), (2, 1, $1, 3)`, forgetTeam)
	f.exec(`INSERT INTO analysis_embeddings (proposal_id, embedding) VALUES (1, '{1,0}'), (2, '{0,1}')`)
	// The run's board in the admin chat shows both titles, escaped.
	f.exec(`INSERT INTO outbox (chat_id, kind, body, state, done_at) VALUES ($1, 'progress', jsonb_build_object('text', $2::text), 'sent', now())`,
		forgetAdminChat, "1. please fix the login &lt;page&gt; "+annMarker+"\n2. please review the &lt;PR&gt; &amp; merge")

	// Dispatch: Ann registered as a master but never got an offer; Max
	// worked an order and owes its commission; Bob declined an offer of it.
	for id, city := range map[int64]string{forgetAnn: "City " + annMarker, forgetBob: "Kyiv", forgetMax: "City " + maxMarker} {
		f.exec(`INSERT INTO masters (user_id, city, district, skills) VALUES ($1, $2, 'Center', '{plumbing}')`, id, city)
	}
	f.exec(`INSERT INTO orders (id, created_by, city, district, skill, price, description, state, master_id, assigned_at, done_at, commission, commission_due_at)
VALUES (1, $1, 'Kyiv', 'Center', 'plumbing', 1000, 'fix the tap', 'DONE', $2, now(), now(), 100, now() + interval '3 hours')`, forgetAdmin, forgetMax)
	f.exec(`INSERT INTO offers (order_id, master_id, round, state, expires_at, chat_id, message_id) VALUES
(1, $1, 1, 'DECLINED', now(), $1, 5), (1, $2, 1, 'ACCEPTED', now(), $2, 6)`, forgetBob, forgetMax)
	// Ann opened order 1's link: she is its customer, and the bot wrote
	// to her about it.
	f.exec(`UPDATE orders SET customer_id = $1, customer_joined_at = now() WHERE id = 1`, forgetAnn)
	f.exec(`INSERT INTO order_messages (chat_id, message_id, order_id) VALUES ($1, 7, 1)`, forgetAnn)
	return f
}

// tablesHolding names the public tables with a row whose text form holds
// s (every column, jsonb and arrays included).
func tablesHolding(t *testing.T, ctx context.Context, db interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
	QueryRow(context.Context, string, ...any) pgx.Row
}, s string) map[string]int {
	t.Helper()
	rows, err := db.Query(ctx, `SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE'`)
	require.NoError(t, err)
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Contains(t, tables, "group_messages")
	out := map[string]int{}
	for _, table := range tables {
		var n int
		q := fmt.Sprintf(`SELECT count(*) FROM %s t WHERE strpos(t::text, $1) > 0`, pgx.Identifier{table}.Sanitize())
		require.NoError(t, db.QueryRow(ctx, q, s).Scan(&n))
		if n > 0 {
			out[table] = n
		}
	}
	return out
}

func TestForgetErasesTheUserAndKeepsOthers(t *testing.T) {
	t.Parallel()
	f := setupForget(t)
	require.NotEmpty(t, tablesHolding(t, f.ctx, f.st.Pool(), annMarker))
	// Both have a rhythm and a digest.
	for _, id := range []int64{forgetAnn, forgetBob} {
		_, err := f.st.Matches().TuneRhythm(f.ctx, id, func(r vacancy.Rhythm) (vacancy.Rhythm, error) { return r.Tuned(vacancy.KnobMode, 1) })
		require.NoError(t, err)
		_, err = f.st.Pool().Exec(f.ctx, `INSERT INTO vacancy_digests (user_id, slot, matches, page_size) VALUES ($1, now(), 1, 5)`, id)
		require.NoError(t, err)
	}

	held, err := f.st.Users().Held(f.ctx, forgetAnn)
	require.NoError(t, err)
	require.Equal(t, memory.Held{Memory: true, JobSearch: true, GroupMessages: true, Master: true}, held)
	created := f.created(forgetAnn)
	got, err := f.st.Users().Forget(f.ctx, forgetAnn, created)
	require.NoError(t, err)
	require.Equal(t, 1, got.Runs)
	require.Equal(t, 1, got.Logs)
	require.Equal(t, 1, got.Summaries)
	require.Equal(t, 2, got.Searches)
	require.Equal(t, 1, got.BanWords)
	require.Equal(t, 4, got.Matches, "pipeline states too")
	require.Equal(t, 2, got.GroupMessages)
	require.Equal(t, 2, got.Messages)
	require.False(t, got.MasterKept, "no order or offer names Ann")

	require.Empty(t, tablesHolding(t, f.ctx, f.st.Pool(), annMarker), "no table holds Ann's text")
	require.Empty(t, tablesHolding(t, f.ctx, f.st.Pool(), fmt.Sprint(forgetAnn)), "Ann's id nowhere")

	// Per table: Ann's rows gone, Bob's intact.
	for table, col := range map[string]string{"users": "id", "pipeline_runs": "user_id", "raw_logs": "user_id",
		"lsm_storage": "user_id", "searches": "user_id", "ban_words": "user_id", "vacancy_matches": "user_id",
		"masters": "user_id", "outbox": "chat_id", "outbox_throttles": "chat_id", "unreachable_chats": "chat_id",
		"vacancy_settings": "user_id", "vacancy_digests": "user_id"} {
		q := fmt.Sprintf(`SELECT count(*) FROM %s WHERE %s = $1`, table, col)
		require.Zero(t, f.count(q, forgetAnn), table)
		if table != "unreachable_chats" {
			require.Positive(t, f.count(q, forgetBob), table)
		}
	}
	require.Equal(t, 4, f.count(`SELECT count(*) FROM vacancy_matches WHERE user_id = $1`, forgetBob))
	require.Equal(t, 4, f.count(`SELECT count(*) FROM vacancies`), "HH's data stays")
	// The shared key's state stays for Bob; Ann's own key's goes.
	require.Equal(t, 1, f.count(`SELECT count(*) FROM discovery_state WHERE search_key = $1`, sharedKey))
	require.Equal(t, 1, f.count(`SELECT count(*) FROM search_hits WHERE search_key = $1`, sharedKey))
	require.Zero(t, f.count(`SELECT count(*) FROM discovery_state WHERE search_key = $1`, annOnlyKey))
	require.Zero(t, f.count(`SELECT count(*) FROM search_hits WHERE search_key = $1`, annOnlyKey))

	// Ann's cited message stays blank, so both proposals keep their
	// sources; the uncited one is gone; Bob's is untouched.
	var text, author string
	var authorID int64
	require.NoError(t, f.st.Pool().QueryRow(f.ctx, `SELECT text, author, author_id FROM group_messages WHERE chat_id = $1 AND message_id = 1`,
		forgetTeam).Scan(&text, &author, &authorID))
	require.Equal(t, []any{"", "", int64(0)}, []any{text, author, authorID})
	require.Zero(t, f.count(`SELECT count(*) FROM group_messages WHERE message_id = 2`))
	// The order Ann was the customer of stays the admins', without her.
	require.Equal(t, 1, f.count(`SELECT count(*) FROM orders WHERE id = 1 AND customer_id IS NULL AND state = 'DONE' AND master_id = $1`, forgetMax))
	require.Zero(t, f.count(`SELECT count(*) FROM order_messages`))
	require.Equal(t, 1, f.count(`SELECT count(*) FROM group_messages WHERE message_id = 3 AND author_id = $1 AND text = 'please review the <PR> & merge'`, forgetBob))
	require.Equal(t, 2, f.count(`SELECT count(*) FROM analysis_proposal_sources`))
	require.Equal(t, 2, f.count(`SELECT count(*) FROM analysis_embeddings`))
	var title1, title2 string
	require.NoError(t, f.st.Pool().QueryRow(f.ctx, `SELECT (SELECT title FROM analysis_proposals WHERE id = 1), (SELECT title FROM analysis_proposals WHERE id = 2)`).Scan(&title1, &title2))
	require.Equal(t, "[deleted]", title1, "the verbatim copy of Ann's message")
	require.Equal(t, "please review the <PR> & merge", title2)
	var board string
	require.NoError(t, f.st.Pool().QueryRow(f.ctx, `SELECT body->>'text' FROM outbox WHERE chat_id = $1`, forgetAdminChat).Scan(&board))
	require.Equal(t, "1. [deleted]\n2. please review the &lt;PR&gt; &amp; merge", board)
	require.Equal(t, "completed", func() string {
		var s string
		require.NoError(t, f.st.Pool().QueryRow(f.ctx, `SELECT state FROM analysis_runs WHERE id = 1`).Scan(&s))
		return s
	}())

	// Again, as a second press of the button would: the row is gone, so
	// it was done; and once the press made Ann's row anew, still done.
	_, err = f.st.Users().Forget(f.ctx, forgetAnn, created)
	require.ErrorIs(t, err, memory.ErrAlreadyForgotten)
	_, err = f.st.Users().Upsert(f.ctx, domain.User{ID: forgetAnn, FirstName: "Ann"})
	require.NoError(t, err)
	_, err = f.st.Users().Forget(f.ctx, forgetAnn, created)
	require.ErrorIs(t, err, memory.ErrAlreadyForgotten)
	held, err = f.st.Users().Held(f.ctx, forgetAnn)
	require.NoError(t, err)
	require.Zero(t, held)
	require.Equal(t, 1, f.count(`SELECT count(*) FROM users WHERE id = $1`, forgetAnn), "the second press left only the new row")
}

func TestForgetDetachesAMasterOrdersName(t *testing.T) {
	t.Parallel()
	f := setupForget(t)
	held, err := f.st.Users().Held(f.ctx, forgetMax)
	require.NoError(t, err)
	require.Equal(t, memory.Held{Master: true, MasterKept: true}, held)
	created := f.created(forgetMax)
	got, err := f.st.Users().Forget(f.ctx, forgetMax, created)
	require.NoError(t, err)
	require.True(t, got.MasterKept)
	require.Equal(t, 1, got.Orders)

	// The users row stays as the master's anchor, with nothing of Max's.
	var username, first, lang, tgLang, profile string
	require.NoError(t, f.st.Pool().QueryRow(f.ctx, `SELECT username, first_name, language, telegram_language, profile FROM users WHERE id = $1`,
		forgetMax).Scan(&username, &first, &lang, &tgLang, &profile))
	require.Equal(t, []string{"", "", "", "", ""}, []string{username, first, lang, tgLang, profile})
	var active bool
	var city, district string
	var skills []string
	require.NoError(t, f.st.Pool().QueryRow(f.ctx, `SELECT active, city, district, skills FROM masters WHERE user_id = $1`,
		forgetMax).Scan(&active, &city, &district, &skills))
	require.False(t, active, "no new offers")
	require.Equal(t, []any{"-", "-", []string{"-"}}, []any{city, district, skills})
	// The order, its commission and the offers stay.
	require.Equal(t, 1, f.count(`SELECT count(*) FROM orders WHERE master_id = $1 AND commission = 100 AND commission_paid_at IS NULL`, forgetMax))
	require.Equal(t, 2, f.count(`SELECT count(*) FROM offers WHERE order_id = 1`))
	// Ann's and Bob's master records are untouched.
	require.Equal(t, 2, f.count(`SELECT count(*) FROM masters WHERE active AND city IN ($1, 'Kyiv')`, "City "+annMarker))
	require.Empty(t, tablesHolding(t, f.ctx, f.st.Pool(), maxMarker), "no table holds Max's text")
	require.Equal(t, map[string]int{"users": 1, "masters": 1, "orders": 1, "offers": 1},
		tablesHolding(t, f.ctx, f.st.Pool(), fmt.Sprint(forgetMax)), "Max's id only on the detached dispatch records")

	// The kept row is a new user's now: a second press changes nothing.
	require.NotEqual(t, created, f.created(forgetMax))
	_, err = f.st.Users().Forget(f.ctx, forgetMax, created)
	require.ErrorIs(t, err, memory.ErrAlreadyForgotten)
	require.Equal(t, 1, f.count(`SELECT count(*) FROM orders WHERE master_id = $1`, forgetMax))

	// A user with no row at all: nothing to do.
	_, err = f.st.Users().Forget(f.ctx, 7_100_404, created)
	require.ErrorIs(t, err, memory.ErrAlreadyForgotten)
}

// A customer's /forget takes the comments of their ratings, their words,
// and keeps the stars, the master's record; another customer's comment
// stays. The comment is written once, by the order's customer only.
func TestForgetClearsTheCustomersComments(t *testing.T) {
	t.Parallel()
	f := setupForget(t)
	orders := f.st.Orders()
	// Bob is the customer of a second order of Max's.
	f.exec(`INSERT INTO orders (id, created_by, city, district, skill, price, description, state, master_id, assigned_at, done_at, customer_id)
VALUES (2, $1, 'Kyiv', 'Center', 'plumbing', 500, 'fix the sink', 'DONE', $2, now(), now(), $3)`, forgetAdmin, forgetMax, forgetBob)
	for id, r := range map[int64]struct{ customer, stars int64 }{1: {forgetAnn, 5}, 2: {forgetBob, 3}} {
		_, ok, err := orders.Rate(f.ctx, id, r.customer, int(r.stars), "", nil)
		require.NoError(t, err)
		require.True(t, ok)
	}
	_, ok, err := orders.Comment(f.ctx, 1, forgetBob, "not my order", nil)
	require.NoError(t, err)
	require.False(t, ok, "only the order's customer comments")
	annWords := "came on time, " + annMarker
	r, ok, err := orders.Comment(f.ctx, 1, forgetAnn, annWords, nil)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, annWords, r.Comment)
	r, ok, err = orders.Comment(f.ctx, 1, forgetAnn, "and again", nil)
	require.NoError(t, err)
	require.False(t, ok, "once")
	require.Equal(t, annWords, r.Comment, "the comment as it stands")
	_, ok, err = orders.Comment(f.ctx, 2, forgetBob, "slow but fine", nil)
	require.NoError(t, err)
	require.True(t, ok)

	_, err = f.st.Users().Forget(f.ctx, forgetAnn, f.created(forgetAnn))
	require.NoError(t, err)
	ratings, err := orders.Ratings(f.ctx, []int64{1, 2})
	require.NoError(t, err)
	require.Equal(t, 5, ratings[1].Stars, "the stars stay the master's record")
	require.Empty(t, ratings[1].Comment, "Ann's words go")
	require.Equal(t, 1, f.count(`SELECT count(*) FROM order_ratings WHERE order_id = 1 AND comment IS NULL`))
	require.Equal(t, "slow but fine", ratings[2].Comment, "Bob's stay")
	require.Empty(t, tablesHolding(t, f.ctx, f.st.Pool(), annMarker), "no table holds Ann's text")
}
