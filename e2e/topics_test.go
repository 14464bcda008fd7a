package e2e_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"switchboard/e2e"
	"switchboard/e2e/tgfake"
)

// topicNamed is the live topic of chat named name, waited for.
func topicNamed(t *testing.T, env *e2e.Env, chat int64, name string) tgfake.TopicInfo {
	t.Helper()
	var got tgfake.TopicInfo
	env.TG.WaitFor(t, 60*time.Second, func() bool {
		for _, tp := range env.TG.Topics(chat) {
			if tp.Name == name && !tp.Deleted {
				got = tp
				return true
			}
		}
		return false
	})
	return got
}

// topicNames are the names of chat's live topics, in the order created.
func topicNames(env *e2e.Env, chat int64) []string {
	var out []string
	for _, tp := range env.TG.Topics(chat) {
		if !tp.Deleted {
			out = append(out, tp.Name)
		}
	}
	return out
}

// Issue 39's topic per workflow through the built binary, with the bot's
// topic mode on: a job seeker's profile, vacancy card and the hint for
// stray text land in Vacancies; a question written in the chat is
// answered in Memory chat, drafts and "typing" there too, and a question
// written there is answered there; /help answers where it was asked; a
// search's link pasted into Vacancies is that search. Topics are named in
// the user's language. A user who deletes Vacancies gets the next card in
// a new one, once, and nothing is doubled.
func TestEachWorkflowWritesInItsOwnTopic(t *testing.T) {
	t.Parallel()
	env := e2e.New(t)
	env.TG.SetTopics(true, false)
	screening(env).ReplyJSON(relevantAnswer)
	scriptMemory(env)
	env.HH.Add(golangVacancies(3, 8800)...)
	env.Start(map[string]string{"FETCH_INTERVAL": "1h"})
	isCard := func(id string) func(tgfake.BotMessage) bool {
		return func(m tgfake.BotMessage) bool {
			return strings.Contains(m.Text, "Score: 87/100") && strings.Contains(m.Text, "Golang developer "+id)
		}
	}

	ann := env.TG.User(881, "Ann", "en")
	profile := reply(t, env, ann, "/profile Go developer, 5 years, PostgreSQL, remote", "Profile saved")
	vacancies := topicNamed(t, env, ann.ID(), "Vacancies")
	require.Equal(t, vacancies.MessageThreadID, profile.MessageThreadID, "a job seeker's command answers in Vacancies")

	sent := ann.SendText(ann.ID(), "https://hh.ru/vacancy/8800")
	card := env.TG.WaitMessageAfter(t, ann.ID(), sent.MessageID, isCard("8800"))
	require.Equal(t, vacancies.MessageThreadID, card.MessageThreadID)

	stray, err := ann.SendTextIn(ann.ID(), vacancies.MessageThreadID, "hello?")
	require.NoError(t, err)
	hint := env.TG.WaitMessageAfter(t, ann.ID(), stray.MessageID, func(m tgfake.BotMessage) bool {
		return strings.Contains(m.Text, "This topic holds your vacancies")
	})
	require.Equal(t, vacancies.MessageThreadID, hint.MessageThreadID)

	question := ann.SendText(ann.ID(), "I run a marathon in April")
	answer := env.TG.WaitMessage(t, ann.ID(), func(m tgfake.BotMessage) bool {
		return m.ReplyToID() == question.MessageID && strings.HasPrefix(m.Text, "Mentor says")
	})
	memory := topicNamed(t, env, ann.ID(), "Memory chat")
	require.Equal(t, memory.MessageThreadID, answer.MessageThreadID, "a question from the chat is answered in Memory chat")
	for _, d := range env.TG.Drafts(ann.ID()) {
		require.Equal(t, memory.MessageThreadID, d.MessageThreadID, "drafts show where the answer goes")
	}
	for _, a := range env.TG.ChatActionsIn(ann.ID()) {
		require.Contains(t, []int{0, memory.MessageThreadID}, a.MessageThreadID, "typing is in the chat or in Memory chat")
	}

	asked, err := ann.SendTextIn(ann.ID(), memory.MessageThreadID, "What should I eat before it?")
	require.NoError(t, err)
	again := env.TG.WaitMessage(t, ann.ID(), func(m tgfake.BotMessage) bool {
		return m.ReplyToID() == asked.MessageID && strings.HasPrefix(m.Text, "Mentor says")
	})
	require.Equal(t, memory.MessageThreadID, again.MessageThreadID)

	helpIn, err := ann.SendTextIn(ann.ID(), memory.MessageThreadID, "/help")
	require.NoError(t, err)
	help := env.TG.WaitMessageAfter(t, ann.ID(), helpIn.MessageID, func(m tgfake.BotMessage) bool { return strings.Contains(m.Text, "/profile") })
	require.Equal(t, memory.MessageThreadID, help.MessageThreadID, "a general command answers where it was asked")

	link, err := ann.SendTextIn(ann.ID(), vacancies.MessageThreadID, "https://hh.ru/search/vacancy?text=golang&area=1")
	require.NoError(t, err)
	saved := env.TG.WaitMessageAfter(t, ann.ID(), link.MessageID, func(m tgfake.BotMessage) bool { return strings.Contains(m.Text, "Saved:") })
	require.Equal(t, vacancies.MessageThreadID, saved.MessageThreadID)
	require.Contains(t, saved.Text, "golang")

	// Ann deletes Vacancies: the next card opens it anew, once.
	require.NoError(t, ann.DeleteTopic(vacancies.MessageThreadID))
	sent = ann.SendText(ann.ID(), "https://hh.ru/vacancy/8801")
	next := env.TG.WaitMessageAfter(t, ann.ID(), sent.MessageID, isCard("8801"))
	renewed := topicNamed(t, env, ann.ID(), "Vacancies")
	require.NotEqual(t, vacancies.MessageThreadID, renewed.MessageThreadID)
	require.Equal(t, renewed.MessageThreadID, next.MessageThreadID)
	cards := 0
	for _, m := range env.TG.Messages(ann.ID()) {
		if isCard("8801")(m) {
			cards++
		}
	}
	require.Equal(t, 1, cards, "the card went once")
	require.Equal(t, []string{"Memory chat", "Vacancies"}, topicNames(env, ann.ID()), "one topic per workflow")

	// A Russian reader's topics are named in Russian.
	ivan := env.TG.User(882, "Иван", "ru")
	reply(t, env, ivan, "/profile Go-разработчик", "Профиль сохранён")
	require.Equal(t, []string{"Вакансии"}, topicNames(env, ivan.ID()))
}

