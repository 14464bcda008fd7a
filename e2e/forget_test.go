package e2e_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"switchboard/e2e"
	"switchboard/e2e/tgfake"
)

// holding counts, per public table, the rows that hold a user: their text
// (marker, anywhere in the row's text form: every column, jsonb and arrays
// included) or their id (an equal bigint, an element of a bigint array, or
// the number standing alone in a text or jsonb column).
func holding(t *testing.T, pool *pgxpool.Pool, marker string, id int64) map[string]int {
	t.Helper()
	ctx := context.Background()
	rows, err := pool.Query(ctx, `SELECT table_name, column_name, data_type FROM information_schema.columns
WHERE table_schema = 'public' AND table_name IN
      (SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE')
ORDER BY table_name, ordinal_position`)
	require.NoError(t, err)
	type column struct{ table, name, typ string }
	cols, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (column, error) {
		var c column
		return c, r.Scan(&c.table, &c.name, &c.typ)
	})
	require.NoError(t, err)
	conds := map[string][]string{}
	var tables []string
	for _, c := range cols {
		if _, seen := conds[c.table]; !seen {
			tables = append(tables, c.table)
			conds[c.table] = []string{`strpos(t::text, $1) > 0`}
		}
		col := pgx.Identifier{c.name}.Sanitize()
		switch c.typ {
		case "bigint":
			conds[c.table] = append(conds[c.table], col+` = $2::bigint`)
		case "ARRAY":
			conds[c.table] = append(conds[c.table], `$2 = ANY (`+col+`::text[])`)
		case "text", "jsonb", "character varying":
			conds[c.table] = append(conds[c.table], col+`::text ~ ('(^|[^0-9])' || $2 || '([^0-9]|$)')`)
		}
	}
	require.Contains(t, tables, "group_messages")
	require.Contains(t, tables, "outbox")
	out := map[string]int{}
	for _, table := range tables {
		var n int
		// ($2 is named in every query, so its type is always known.)
		q := fmt.Sprintf(`SELECT count(*) FROM %s t WHERE $2::text <> '' AND (%s)`,
			pgx.Identifier{table}.Sanitize(), strings.Join(conds[table], " OR "))
		require.NoError(t, pool.QueryRow(ctx, q, marker, fmt.Sprint(id)).Scan(&n), q)
		if n > 0 {
			out[table] = n
		}
	}
	return out
}

