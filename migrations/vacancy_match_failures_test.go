package migrations_test

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// Matches as a database of the build before holds them, after migration
// 00060: a SKIPPED match's last turn is told a failure or a wait by its
// skip reason, every other turn being unknown counts as nothing, and
// attempts keeps its claims.
func TestVacancyMatchFailuresFromSkipReasons(t *testing.T) {
	t.Parallel()
	ctx, db, p := before(t, 59)
	_, err := db.ExecContext(ctx, `
INSERT INTO users (id, first_name) VALUES (1, 'Ann');
INSERT INTO vacancies (id, title, published_at) SELECT g, 'go', now() FROM generate_series(1, 7) g;
INSERT INTO vacancy_matches (user_id, vacancy_id, status, published_at, skip_reason, attempts, is_relevant, message_id, sent_at) VALUES
    (1, 1, 'SKIPPED', now(), 'llm_error', 3, NULL, NULL, NULL),
    (1, 2, 'SKIPPED', now(), 'hh_unavailable', 1, NULL, NULL, NULL),
    (1, 3, 'SKIPPED', now(), 'breaker_open', 2, NULL, NULL, NULL),
    (1, 4, 'SKIPPED', now(), 'shutdown', 1, NULL, NULL, NULL),
    (1, 5, 'SKIPPED', now(), 'no_card', 1, NULL, NULL, NULL),
    (1, 6, 'QUEUED', now(), '', 4, NULL, NULL, NULL),
    (1, 7, 'SENT_TO_USER', now(), '', 2, true, 70, now())`)
	require.NoError(t, err)
	_, err = p.UpTo(ctx, 60)
	require.NoError(t, err)

	type row struct {
		Attempts, Failures, Waits int
		FailureReason, WaitReason string
	}
	got := map[int64]row{}
	rows, err := db.QueryContext(ctx, `SELECT vacancy_id, attempts, failures, waits, failure_reason, wait_reason FROM vacancy_matches`)
	require.NoError(t, err)
	defer rows.Close()
	for rows.Next() {
		var id int64
		var r row
		require.NoError(t, rows.Scan(&id, &r.Attempts, &r.Failures, &r.Waits, &r.FailureReason, &r.WaitReason))
		got[id] = r
	}
	require.NoError(t, rows.Err())
	require.Equal(t, map[int64]row{
		1: {Attempts: 3, Failures: 1, FailureReason: "llm_error"},
		2: {Attempts: 1, Failures: 1, FailureReason: "hh_unavailable"},
		3: {Attempts: 2, Waits: 1, WaitReason: "breaker_open"},
		4: {Attempts: 1, Waits: 1, WaitReason: "shutdown"},
		5: {Attempts: 1},
		6: {Attempts: 4},
		7: {Attempts: 2},
	}, got)

	_, err = p.DownTo(ctx, 59)
	require.NoError(t, err, "the migration goes back down")
}