// Without the bot's topic mode, or on a server older than topics in
// private chats, everything goes to the chat as before; the older server
// is named on /status.
func TestWithoutTopicsEverythingGoesToTheChat(t *testing.T) {
	t.Parallel()
	env := e2e.New(t)
	env.TG.SetTopics(true, false)
	env.TG.SetUnsupported(true, tgfake.FeatureTopics)
	scriptMemory(env)
	env.Start(nil)
	boss := env.TG.User(e2e.AdminID, "Boss", "en")
	ann := env.TG.User(883, "Ann", "en")
	profile := reply(t, env, ann, "/profile Go developer", "Profile saved")
	require.Zero(t, profile.MessageThreadID)
	question := ann.SendText(ann.ID(), "I run a marathon in April")
	answer := env.TG.WaitMessage(t, ann.ID(), func(m tgfake.BotMessage) bool {
		return m.ReplyToID() == question.MessageID && strings.HasPrefix(m.Text, "Mentor says")
	})
	require.Zero(t, answer.MessageThreadID)
	require.Empty(t, env.TG.Topics(ann.ID()))
	require.Contains(t, ask(t, env, boss, boss.ID(), "/status").Shown(), "⚠️ This Bot API server lacks topics in private chats (Bot API 9.4)")
}

// A forum admin chat: the live log, a run's board and a system notice go
// each into its own topic, named in the admin chat's language; an admin's
// command answers in the topic it was written in.
func TestAdminForumKeepsLogRunsAndNoticesApart(t *testing.T) {
	t.Parallel()
	env := e2e.New(t, e2e.WithAdminForum(adminGroup))
	boss := env.TG.User(e2e.AdminID, "Boss", "en")
	boss.SetBotStatus(adminGroup, tgfake.StatusAdministrator)
	team := env.TG.Supergroup(teamChat, "Team", "")
	boss.SetBotStatus(team.ID, tgfake.StatusLeft)
	proposeTasks(env)
	env.Start(map[string]string{"OFFER_SLA": "1h", "DISTRIBUTION_INTERVAL": "1h"})
	fay := env.TG.User(884, "Fay", "en")
	register(t, env, fay, "Poltava Center plumbing")

	createOrder(t, env, boss, "Poltava Center plumbing 600 A dripping tap")
	logged := env.TG.WaitMessage(t, adminGroup, func(m tgfake.BotMessage) bool { return strings.Contains(m.Text, "Order #1") })
	log := topicNamed(t, env, adminGroup, "Live log")
	require.Equal(t, log.MessageThreadID, logged.MessageThreadID)
	offer := env.TG.WaitMessage(t, fay.ID(), func(m tgfake.BotMessage) bool { return strings.Contains(m.Text, "New order #") })
	require.Zero(t, offer.MessageThreadID, "Fay's chat has no topics: the bot's topic mode is off")

	boss.SetBotStatus(team.ID, tgfake.StatusAdministrator)
	added := env.TG.WaitMessage(t, adminGroup, func(m tgfake.BotMessage) bool { return strings.Contains(m.Text, "I was added to the group “Team”") })
	require.Equal(t, topicNamed(t, env, adminGroup, "Notices").MessageThreadID, added.MessageThreadID)
	ann := env.TG.User(885, "Ann", "en")
	ann.SendText(team.ID, "Bob, please fix the login page")
	board := completedRun(t, env, boss)
	runs := topicNamed(t, env, adminGroup, "Analysis runs")
	require.Equal(t, runs.MessageThreadID, board.MessageThreadID)

	status, err := boss.SendTextIn(adminGroup, runs.MessageThreadID, "/runs")
	require.NoError(t, err)
	listed := env.TG.WaitMessageAfter(t, adminGroup, status.MessageID, func(m tgfake.BotMessage) bool { return strings.Contains(m.Text, "#1") })
	require.Equal(t, runs.MessageThreadID, listed.MessageThreadID, "an admin's command answers in its topic")
	for _, m := range env.TG.Messages(adminGroup) {
		require.NotZero(t, m.MessageThreadID, "everything in the forum is in a topic: %q", m.Text)
	}
}