// The acceptance: a user with memory, a profile, searches, matches,
// a ban word and group messages (one of them a proposal's source) forgets
// with /forget and its button; afterwards no table holds their text or
// their id, and another user's runs, proposals, messages and matches are
// intact. Another user's forged press does nothing.
func TestForgetErasesEverythingOfTheUser(t *testing.T) {
	t.Parallel()
	const (
		annID  = 7_200_001
		bobID  = 7_200_002
		marker = "zebra-quartz-7200"
	)
	env := e2e.New(t, e2e.WithAdminGroup(adminGroup))
	team := env.TG.Supergroup(teamChat, "Team", "")
	scriptMemory(env)
	proposeTasks(env)
	relevantVacancies(env, 2, 7200)
	pool := startHourly(t, env)
	boss := env.TG.User(e2e.AdminID, "Boss", "en")
	ann := env.TG.User(annID, "Ann", "en")
	bob := env.TG.User(bobID, "Bob", "en")

	// Both chat with the memory, save the same search (one shared search
	// key) and get their vacancy cards.
	for _, who := range []*tgfake.Person{ann, bob} {
		q := who.SendText(who.ID(), "I train for a marathon "+map[int64]string{annID: marker, bobID: "in spring"}[who.ID()])
		env.TG.WaitMessage(t, who.ID(), func(m tgfake.BotMessage) bool {
			return m.ReplyToID() == q.MessageID && strings.HasPrefix(m.Text, "Mentor says")
		})
		subscribe(t, env, who, "golang")
		env.TG.WaitFor(t, 60*time.Second, func() bool { return len(vacancyMessages(env, who.ID())) == 2 })
	}
	require.Contains(t, ask(t, env, ann, ann.ID(), "/profile Go developer who likes "+marker).Text, "Profile saved")
	ask(t, env, ann, ann.ID(), "/ban "+marker)
	// Archived: the summary is written, nothing of the run is in flight.
	eventually(t, 20*time.Second, func() bool {
		return scalar[int](t, pool, `SELECT count(*) FROM lsm_storage`) == 2 &&
			scalar[int](t, pool, `SELECT count(*) FROM pipeline_runs WHERE archived_at IS NULL`) == 0
	})

	// Group messages; a run proposes from the two that say "please".
	ann.SendText(team.ID, "please fix the login page "+marker)
	ann.SendText(team.ID, "chatter about "+marker)
	bob.SendText(team.ID, "please review my PR")
	waitGroupMessages(t, pool, 3)
	require.Contains(t, ask(t, env, boss, boss.ID(), "/run_new 24h").Text, "Run #1 created")
	ask(t, env, boss, boss.ID(), "/run_start 1")
	waitBoard(t, env, 1, 60*time.Second, func(m tgfake.BotMessage) bool {
		return strings.Contains(m.Text, "Run #1 completed") && strings.Contains(m.Text, "Proposals 1–2 of 2")
	})
	// The board's last edit is written before the run completes; wait
	// until the outbox has delivered it, so nothing of the run is in flight.
	eventually(t, 20*time.Second, func() bool {
		return scalar[int](t, pool, `SELECT count(*) FROM outbox WHERE chat_id = $1 AND state = 'pending'`, int64(adminGroup)) == 0
	})

	before := holding(t, pool, marker, annID)
	for _, table := range []string{"users", "pipeline_runs", "raw_logs", "lsm_storage", "searches", "ban_words",
		"vacancy_matches", "group_messages", "analysis_proposals", "outbox"} {
		require.Contains(t, before, table, "the scenario put Ann into every workflow")
	}
	bobRows := func() map[string]int {
		return countBy(t, pool, `
SELECT 'runs', count(*) FROM pipeline_runs WHERE user_id = $1 UNION ALL
SELECT 'logs', count(*) FROM raw_logs WHERE user_id = $1 UNION ALL
SELECT 'summaries', count(*) FROM lsm_storage WHERE user_id = $1 UNION ALL
SELECT 'searches', count(*) FROM searches WHERE user_id = $1 UNION ALL
SELECT 'matches', count(*) FROM vacancy_matches WHERE user_id = $1 UNION ALL
SELECT 'group messages', count(*) FROM group_messages WHERE author_id = $1 AND text = 'please review my PR' UNION ALL
SELECT 'proposals', count(*) FROM analysis_proposals WHERE title = 'please review my PR' UNION ALL
SELECT 'sources', count(*) FROM analysis_proposal_sources UNION ALL
SELECT 'search state', count(*) FROM discovery_state UNION ALL
SELECT 'runs of analysis', count(*) FROM analysis_runs WHERE state = 'completed' AND proposals_total = 2`, int64(bobID))
	}
	bobBefore := bobRows()
	require.Equal(t, map[string]int{"runs": 1, "logs": 2, "summaries": 1, "searches": 1, "matches": 2, "group messages": 1,
		"proposals": 1, "sources": 2, "search state": 1, "runs of analysis": 1}, bobBefore)

	// The confirmation lists what goes: Ann has something of every kind,
	// but is neither a master nor an admin.
	confirm := ask(t, env, ann, ann.ID(), "/forget")
	for _, listed := range []string{"your messages to me, my answers and everything I remember about you", "profile (and its draft from a résumé), saved searches, ban words, vacancy matches and cover letters",
		"your messages in the groups I read", "language and settings"} {
		require.Contains(t, confirm.Text, listed)
	}
	for _, absent := range []string{"What stays:", "master record", "admin"} {
		require.NotContains(t, confirm.Text, absent)
	}
	yes := confirm.ReplyMarkup.Buttons()[0].CallbackData

	// Bob forges Ann's button on his own confirmation: refused, nothing gone.
	bobConfirm := ask(t, env, bob, bob.ID(), "/forget")
	quiet(t, pool)
	before = holding(t, pool, marker, annID) // with the confirmation's outbox row
	forged := bob.PressRaw(bobConfirm, yes)
	require.Equal(t, "This button is not for you.", env.TG.WaitCallbackAnswer(t, forged.ID).Text)
	require.Equal(t, before, holding(t, pool, marker, annID))

	require.False(t, ann.PressAndWait(t, confirm, "Forget everything").ShowAlert)
	done, _ := env.TG.MessageByID(ann.ID(), confirm.MessageID)
	require.True(t, strings.HasPrefix(done.Text, "Done, I forgot you. Deleted: conversations: 1, messages and answers: 2, memory versions: 1, "+
		"searches: 1, ban words: 1, vacancy matches: 2, group messages: 2,"), done.Text)
	require.NotContains(t, done.Text, "master record")

	// The press's own update is in the inbox until its handler's work is
	// marked done (which clears it): wait for that, as for every write.
	quiet(t, pool)
	require.Empty(t, holding(t, pool, marker, annID), "no table holds Ann's text or id")
	require.Equal(t, bobBefore, bobRows(), "Bob's rows are intact")
	// Ann's cited message stays, blank, as the source of her proposal,
	// whose copy of her words is gone.
	require.Equal(t, 1, scalar[int](t, pool, `SELECT count(*) FROM group_messages WHERE text = '' AND author = '' AND author_id = 0`))
	require.Equal(t, 1, scalar[int](t, pool, `SELECT count(*) FROM analysis_proposals WHERE title = '[deleted]'`))
	require.Equal(t, 2, scalar[int](t, pool, `SELECT count(*) FROM vacancies`), "HH's data stays")

	// The run goes on: its proposals are decided and it closes.
	b, ok := board(env, 1)
	require.True(t, ok)
	pressEach(t, boss, b, "1 ✅", "2 ✅")
	require.Contains(t, ask(t, env, boss, boss.ID(), "/run_close 1").Shown(), "100")
	require.Equal(t, "closed", scalar[string](t, pool, `SELECT state FROM analysis_runs WHERE id = 1`))

	// Ann may come back: she starts afresh.
	require.Equal(t, "I remember nothing about you yet.", ask(t, env, ann, ann.ID(), "/memory").Text)
}

