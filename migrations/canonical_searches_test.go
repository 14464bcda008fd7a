package migrations_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"switchboard/domain/vacancy"
)

// Searches saved before /search learned a rule, as a database of that
// time holds them, after the upgrade: the one HH refused for its RUB is
// asked again, as if new; one refused for something else keeps its
// refusal; one equal to another of the user's goes; one whose form merely
// changed carries its discovery over. A second run changes nothing.
func TestCanonicalSearchesRewritesOldForms(t *testing.T) {
	t.Parallel()
	ctx, db, p := before(t, 55)

	exec := func(q string, args ...any) {
		t.Helper()
		_, err := db.ExecContext(ctx, q, args...)
		require.NoError(t, err, q)
	}
	old := func(typed string, extra map[string]string) (string, string) {
		t.Helper()
		ps, err := vacancy.ParseParams(typed)
		require.NoError(t, err, typed)
		if ps.Filters == nil {
			ps.Filters = map[string][]string{}
		}
		for k, v := range extra {
			ps.Filters[k] = []string{v}
		}
		b, err := ps.MarshalJSON()
		require.NoError(t, err)
		return string(b), ps.Key()
	}
	key := func(typed string) string {
		t.Helper()
		ps, err := vacancy.ParseParams(typed)
		require.NoError(t, err, typed)
		return ps.Key()
	}
	exec(`INSERT INTO users (id, first_name) VALUES (1, 'Ann'), (2, 'Bob'), (3, 'Carol')`)

	// Ann's RUB search, refused by HH for its currency and told.
	rub, rubKey := old("go developer area=1", map[string]string{"currency": "RUB"})
	exec(`INSERT INTO searches (id, user_id, params, search_key, state, refused_args, refused_at, first_news)
VALUES (10, 1, $1, $2, 'refused', '{currency}', now(), 'told')`, rub, rubKey)
	// Ann's BYN search refused for its period as well.
	byn, bynKey := old("rust", map[string]string{"currency": "BYN", "period": "31"})
	exec(`INSERT INTO searches (id, user_id, params, search_key, state, refused_args, refused_at, first_news)
VALUES (11, 1, $1, $2, 'refused', '{period,currency}', now(), 'told')`, byn, bynKey)
	_, byrKey := old("rust currency=BYR", map[string]string{"period": "31"})
	// Bob's search with HH's default spelled out, next to the same one
	// without it.
	rur, rurKey := old("go developer area=1", map[string]string{"currency": "RUR"})
	exec(`INSERT INTO searches (id, user_id, params, search_key) VALUES (20, 2, $1, $2), (21, 2, $3, $4)`,
		rur, rurKey, `{"text":"go developer","area":"1"}`, key("go developer area=1"))
	// Carol's lower-case code, discovered for a while.
	usd, usdKey := old("java", map[string]string{"currency": "usd"})
	exec(`INSERT INTO searches (id, user_id, params, search_key, first_news) VALUES (30, 3, $1, $2, 'told')`, usd, usdKey)
	exec(`INSERT INTO discovery_state (search_key, last_seen_max_id, last_complete_sweep_before_id) VALUES ($1, 900, 800)`, usdKey)
	// A row that does not read as a search is left alone.
	exec(`INSERT INTO searches (id, user_id, params, search_key) VALUES (31, 3, '{"text": 5}', $1)`, key("something"))

	_, err := p.Up(ctx)
	require.NoError(t, err)

	// One line a search, by id: its user, key, state, first news and
	// refused arguments.
	read := func() string {
		var out string
		require.NoError(t, db.QueryRowContext(ctx, `SELECT string_agg(concat_ws(' ', id, user_id, search_key, state, first_news,
    COALESCE(refused_args::text, '-')), E'\n' ORDER BY id) FROM searches`).Scan(&out))
		return out
	}
	after := read()
	require.Equal(t, strings.Join([]string{
		"10 1 " + key("go developer area=1") + " active pending -",
		"11 1 " + byrKey + " refused told {period,currency}",
		"21 2 " + key("go developer area=1") + " active pending -",
		"30 3 " + key("java currency=USD") + " active told -",
		"31 3 " + key("something") + " active pending -",
	}, "\n"), after)
	var params string
	require.NoError(t, db.QueryRowContext(ctx, `SELECT params::text FROM searches WHERE id = 30`).Scan(&params))
	require.JSONEq(t, `{"text":"java","currency":"USD"}`, params)
	var seen, swept int64
	require.NoError(t, db.QueryRowContext(ctx, `SELECT last_seen_max_id, last_complete_sweep_before_id FROM discovery_state WHERE search_key = $1`,
		key("java currency=USD")).Scan(&seen, &swept))
	require.Equal(t, []int64{900, 800}, []int64{seen, swept}, "discovered on from where the old key was")

	// Down and up again: the rows are in today's form already.
	_, err = p.Down(ctx)
	require.NoError(t, err)
	_, err = p.Up(ctx)
	require.NoError(t, err)
	require.Equal(t, after, read())
}
