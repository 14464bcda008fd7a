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
	runs := scalar[int](t, pool, `SELECT attempts FROM inbox WHERE update_id = $1`, updateID)
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
	require.Equal(t, runs+1, scalar[int](t, pool, `SELECT attempts FROM inbox WHERE update_id = $1`, updateID), "the update ran again")
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
	env, pool, boss := startDispatch(t, nil)
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
	env, pool, boss := startDispatch(t, nil)
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

// An admin's /prompt run again after another admin set a newer version
// from another chat keeps the newer one active: the set is keyed by its
// message (system_prompt_sets), so the rerun finds the version it made
// instead of making the old text active again, and its reply is the one
// written already.
func TestPromptRerunKeepsANewerSet(t *testing.T) {
	t.Parallel()
	env := e2e.New(t)
	const otherAdmin = 9002
	env.Start(map[string]string{"ADMIN_IDS": fmt.Sprintf("%d,%d", e2e.AdminID, otherAdmin)})
	pool := db(t, env)
	boss := env.TG.User(e2e.AdminID, "Boss", "en")
	oksana := env.TG.User(otherAdmin, "Oksana", "en")
	saved := func(chat int64) int {
		n := 0
		for _, m := range env.TG.Messages(chat) {
			if strings.HasPrefix(m.Text, "Saved: mentor version") {
				n++
			}
		}
		return n
	}

	sent := boss.SendText(boss.ID(), "/prompt mentor Be brief.")
	first := env.TG.WaitMessageAfter(t, boss.ID(), sent.MessageID, nil)
	require.Equal(t, "Saved: mentor version 2 is active now; earlier versions are kept.", first.Text)
	require.Equal(t, "Saved: mentor version 3 is active now; earlier versions are kept.",
		ask(t, env, oksana, oksana.ID(), "/prompt mentor Be kind.").Text)
	quiet(t, pool)

	rerunUpdate(t, env, pool, boss.ID(), sent.MessageID)
	require.Equal(t, "Be kind.", scalar[string](t, pool,
		`SELECT prompt_template FROM system_prompts WHERE role_name = 'mentor' AND is_active`), "the newer set stays active")
	require.Equal(t, 1, scalar[int](t, pool,
		`SELECT count(*) FROM system_prompts WHERE role_name = 'mentor' AND prompt_template = 'Be brief.'`), "one version for the message")
	require.Equal(t, 3, scalar[int](t, pool, `SELECT count(*) FROM system_prompts WHERE role_name = 'mentor'`))
	require.Equal(t, 1, scalar[int](t, pool,
		`SELECT count(*) FROM system_prompt_sets WHERE chat_id = $1 AND message_id = $2`, boss.ID(), sent.MessageID))
	require.Equal(t, 1, saved(boss.ID()), "one /prompt, one confirmation")
	require.Equal(t, 1, saved(oksana.ID()))

	// Had the crash come before the first reply was written, the rerun's
	// reply says the version is kept but another is in use, not that it is
	// active.
	_, err := pool.Exec(t.Context(), `DELETE FROM outbox WHERE chat_id = $1 AND body::text LIKE '%Saved: <b>mentor</b> version 2%'`, boss.ID())
	require.NoError(t, err)
	rerunUpdate(t, env, pool, boss.ID(), sent.MessageID)
	require.Equal(t, "Saved: mentor version 2. Another admin has set a newer version since, and that one is in use: /prompt mentor shows it.",
		env.TG.WaitMessageAfter(t, boss.ID(), first.MessageID, nil).Text)
	require.Equal(t, "Be kind.", scalar[string](t, pool,
		`SELECT prompt_template FROM system_prompts WHERE role_name = 'mentor' AND is_active`))

	// The same command sent anew is a new set.
	again := boss.SendText(boss.ID(), "/prompt mentor Be brief.")
	require.Equal(t, "Saved: mentor version 4 is active now; earlier versions are kept.",
		env.TG.WaitMessageAfter(t, boss.ID(), again.MessageID, nil).Text)
}

// "Forget what I told you about X" run again asks once: the request is
// keyed by its message (memory_requests.source_message_id), so the rerun
// finds the row the first run made, whose id the confirmation's buttons
// carry, and leaves no second one; its reply is the one written already.
func TestForgetAboutRerunAsksOnce(t *testing.T) {
	t.Parallel()
	env, pool := memoryEnv(t)
	ann := env.TG.User(7_400_021, "Ann", "en")
	chatWith(t, env, ann, "I live in Kyiv with my family")
	waitArchived(t, pool, 1)
	found := func(m tgfake.BotMessage) bool { return strings.HasPrefix(m.Text, "I found memories matching that: 1.") }
	asks := func() int {
		n := 0
		for _, m := range env.TG.Messages(ann.ID()) {
			if found(m) {
				n++
			}
		}
		return n
	}

	sent := ann.SendText(ann.ID(), "Forget what I told you about Kyiv")
	asked := env.TG.WaitMessageAfter(t, ann.ID(), sent.MessageID, found)
	quiet(t, pool)

	rerunUpdate(t, env, pool, ann.ID(), sent.MessageID)
	require.Equal(t, 1, scalar[int](t, pool, `SELECT count(*) FROM memory_requests WHERE user_id = $1 AND kind = 'forget'`, ann.ID()),
		"one request for the message, however many times its update ran")
	require.Equal(t, 1, asks(), "one question")

	// The buttons the user was shown answer the request that stayed.
	q, err := ann.PressButton(asked, "Delete (1)")
	require.NoError(t, err)
	require.False(t, env.TG.WaitCallbackAnswer(t, q.ID).ShowAlert)
	edited(t, env, ann.ID(), asked.MessageID, func(s string) bool { return strings.HasPrefix(s, "Forgotten.") })
	require.Zero(t, scalar[int](t, pool, `SELECT count(*) FROM memory_requests`))
	require.Zero(t, scalar[int](t, pool, `SELECT count(*) FROM lsm_storage WHERE user_id = $1`, ann.ID()))
}
