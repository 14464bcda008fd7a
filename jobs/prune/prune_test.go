package prune

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"switchboard/config"
	"switchboard/jobs"
	"switchboard/storage/storagetest"
)

// Two replicas, each with its own scheduler and prune job as app.go wires
// them, sharing the database and a Redis locker: the prune job runs once
// per tick, and it prunes.
func TestPruneJobRunsOncePerTickAcrossReplicas(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := storagetest.New(t)
	_, err := st.Pool().Exec(ctx, `CREATE TABLE ticks (slot bigint PRIMARY KEY, replica text NOT NULL);
INSERT INTO group_messages (chat_id, message_id, text, date) VALUES (1, 1, 'old', now() - interval '31 days'), (1, 2, 'new', now())`)
	require.NoError(t, err)

	addr := "127.0.0.1:6379"
	if a := os.Getenv("TEST_REDIS_ADDR"); a != "" {
		addr = a
	}
	rc := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = rc.Close() })
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	prefix := "sbtest:" + hex.EncodeToString(b) + ":"
	t.Cleanup(func() {
		if keys, err := rc.Keys(ctx, prefix+"*").Result(); err == nil && len(keys) > 0 {
			rc.Del(ctx, keys...)
		}
	})
	log := slog.New(slog.DiscardHandler)
	locker := jobs.NewRedisLocker(rc, jobs.RedisLockerOptions{Prefix: prefix, Log: log})
	cfg, err := config.Load(func(k string) (string, bool) {
		return map[string]string{"TELEGRAM_TOKEN": "1:x"}[k], k == "TELEGRAM_TOKEN"
	}, "dev")
	require.NoError(t, err)

	var pruners []*Job
	for _, name := range []string{"a", "b"} {
		reg := prometheus.NewRegistry()
		p, err := New(cfg, st.Jobs(), log, reg)
		require.NoError(t, err)
		pruners = append(pruners, p)
		s, err := jobs.New(jobs.Config{Replica: name, Locker: locker}, jobs.Deps{Log: log, Registerer: reg})
		require.NoError(t, err)
		require.NoError(t, s.Every("prune", time.Second, func(ctx context.Context) error {
			tick, _ := jobs.TickFrom(ctx)
			// A second run of a slot fails on the primary key.
			if _, err := st.Pool().Exec(ctx, `INSERT INTO ticks (slot, replica) VALUES ($1, $2)`, tick.Slot, name); err != nil {
				t.Errorf("slot %d run again on %s: %v", tick.Slot, name, err)
			}
			return p.Run(ctx)
		}))
		s.Start()
		t.Cleanup(func() {
			sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = s.Shutdown(sctx)
		})
	}
	deadline := time.Now().Add(15 * time.Second)
	var ticks int
	for ticks < 4 {
		require.True(t, time.Now().Before(deadline), "four ticks within 15s")
		time.Sleep(50 * time.Millisecond)
		require.NoError(t, st.Pool().QueryRow(ctx, `SELECT count(*) FROM ticks`).Scan(&ticks))
	}

	rows, err := st.Pool().Query(ctx, `SELECT message_id FROM group_messages ORDER BY message_id`)
	require.NoError(t, err)
	left, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	require.NoError(t, err)
	require.Equal(t, []int64{2}, left, "the old message pruned, the new one kept")
	deleted := 0.0
	for _, p := range pruners {
		deleted += testutil.ToFloat64(p.rows.WithLabelValues("group_messages"))
	}
	require.EqualValues(t, 1, deleted, "counted once, by whichever replica ran it")
	runs, err := st.Jobs().PruneRuns(ctx)
	require.NoError(t, err)
	require.NotEmpty(t, runs)
	require.Equal(t, "group_messages", runs[0].Kind)
	require.EqualValues(t, 1, runs[0].Total)
}
