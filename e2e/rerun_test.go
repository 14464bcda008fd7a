package e2e_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"switchboard/e2e"
	"switchboard/e2e/tgfake"
)

// ARCHITECTURE "Answered once": an update whose handler committed and
// whose done-mark was lost (its replica killed in between) runs again, and
// the second run changes and sends nothing the first did.

// rerunUpdate puts the update that carried message messageID of chat back
// to pending, unclaimed: the state a replica killed after the handler's
// commit and before its done-mark leaves once liveness gives the claim
// back. Any inbox worker then runs it again; rerunUpdate returns once it
// has and whatever it wrote is delivered.
func rerunUpdate(t *testing.T, env *e2e.Env, pool *pgxpool.Pool, chat int64, messageID int) {
	t.Helper()
	// The update as Telegram gave it: a done row keeps no body.
	var body json.RawMessage
	var updateID int64
	for _, c := range env.TG.CallsTo("getUpdates") {
		var ups []json.RawMessage
		_ = json.Unmarshal(c.Result, &ups)
		for _, u := range ups {
			var h struct {
				ID  int64 `json:"update_id"`
				Msg *struct {
					ID   int `json:"message_id"`
					Chat struct {
						ID int64 `json:"id"`
					} `json:"chat"`
				} `json:"message"`
			}
			if json.Unmarshal(u, &h) == nil && h.Msg != nil && h.Msg.ID == messageID && h.Msg.Chat.ID == chat {
				body, updateID = u, h.ID
			}
		}
	}
	require.NotNil(t, body, "the update was fetched")
	tag, err := pool.Exec(t.Context(), `UPDATE inbox SET state = 'pending', claim_token = NULL, claimed_until = NULL,
    claimed_by = NULL, next_attempt_at = now(), done_at = NULL, body = $2, chat_id = $3
WHERE update_id = $1 AND state = 'done'`, updateID, []byte(body), chat)
	require.NoError(t, err)
	require.EqualValues(t, 1, tag.RowsAffected(), "the update was handled")
	eventually(t, time.Minute, func() bool {
		return scalar[int](t, pool, `SELECT count(*) FROM inbox WHERE update_id = $1 AND state = 'done'`, updateID) == 1
	}, func() string { return "the update not run again" })
	quiet(t, pool)
	// What a second run wrote would be delivered by now; give a late
	// sender a moment more.
	time.Sleep(2 * time.Second)
	require.Equal(t, 2, scalar[int](t, pool, `SELECT attempts FROM inbox WHERE update_id = $1`, updateID), "the update ran twice")
}

// A pasted vacancy link whose update runs again writes no second card
// (the card rides in the match's statement, keyed by the pasting message:
// vacancy_matches.pasted_by); the same link pasted anew shows it again.
func TestPastedLinkRerunSendsOneCard(t *testing.T) {
	t.Parallel()
	env := e2e.New(t)
	relevantVacancies(env, 1, 8700)
	pool := startHourly(t, env)
	isCard := func(m tgfake.BotMessage) bool { return strings.Contains(m.Text, "Score: 87/100") }
	cards := func(chat int64) int {
		n := 0
		for _, m := range env.TG.Messages(chat) {
			if isCard(m) {
				n++
			}
		}
		return n
	}

	ann := env.TG.User(871, "Ann", "en")
	reply(t, env, ann, "/profile Go developer, 5 years, PostgreSQL, remote", "Profile saved")
	sent := ann.SendText(ann.ID(), "https://hh.ru/vacancy/8700")
	env.TG.WaitMessageAfter(t, ann.ID(), sent.MessageID, isCard)
	quiet(t, pool)

	rerunUpdate(t, env, pool, ann.ID(), sent.MessageID)
	require.Equal(t, 1, cards(ann.ID()), "one paste, one card, however many times its update ran")
	require.Equal(t, 1, scalar[int](t, pool, `SELECT count(*) FROM outbox WHERE chat_id = $1 AND kind = 'vacancy'`, ann.ID()))
	require.Equal(t, 1, env.LLM.Calls("relevance"), "judged once")

	again := ann.SendText(ann.ID(), "https://hh.ru/vacancy/8700")
	env.TG.WaitMessageAfter(t, ann.ID(), again.MessageID, isCard)
	require.Equal(t, 2, cards(ann.ID()), "a new paste shows the card again")
	require.Equal(t, 1, env.LLM.Calls("relevance"), "from the verdict kept")
}