// A second tap on "Forget everything" (a double tap, a stale client) is
// answered with a toast and leaves the result, with its real counts, as it
// is. The confirmation names only what applies: a job seeker's parts to a
// job seeker, a master's and an admin's clauses to them alone.
func TestForgetSecondTapKeepsTheCounts(t *testing.T) {
	t.Parallel()
	env := e2e.New(t)
	env.Start(nil)
	ann := env.TG.User(7_200_011, "Ann", "en")
	max := env.TG.User(7_200_012, "Max", "en")
	boss := env.TG.User(e2e.AdminID, "Boss", "en")
	require.Contains(t, ask(t, env, ann, ann.ID(), "/profile Go developer, 5 years").Text, "Profile saved")
	ask(t, env, ann, ann.ID(), "/ban php")
	ask(t, env, ann, ann.ID(), "/ban bitrix")

	confirm := ask(t, env, ann, ann.ID(), "/forget")
	require.Equal(t, "Forget you? I will delete what I keep that is yours alone:\n"+
		"• your profile (and its draft from a résumé), saved searches, ban words, vacancy matches and cover letters;\n"+
		"• your language and settings, and my messages to you.\n"+
		"This cannot be undone.", confirm.Text)

	first, err := ann.PressButton(confirm, "Forget everything")
	require.NoError(t, err)
	// The second tap carries the same data, whether or not the first one's
	// edit has reached the client yet.
	second := ann.PressRaw(confirm, first.Data)
	require.False(t, env.TG.WaitCallbackAnswer(t, first.ID).ShowAlert)
	again := env.TG.WaitCallbackAnswer(t, second.ID)
	require.Equal(t, "Already done: I forgot you. The message shows what was deleted.", again.Text)
	require.True(t, again.ShowAlert)
	done, _ := env.TG.MessageByID(ann.ID(), confirm.MessageID)
	require.True(t, strings.HasPrefix(done.Text, "Done, I forgot you. Deleted: ban words: 2, my messages to you: "), done.Text)
	require.Len(t, done.Edits, 1, "edited once, by the first tap")
	require.Empty(t, done.ReplyMarkup.Buttons())
	// Cancel, tapped late, leaves the result too.
	cancel := ann.PressRaw(confirm, confirm.ReplyMarkup.Buttons()[1].CallbackData)
	require.True(t, env.TG.WaitCallbackAnswer(t, cancel.ID).ShowAlert)
	still, _ := env.TG.MessageByID(ann.ID(), confirm.MessageID)
	require.Equal(t, done.Text, still.Text)
	require.Len(t, still.Edits, 1)

	// A master hears about their master record; an admin about the work
	// that keeps their id; neither about what they do not have.
	require.Contains(t, ask(t, env, max, max.ID(), "/master Oslo Center plumbing").Text, "registered as a master")
	text := ask(t, env, max, max.ID(), "/forget").Text
	require.Contains(t, text, "• your master record;")
	require.NotContains(t, text, "profile")
	require.NotContains(t, text, "admin")
	text = ask(t, env, boss, boss.ID(), "/forget").Text
	require.Contains(t, text, "As an admin, the orders and runs you created and the proposals you decided keep your id.")
	require.NotContains(t, text, "master")
	require.NotContains(t, text, "profile")
}
