package bot_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"switchboard/bot"
	"switchboard/domain/dispatch"
)

// rateMaster gives a master finished orders rated with stars, as the
// customers' ratings would.
func (env dispEnv) rateMaster(t *testing.T, master int64, stars ...int) {
	t.Helper()
	for _, n := range stars {
		_, err := env.st.Pool().Exec(context.Background(), `
WITH o AS (
    INSERT INTO orders (created_by, city, district, skill, price, description, state, master_id, assigned_at, done_at)
    VALUES (1, 'x', 'x', 'x', 100, 'x', 'DONE', $1, now(), now()) RETURNING id, master_id
)
INSERT INTO order_ratings (order_id, master_id, stars) SELECT id, master_id, $2 FROM o`, master, n)
		require.NoError(t, err)
	}
}

// /masters lists every master by place with their status and their
// customers' 90-day average (with how many ratings; — under three), a
// page at a time, turned in place.
func TestDispatchMastersList(t *testing.T) {
	t.Parallel()
	env := setupDispatch(t)
	require.Equal(t, "No masters yet: they register with /master.", env.ask(t, env.admin, "/masters").Text)

	ann := env.srv.User(42, "Ann", "en")
	bob := env.srv.User(43, "Bob", "en")
	cat := env.srv.User(44, "Cat", "en")
	env.register(t, "Lviv Center plumbing,electrics", ann)
	env.register(t, "Kyiv Podil tiling", bob)
	env.register(t, "Kyiv Obolon tiling", cat)
	env.rateMaster(t, 42, 5, 5, 4)
	env.rateMaster(t, 43, 5)
	_, err := env.st.Pool().Exec(context.Background(), `UPDATE masters SET active = false WHERE user_id = 43`)
	require.NoError(t, err)
	_, err = env.st.Pool().Exec(context.Background(), `UPDATE masters SET blocked_at = now() WHERE user_id = 44`)
	require.NoError(t, err)

	list := env.ask(t, env.admin, "/masters")
	require.Equal(t, "Masters — page 1 of 1, 3 in all\n"+
		"⭐ the customers' average over 90 days (ratings); — under 3 ratings, which offers rank as 4.0\n\n"+
		"Cat (id 44)\n📍 Kyiv, Obolon · 🛠 tiling\n⛔ blocked for commission · ⭐ — (0)\n\n"+
		"Bob (id 43)\n📍 Kyiv, Podil · 🛠 tiling\n⏸ paused · ⭐ — (1)\n\n"+
		"Ann (id 42)\n📍 Lviv, Center · 🛠 plumbing, electrics\n✅ active · ⭐ 4.7 (3)", list.Text)
	require.Nil(t, list.ReplyMarkup, "one page, no buttons")

	// Enough masters for a second page.
	_, err = env.st.Pool().Exec(context.Background(), `
INSERT INTO users (id, first_name) SELECT g, 'M' || g FROM generate_series(1001, 1010) g;
INSERT INTO masters (user_id, city, district, skills) SELECT g, 'Zhytomyr', 'D', '{x}' FROM generate_series(1001, 1010) g`)
	require.NoError(t, err)
	list = env.ask(t, env.admin, "/masters")
	require.True(t, strings.HasPrefix(list.Text, "Masters — page 1 of 2, 13 in all\n"), list.Text)
	require.Equal(t, dispatch.RosterPageSize, strings.Count(list.Text, "\n📍 "))
	require.Equal(t, []string{"Next ▶"}, list.ReplyMarkup.Labels())

	press(t, env.srv, env.admin, list, data(t, "ms", 1))
	page2, _ := env.srv.MessageByID(env.admin.ID(), list.MessageID)
	require.True(t, strings.HasPrefix(page2.Text, "Masters — page 2 of 2, 13 in all\n"), page2.Text)
	require.Equal(t, 3, strings.Count(page2.Text, "\n📍 Zhytomyr, D"))
	require.Equal(t, []string{"◀ Previous"}, page2.ReplyMarkup.Labels())
	// A page past the end (a stale press) shows the last one.
	pressRaw(t, env.srv, env.admin, page2, data(t, "ms", 40))
	again, _ := env.srv.MessageByID(env.admin.ID(), list.MessageID)
	require.Equal(t, page2.Text, again.Text)
}

// A page of the longest masters there can be is still one message.
func TestOversizedMastersPageIsOneMessage(t *testing.T) {
	t.Parallel()
	env := setupDispatch(t)
	place := strings.Repeat("<&", dispatch.MaxPlace/2)
	skills := make([]string, dispatch.MaxSkills)
	for i := range skills {
		skills[i] = strings.Repeat("&", dispatch.MaxSkill-1) + string(rune('a'+i))
	}
	_, err := env.st.Pool().Exec(context.Background(), `
INSERT INTO users (id, first_name, username) SELECT g, repeat('<Ann>', 20), repeat('a', 32) FROM generate_series(1000000000001, 1000000000011) g`)
	require.NoError(t, err)
	_, err = env.st.Pool().Exec(context.Background(), `
INSERT INTO masters (user_id, city, district, skills, active, blocked_at)
SELECT g, $1, $1, $2, false, now() FROM generate_series(1000000000001, 1000000000011) g`, place, skills)
	require.NoError(t, err)
	env.rateMaster(t, 1000000000001, 5, 4, 4, 4, 4)
	before := len(env.messages(t, adminID))
	list := env.ask(t, env.admin, "/masters")
	require.Len(t, env.messages(t, adminID), before+1, "one message")
	require.Equal(t, dispatch.RosterPageSize, strings.Count(list.Text, "\n📍 "))
	require.Contains(t, list.Text, "⭐ 4.2 (5)")
	require.LessOrEqual(t, len([]rune(list.Text)), bot.MaxMessageLen)
}