// A customer's /start o_<token> whose update runs again sends no second
// status and logs no second "opened its link" (the join is keyed by its
// message: orders.customer_joined_by); a new /start shows the status anew.
func TestCustomerJoinRerunTellsOnce(t *testing.T) {
	t.Parallel()
	env, pool, boss := startDispatch(t)
	cora := env.TG.User(762, "Cora", "en")
	confirm := ask(t, env, boss, boss.ID(), "/order "+orderWithCustomer("Odesa Center", 1200))
	order := int64(scalar[int](t, pool, `SELECT max(id) FROM orders`))
	link := orderLinkOf(t, confirm.Text)
	statuses := func() int {
		n := 0
		for _, m := range env.TG.Messages(cora.ID()) {
			if strings.HasPrefix(m.Text, fmt.Sprintf("📋 Order #%d", order)) {
				n++
			}
		}
		return n
	}
	opened := func() int {
		n := 0
		for _, l := range liveLog(env) {
			n += strings.Count(l, "the customer opened its link")
		}
		return n
	}

	sent := cora.SendText(cora.ID(), "/start "+link)
	waitStatus(t, env, cora.ID(), order, "We are finding a master for you.")
	env.TG.WaitFor(t, 20*time.Second, func() bool { return logHas(env, "the customer opened its link") })
	quiet(t, pool)

	rerunUpdate(t, env, pool, cora.ID(), sent.MessageID)
	require.Equal(t, 1, statuses(), "one /start, one status message")
	require.Equal(t, 1, opened(), "one /start, one live-log line")

	again := cora.SendText(cora.ID(), "/start "+link)
	env.TG.WaitMessageAfter(t, cora.ID(), again.MessageID, func(m tgfake.BotMessage) bool {
		return strings.HasPrefix(m.Text, fmt.Sprintf("📋 Order #%d", order))
	})
	require.Equal(t, 2, statuses(), "a new /start, the status anew")
	env.TG.WaitFor(t, 20*time.Second, func() bool { return opened() == 2 })
}

// The method above on a handler keyed from the start (/order, by its
// message; its reply by update and place): nothing changes or is sent
// twice.
func TestRerunOfAnOrderCreatesAndSaysOnce(t *testing.T) {
	t.Parallel()
	env, pool, boss := startDispatch(t)
	sent := boss.SendText(boss.ID(), "/order "+orderWithCustomer("Odesa Center", 1200))
	created := func(m tgfake.BotMessage) bool { return strings.Contains(m.Text, "created: plumbing") }
	env.TG.WaitMessageAfter(t, boss.ID(), sent.MessageID, created)
	quiet(t, pool)
	rerunUpdate(t, env, pool, boss.ID(), sent.MessageID)
	n := 0
	for _, m := range env.TG.Messages(boss.ID()) {
		if created(m) {
			n++
		}
	}
	require.Equal(t, 1, n)
	require.Equal(t, 1, scalar[int](t, pool, `SELECT count(*) FROM orders`))
}

// A résumé whose reading failed, its update run again (the replica died
// after the draft's commit, and the draft was read and failed before the
// rerun), reads the file no second time and tells the user once: the failed
// draft stays, naming its message, until a newer document replaces it.
func TestResumeRerunAfterAFailedReadTellsOnce(t *testing.T) {
	t.Parallel()
	env, _ := startResume(t, nil)
	pool := db(t, env)
	ann := env.TG.User(812, "Ann", "en")
	count := func(text string) int {
		n := 0
		for _, m := range env.TG.Messages(ann.ID()) {
			if strings.Contains(m.Text, text) {
				n++
			}
		}
		return n
	}
	const scan = "This PDF has no text layer"

	sent := ann.SendDocument(ann.ID(), "scan.pdf", "application/pdf", resumeFile(t, "scanned.pdf"))
	env.TG.WaitMessageAfter(t, ann.ID(), sent.MessageID, func(m tgfake.BotMessage) bool { return strings.Contains(m.Text, scan) })
	quiet(t, pool)

	rerunUpdate(t, env, pool, ann.ID(), sent.MessageID)
	eventually(t, time.Minute, func() bool {
		return scalar[int](t, pool, `SELECT count(*) FROM profile_drafts WHERE state = 'reading'`) == 0
	}, func() string { return "a draft is still being read" })
	quiet(t, pool)
	require.Equal(t, 1, count("Reading your résumé"), "one document, one acknowledgement")
	require.Equal(t, 1, count(scan), "one document, one refusal")

	// A new document is read anew.
	again := ann.SendDocument(ann.ID(), "scan.pdf", "application/pdf", resumeFile(t, "scanned.pdf"))
	env.TG.WaitMessageAfter(t, ann.ID(), again.MessageID, func(m tgfake.BotMessage) bool { return strings.Contains(m.Text, scan) })
	require.Equal(t, 2, count(scan))
}
