package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"switchboard/config"
	"switchboard/jobs/prune"
	"switchboard/storage"
)

// The retention and the prune job's settings as the application has them
// by default.
var pruneRetain, pruneDefaults = func() (storage.Retention, storage.PruneOptions) {
	cfg, err := config.Defaults()
	if err != nil {
		panic(err) // a malformed envDefault tag: config's own tests refuse it first
	}
	return prune.Settings(cfg)
}()

const (
	// pruneBacklog is how far before each horizon the seeded old rows go:
	// a backlog of two months past retention.
	pruneBacklog = 60 * 24 * time.Hour
	// The seeded groups, their authors and the users of the seeded runs.
	pruneFirstChat   = -1003000000001
	pruneChats       = 24
	pruneFirstAuthor = 900_000_001
	// The seeded runs' users: above the memory chat's (memoryFirstUser).
	pruneFirstUser = 700_000_001
	pruneRunUsers  = 500
)

type pruneConfig struct {
	commonFlags
	messages int // group messages past retention
	runs     int // closed runs past retention
	// keepMessages and keepRuns are the rows inside retention seeded next
	// to them, which must survive.
	keepMessages, keepRuns int
	baseline               time.Duration // the memory chat alone, before the prune
	maxPrune               time.Duration
	opts                   storage.PruneOptions
	memory                 memoryConfig
}

// pruneReport is the scenario's JSON line.
type pruneReport struct {
	Scenario      string  `json:"scenario"`
	OverheadP50MS float64 `json:"overhead_p50_ms"`
	OverheadP99MS float64 `json:"overhead_p99_ms"`
	OverheadRuns  int     `json:"overhead_runs"`
	BaselineP50MS float64 `json:"baseline_p50_ms"`
	BaselineP99MS float64 `json:"baseline_p99_ms"`
	Rate          float64 `json:"rate"`
	PruneS        float64 `json:"prune_s"`
	PruneBatches  int     `json:"prune_batches"`
	MaxBatchMS    float64 `json:"prune_max_batch_ms"`
	TimeoutMS     float64 `json:"prune_timeout_ms"`
	Timeouts      int     `json:"prune_timeouts"`
	Messages      int64   `json:"messages_pruned"`
	RunsCleared   int64   `json:"runs_cleared"`
	GMBefore      float64 `json:"group_messages_mb_before"`
	GMAfter       float64 `json:"group_messages_mb_after"`
	GMAfterFull   float64 `json:"group_messages_mb_after_full"`
	PRBefore      float64 `json:"pipeline_runs_mb_before"`
	PRAfter       float64 `json:"pipeline_runs_mb_after"`
	PRAfterFull   float64 `json:"pipeline_runs_mb_after_full"`
	tail
}

// batchLog records every prune batch (storage.PruneOptions.OnBatch).
type batchLog struct {
	mu      sync.Mutex
	took    map[string]durations
	errs    int
	cancels int // batches the statement timeout cancelled
}

func (l *batchLog) record(kind string, _ int64, took time.Duration, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.took[kind] = append(l.took[kind], took)
	var pe *pgconn.PgError
	switch {
	case errors.As(err, &pe) && pe.Code == "57014":
		l.cancels++
	case err != nil:
		l.errs++
	}
}

// pruneTables are the tables whose sizes the scenario follows.
var pruneTables = []string{"group_messages", "pipeline_runs"}

func benchPrune(ctx context.Context, cfg pruneConfig, out io.Writer, log *slog.Logger) (pruneReport, error) {
	return onBenchDB(ctx, cfg.db, log, func(db *benchDB) (rep pruneReport, err error) {
		pool := db.store.Pool()
		fmt.Fprintf(out, "prune: database %s (PostgreSQL %s); seeding %d group messages and %d closed runs past retention, "+
			"%d and %d inside it\n", db.name, db.pgVersion, cfg.messages, cfg.runs, cfg.keepMessages, cfg.keepRuns)

		seedAt := time.Now()
		t0 := time.Now()
		if err := seedPrune(ctx, db, cfg, seedAt); err != nil {
			return rep, err
		}
		// As autovacuum would have by then; the checkpoint writes the seed out,
		// so that it does not land in the measured window.
		for _, q := range []string{`VACUUM ANALYZE group_messages, pipeline_runs, users`, `CHECKPOINT`} {
			if _, err := pool.Exec(ctx, q); err != nil {
				return rep, fmt.Errorf("%s: %w", q, err)
			}
		}
		before, err := tableSizes(ctx, pool)
		if err != nil {
			return rep, err
		}
		// The memory chat beside the prune adds runs of its own; the sizes are
		// compared on the seeded runs alone (see below), so the check does not
		// depend on how many runs a loaded machine got through meanwhile.
		var seededMax, seededBytes int64
		if err := pool.QueryRow(ctx, `SELECT coalesce(max(id), 0), coalesce(sum(pg_column_size(r.*)), 0) FROM pipeline_runs r`).Scan(&seededMax, &seededBytes); err != nil {
			return rep, fmt.Errorf("seeded runs: %w", err)
		}
		fmt.Fprintf(out, "seeded in %.1fs (VACUUM ANALYZE and CHECKPOINT included); %s\n", time.Since(t0).Seconds(), before)

		rig, err := startMemoryRig(ctx, cfg.memory, db, out, log)
		if err != nil {
			return rep, err
		}
		defer rig.close()

		// One stream of memory-chat runs at the steady rate: a second's
		// warm-up, the baseline, then the prune; the stream ends with the
		// prune. Runs are attributed to a phase by their created_at.
		stopSubmit := make(chan struct{})
		type driven struct {
			ids     []int64
			elapsed time.Duration
			submit  durations
			err     error
		}
		drove := make(chan driven, 1)
		start := time.Now()
		go func() {
			var d driven
			d.ids, d.elapsed, d.submit, d.err = rig.drive(ctx, stopSubmit)
			drove <- d
		}()
		baseFrom := start.Add(time.Second)
		pruneFrom := baseFrom.Add(cfg.baseline)
		fmt.Fprintf(out, "memory chat at %.0f runs/s: 1s warm-up, %s alone (baseline), then beside the prune (batch %d, statement timeout %s, pause %s)\n",
			cfg.memory.rate, cfg.baseline, cfg.opts.Batch, cfg.opts.StatementTimeout, cfg.opts.Pause)
		select {
		case <-ctx.Done():
			close(stopSubmit)
			<-drove
			return rep, ctx.Err()
		case d := <-drove: // it failed before the prune began
			return rep, fmt.Errorf("memory chat ended early: %w", d.err)
		case <-time.After(time.Until(pruneFrom)):
		}

		log2 := &batchLog{took: map[string]durations{}}
		opts := cfg.opts
		opts.OnBatch = log2.record
		// The kinds the bench seeds and checks; the others are left alone.
		ret := storage.Retention{GroupMessages: pruneRetain.GroupMessages, RunContext: pruneRetain.RunContext,
			VacancyMatches: pruneRetain.VacancyMatches, SearchHits: pruneRetain.SearchHits, Outbox: pruneRetain.Outbox,
			RecoveryWindow: pruneRetain.RecoveryWindow, TasteExamples: pruneRetain.TasteExamples}
		pruneStart := time.Now()
		totals, rounds, perr := pruneAll(ctx, db.store, ret, opts, cfg.maxPrune)
		pruneEnd := time.Now()
		close(stopSubmit)
		d := <-drove
		if perr != nil {
			return rep, perr
		}
		if d.err != nil {
			return rep, d.err
		}
		pruneTook := pruneEnd.Sub(pruneStart)
		if pruneEnd.After(start.Add(time.Duration(float64(cfg.memory.runs) / cfg.memory.rate * float64(time.Second)))) {
			return rep, fmt.Errorf("the prune outlasted the memory chat's %d runs", cfg.memory.runs)
		}

		inWindow := func(from, to time.Time) func(int64, time.Time) bool {
			return func(_ int64, created time.Time) bool { return !created.Before(from) && created.Before(to) }
		}
		base, err := rig.result(ctx, d.ids, d.elapsed, d.submit, inWindow(baseFrom, pruneFrom))
		if err != nil {
			return rep, err
		}
		during, err := rig.result(ctx, d.ids, d.elapsed, d.submit, inWindow(pruneStart, pruneEnd))
		if err != nil {
			return rep, err
		}
		fmt.Fprintf(out, "memory chat alone (baseline, runs created in the %s before the prune):\n", cfg.baseline)
		base.print(out)
		fmt.Fprintf(out, "memory chat beside the prune (runs created in its %.1fs):\n", pruneTook.Seconds())
		during.print(out)
		if err := rig.verify(ctx, during, len(d.ids)); err != nil {
			return rep, err
		}

		// The prune itself.
		var all durations
		fmt.Fprintf(out, "prune: %.1fs in %d round(s) of Store.Prune\n", pruneTook.Seconds(), rounds)
		for _, k := range storage.PruneKinds() {
			t := totals[k]
			b := log2.took[k]
			slices.Sort(b)
			all = append(all, b...)
			if t.Batches == 0 && t.Rows == 0 {
				continue
			}
			fmt.Fprintf(out, "  %-16s rows %8d  batches %5d  %6.1fs  batch p50 %7.1fms  p99 %7.1fms  max %7.1fms  timeouts %d\n",
				k, t.Rows, len(b), t.Duration.Seconds(), ms(b.p(0.5)), ms(b.p(0.99)), ms(b.p(1)), t.Timeouts)
		}
		slices.Sort(all)
		timeouts := 0
		for _, t := range totals {
			timeouts += t.Timeouts
		}
		timeouts = max(timeouts, log2.cancels)
		fmt.Fprintf(out, "  every batch: %d, max %.1fms against the statement timeout of %s; %d cancelled by it\n",
			len(all), ms(all.p(1)), cfg.opts.StatementTimeout, timeouts)

		wrong, err := checkPruned(ctx, pool, cfg, pruneStart)
		if err != nil {
			return rep, err
		}
		if timeouts > 0 {
			wrong.addf("%d prune batches hit the statement timeout", timeouts)
		}
		if over := len(all) - sortedIndexAbove(all, cfg.opts.StatementTimeout); over > 0 {
			wrong.addf("%d prune batches took longer than the statement timeout (%s)", over, cfg.opts.StatementTimeout)
		}
		if log2.errs > 0 {
			wrong.addf("%d prune batches failed", log2.errs)
		}

		// The sizes: after VACUUM, which makes the space reusable, and after
		// VACUUM FULL, which gives it back to the file system. The memory chat
		// is closed first: none of its connections may hold a snapshot that
		// keeps the rows VACUUM is to remove.
		rig.close()
		after, err := vacuumed(ctx, pool, `VACUUM ANALYZE group_messages, pipeline_runs`)
		if err != nil {
			return rep, err
		}
		free, err := freeSpace(ctx, pool)
		if err != nil {
			return rep, err
		}
		fmt.Fprintf(out, "after VACUUM: %s; reusable inside them (pgstattuple free_space, heap and TOAST): %s\n", after, free)
		full, err := vacuumed(ctx, pool, `VACUUM FULL group_messages, pipeline_runs`)
		if err != nil {
			return rep, err
		}
		fmt.Fprintf(out, "after VACUUM FULL: %s\n", full)
		// group_messages has no writer beside the prune. pipeline_runs does:
		// its in-use space after VACUUM counts the soak's runs, and its file
		// is compared once they are gone, holding only the seeded runs again.
		if full["group_messages"] >= before["group_messages"] {
			wrong.addf("group_messages did not shrink: %.1f MB before, %.1f MB after VACUUM FULL",
				mb(before["group_messages"]), mb(full["group_messages"]))
		}
		if used := after["group_messages"] - free["group_messages"]; used >= before["group_messages"] {
			wrong.addf("group_messages: %.1f MB after VACUUM of which %.1f MB free, no less in use than the %.1f MB before",
				mb(after["group_messages"]), mb(free["group_messages"]), mb(before["group_messages"]))
		}
		if _, err := pool.Exec(ctx, `DELETE FROM pipeline_runs WHERE id > $1`, seededMax); err != nil {
			return rep, fmt.Errorf("drop the soak's runs: %w", err)
		}
		// The delete wakes autovacuum, whose ANALYZE of any table here holds
		// a snapshot that would keep the deleted runs through VACUUM FULL.
		seeded, err := vacuumed(ctx, pool, `VACUUM FULL pipeline_runs`)
		if err != nil {
			return rep, err
		}
		fmt.Fprintf(out, "pipeline_runs holding the seeded runs alone, after VACUUM FULL: %.1f MB\n", mb(seeded["pipeline_runs"]))
		// What the prune frees is the seeded runs' contexts: their rows'
		// bytes must fall. The file after VACUUM FULL is reported, not
		// judged: a transaction of any other database on the server (CI runs
		// other packages' tests beside this one) holds back the horizon, and
		// VACUUM FULL then keeps the deleted row versions.
		var prunedBytes int64
		if err := pool.QueryRow(ctx, `SELECT coalesce(sum(pg_column_size(r.*)), 0) FROM pipeline_runs r WHERE id <= $1`, seededMax).Scan(&prunedBytes); err != nil {
			return rep, fmt.Errorf("seeded runs: %w", err)
		}
		fmt.Fprintf(out, "the seeded runs' rows: %.2f MB before the prune, %.2f MB after\n", mb(seededBytes), mb(prunedBytes))
		if prunedBytes >= seededBytes {
			wrong.addf("pipeline_runs did not shrink: the seeded runs' rows hold %.2f MB after the prune, %.2f MB before",
				mb(prunedBytes), mb(seededBytes))
		}
		if err := wrong.err(); err != nil {
			return rep, err
		}

		rep.notePeakRSS(out)
		rep.Scenario = "prune"
		rep.OverheadP50MS = round(ms(during.overhead.p(0.5)), 2)
		rep.OverheadP99MS = round(ms(during.overhead.p(0.99)), 2)
		rep.OverheadRuns = during.counted
		rep.BaselineP50MS = round(ms(base.overhead.p(0.5)), 2)
		rep.BaselineP99MS = round(ms(base.overhead.p(0.99)), 2)
		rep.Rate = cfg.memory.rate
		rep.PruneS = round(pruneTook.Seconds(), 2)
		rep.PruneBatches = len(all)
		rep.MaxBatchMS = round(ms(all.p(1)), 1)
		rep.TimeoutMS = ms(cfg.opts.StatementTimeout)
		rep.Timeouts = timeouts
		rep.Messages = totals[storage.PruneGroupMessages].Rows
		rep.RunsCleared = totals[storage.PruneRunContext].Rows
		rep.GMBefore, rep.GMAfter, rep.GMAfterFull = round(mb(before["group_messages"]), 1), round(mb(after["group_messages"]), 1),
			round(mb(full["group_messages"]), 1)
		rep.PRBefore, rep.PRAfter, rep.PRAfterFull = round(mb(before["pipeline_runs"]), 1), round(mb(after["pipeline_runs"]), 1),
			round(mb(seeded["pipeline_runs"]), 1) // the seeded runs alone, as before the soak
		return rep, nil
	})
}

// pruneAll runs Store.Prune, as the job does on its tick, until a round
// finds nothing left (one that deletes rows in every batch it may take is
// followed by another), and sums the results per kind. A kind's timeout
// ends its turn of the round, as in the job; the next round goes on.
func pruneAll(ctx context.Context, store *storage.Store, ret storage.Retention, opts storage.PruneOptions,
	limit time.Duration) (map[string]storage.PruneResult, int, error) {
	totals := map[string]storage.PruneResult{}
	deadline := time.Now().Add(limit)
	for round := 1; ; round++ {
		var rows int64
		for _, r := range store.Jobs().Prune(ctx, time.Now(), ret, opts) {
			if r.Err != nil {
				return totals, round, r.Err
			}
			t := totals[r.Kind]
			t.Kind = r.Kind
			t.Rows += r.Rows
			t.Batches += r.Batches
			t.Timeouts += r.Timeouts
			t.Duration += r.Duration
			totals[r.Kind] = t
			rows += r.Rows
		}
		if err := ctx.Err(); err != nil {
			return totals, round, err
		}
		if rows == 0 {
			return totals, round, nil
		}
		if time.Now().After(deadline) {
			return totals, round, fmt.Errorf("prune: rows still left after %s (%d rounds)", limit, round)
		}
	}
}

// sortedIndexAbove is the index of the first duration in d (sorted) above x.
func sortedIndexAbove(d durations, x time.Duration) int {
	i, _ := slices.BinarySearch(d, x+1)
	return i
}

// checkPruned describes what the prune left that it should have taken, or
// took that it should have left: every seeded row past retention gone (its
// context cleared), every one inside it kept whole, the memory chat's runs
// untouched.
func checkPruned(ctx context.Context, pool interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, cfg pruneConfig, pruneAt time.Time) (findings, error) {
	var wrong findings
	var oldMsgs, keptMsgs int
	if err := pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE date < $1), count(*) FILTER (WHERE date >= $1)
FROM group_messages`, pruneAt.Add(-pruneRetain.GroupMessages)).Scan(&oldMsgs, &keptMsgs); err != nil {
		return nil, fmt.Errorf("check messages: %w", err)
	}
	if oldMsgs != 0 {
		wrong.addf("%d group messages past retention left", oldMsgs)
	}
	if keptMsgs != cfg.keepMessages {
		wrong.addf("%d group messages inside retention, want the %d seeded", keptMsgs, cfg.keepMessages)
	}
	var oldLeft, oldCleared, keptWhole, keptTouched, chatTouched int
	if err := pool.QueryRow(ctx, `SELECT
  count(*) FILTER (WHERE user_id >= $2 AND closed_at < $1 AND (draft_context IS NOT NULL OR final_context_payload IS NOT NULL OR context_pruned_at IS NULL)),
  count(*) FILTER (WHERE user_id >= $2 AND closed_at < $1 AND draft_context IS NULL AND final_context_payload IS NULL AND context_pruned_at IS NOT NULL),
  count(*) FILTER (WHERE user_id >= $2 AND closed_at >= $1 AND draft_context IS NOT NULL AND final_context_payload IS NOT NULL AND context_pruned_at IS NULL),
  count(*) FILTER (WHERE user_id >= $2 AND closed_at >= $1 AND (draft_context IS NULL OR final_context_payload IS NULL OR context_pruned_at IS NOT NULL)),
  count(*) FILTER (WHERE user_id < $2 AND (draft_context IS NULL OR context_pruned_at IS NOT NULL))
FROM pipeline_runs`, pruneAt.Add(-pruneRetain.RunContext), pruneFirstUser).Scan(
		&oldLeft, &oldCleared, &keptWhole, &keptTouched, &chatTouched); err != nil {
		return nil, fmt.Errorf("check runs: %w", err)
	}
	if oldLeft != 0 || oldCleared != cfg.runs {
		wrong.addf("%d runs past retention cleared and %d not, want %d and 0", oldCleared, oldLeft, cfg.runs)
	}
	if keptWhole != cfg.keepRuns || keptTouched != 0 {
		wrong.addf("%d runs inside retention kept whole and %d cleared, want %d and 0", keptWhole, keptTouched, cfg.keepRuns)
	}
	if chatTouched != 0 {
		wrong.addf("%d of the memory chat's runs lost their context", chatTouched)
	}
	return wrong, nil
}

// sizes are tables' pg_total_relation_size in bytes.
type sizes map[string]int64

func (s sizes) String() string {
	parts := make([]string, 0, len(pruneTables))
	for _, t := range pruneTables {
		parts = append(parts, fmt.Sprintf("%s %.1f MB", t, mb(s[t])))
	}
	return strings.Join(parts, ", ")
}

func mb(b int64) float64 { return float64(b) / (1 << 20) }

// waitNoSnapshots waits until no other session of this database holds a
// snapshot (an autovacuum ANALYZE does, for as long as it reads): VACUUM
// keeps every row version such a snapshot may see, so the sizes after it
// would say less about the prune than about who was reading.
func waitNoSnapshots(ctx context.Context, pool interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) error {
	deadline := time.Now().Add(time.Minute)
	for {
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_xmin IS NOT NULL`).Scan(&n); err != nil {
			return fmt.Errorf("sessions holding snapshots: %w", err)
		}
		if n == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d sessions of the bench database still hold snapshots after a minute", n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// vacuumed runs stmt, a VACUUM, once no snapshot keeps what it is to
// remove (waitNoSnapshots), and reads the table sizes after it.
func vacuumed(ctx context.Context, pool interface {
	queryer
	QueryRow(context.Context, string, ...any) pgx.Row
}, stmt string) (sizes, error) {
	if err := waitNoSnapshots(ctx, pool); err != nil {
		return nil, err
	}
	if _, err := pool.Exec(ctx, stmt); err != nil {
		return nil, fmt.Errorf("%s: %w", stmt, err)
	}
	return tableSizes(ctx, pool)
}

type queryer interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
	Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
}

func tableSizes(ctx context.Context, pool queryer) (sizes, error) {
	return perTable(ctx, pool, "table sizes", `SELECT t, pg_total_relation_size(t::regclass) FROM unnest($1::text[]) t`)
}

// freeSpace is the free space pgstattuple finds in each table's heap and
// TOAST table: what VACUUM made reusable.
func freeSpace(ctx context.Context, pool queryer) (sizes, error) {
	if _, err := pool.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS pgstattuple`); err != nil {
		return nil, fmt.Errorf("pgstattuple: %w", err)
	}
	return perTable(ctx, pool, "free space", `SELECT t, (SELECT free_space FROM pgstattuple(c.oid))
     + COALESCE((SELECT free_space FROM pgstattuple(c.reltoastrelid) WHERE c.reltoastrelid <> 0), 0)
FROM unnest($1::text[]) t JOIN pg_class c ON c.oid = t::regclass`)
}

// perTable runs q, which reads (table, bytes) for the tables in $1.
func perTable(ctx context.Context, pool queryer, what, q string) (sizes, error) {
	rows, err := pool.Query(ctx, q, pruneTables)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	out := sizes{}
	var t string
	var n int64
	if _, err := pgx.ForEachRow(rows, []any{&t, &n}, func() error { out[t] = n; return nil }); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}

// seedPrune bulk-inserts (COPY) the group messages and the closed runs,
// oldest first as they would have arrived: past retention, then inside it.
// The runs' insert trigger (pg_notify) is off for the seed: nothing
// listens yet, and 200 000 notifications in one transaction are only
// work for the server.
func seedPrune(ctx context.Context, db *benchDB, cfg pruneConfig, now time.Time) error {
	conn, err := connect(ctx, db.url)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	rng := rand.New(rand.NewPCG(18, 0x9e3779b9))

	// Groups and their members.
	groups := make([][]any, pruneChats)
	teams := make([][]member, pruneChats)
	for c := range pruneChats {
		groups[c] = []any{int64(pruneFirstChat - c), fmt.Sprintf("Team %02d", c+1), true}
		teams[c] = make([]member, 5+rng.IntN(12))
		for i := range teams[c] {
			name := firstNames[rng.IntN(len(firstNames))]
			teams[c][i] = member{id: int64(pruneFirstAuthor + 100*c + i), name: name,
				username: strings.ToLower(name) + userSuffixes[rng.IntN(len(userSuffixes))]}
		}
	}
	if _, err := conn.CopyFrom(ctx, pgx.Identifier{"group_chats"}, []string{"id", "title", "can_read"}, pgx.CopyFromRows(groups)); err != nil {
		return fmt.Errorf("seed groups: %w", err)
	}
	// Messages: the old ones spread over the backlog before the horizon,
	// the kept ones over the retention; round robin over the groups, each
	// group's ids counting up.
	msgHorizon := now.Add(-pruneRetain.GroupMessages)
	total := cfg.messages + cfg.keepMessages
	nextID := make([]int64, pruneChats)
	i := 0
	n, err := conn.CopyFrom(ctx, pgx.Identifier{"group_messages"}, []string{"chat_id", "message_id", "author_id", "author", "text", "date"},
		pgx.CopyFromFunc(func() ([]any, error) {
			if i == total {
				return nil, nil
			}
			at := seedTime(msgHorizon, pruneRetain.GroupMessages, i, cfg.messages, cfg.keepMessages)
			c := i % pruneChats
			team := teams[c]
			author := team[rng.IntN(len(team))]
			nextID[c]++
			i++
			return []any{int64(pruneFirstChat - c), nextID[c], author.id, author.name, messageText(rng, team, author), at}, nil
		}))
	if err != nil {
		return fmt.Errorf("seed messages: %w", err)
	}
	if n != int64(total) {
		return fmt.Errorf("seed messages: %d copied, want %d", n, total)
	}

	// The runs' users, then the runs: closed (archived) past RETAIN_RUN_CONTEXT
	// over the backlog, then inside it, with drafts and contexts as the
	// assembler writes them.
	users := make([][]any, pruneRunUsers)
	for u := range users {
		users[u] = []any{int64(pruneFirstUser + u), fmt.Sprintf("Seeded %d", u), "en"}
	}
	if _, err := conn.CopyFrom(ctx, pgx.Identifier{"users"}, []string{"id", "first_name", "telegram_language"}, pgx.CopyFromRows(users)); err != nil {
		return fmt.Errorf("seed users: %w", err)
	}
	if _, err := conn.Exec(ctx, `SET session_replication_role = replica`); err != nil {
		return fmt.Errorf("seed runs: %w", err)
	}
	runHorizon := now.Add(-pruneRetain.RunContext)
	total = cfg.runs + cfg.keepRuns
	msgIDs := make([]int64, pruneRunUsers)
	team := teams[0]
	i = 0
	n, err = conn.CopyFrom(ctx, pgx.Identifier{"pipeline_runs"}, []string{"user_id", "chat_id", "message_id", "user_query", "status",
		"analysis_result", "draft_context", "final_context_payload", "final_answer", "delivered_at", "archived_at", "closed_at",
		"created_at", "updated_at"},
		pgx.CopyFromFunc(func() ([]any, error) {
			if i == total {
				return nil, nil
			}
			closed := seedTime(runHorizon, pruneRetain.RunContext, i, cfg.runs, cfg.keepRuns)
			u := i % pruneRunUsers
			msgIDs[u]++
			i++
			query := messageText(rng, team, team[0])
			created := closed.Add(-time.Duration(2+rng.IntN(20)) * time.Second)
			draft, final := runContexts(rng, team, query)
			return []any{int64(pruneFirstUser + u), int64(pruneFirstUser + u), msgIDs[u], query, "COMPLETED",
				memoryAnalysis, draft, final, memoryAnswer + " " + pickText(rng, explanations), closed, closed, closed, created, closed}, nil
		}))
	if err != nil {
		return fmt.Errorf("seed runs: %w", err)
	}
	if n != int64(total) {
		return fmt.Errorf("seed runs: %d copied, want %d", n, total)
	}
	_, err = conn.Exec(ctx, `RESET session_replication_role`)
	return err
}

func pickText(rng *rand.Rand, list []string) string { return list[rng.IntN(len(list))] }

// pruneMentor stands for the mentor's system prompt, which the draft
// carries (domain/memory buildDraft).
const pruneMentor = "You are a patient, practical mentor. You remember what the user told you before and build on it. " +
	"Answer in the user's language, briefly, with concrete steps; ask one question when the request is ambiguous. " +
	"Prefer examples from the user's own projects; say so when you are not sure, and never invent facts about the user."

// runContexts writes a run's draft (the mentor's role, the message, recent
// messages and summaries of earlier conversations: about 3–6 KB) and its
// assembled context (the notes and the summaries kept: about 1–2 KB), in
// the shape domain/memory's assembler gives them.
func runContexts(rng *rand.Rand, team []member, query string) (draft, final string) {
	summary := func() string {
		var sb strings.Builder
		sb.WriteString("- [" + time.Date(2026, time.Month(1+rng.IntN(12)), 1+rng.IntN(28), 0, 0, 0, 0, time.UTC).Format("2006-01-02") + "] ")
		for range 2 + rng.IntN(3) {
			sb.WriteString(pickText(rng, explanations) + " ")
		}
		sb.WriteString("(tags: " + pickText(rng, things) + ", " + pickText(rng, events) + ")\n")
		return sb.String()
	}
	sums := make([]string, 3+rng.IntN(5))
	for i := range sums {
		sums[i] = summary()
	}
	var d strings.Builder
	d.WriteString("## The mentor's role\n" + pruneMentor + "\n\n## The user's new message\n" + query + "\n")
	d.WriteString("\n## Recent messages (newest first)\n")
	for k := range 8 + rng.IntN(14) {
		who := "User: "
		if k%2 == 1 {
			who = "Mentor: "
		}
		d.WriteString(who + messageText(rng, team, team[0]) + "\n")
	}
	d.WriteString("\n## Summaries of earlier conversations (newest first)\n")
	for _, s := range sums {
		d.WriteString(s)
	}
	var f strings.Builder
	f.WriteString("## Context notes\n")
	for range 2 + rng.IntN(4) {
		f.WriteString(pickText(rng, explanations) + " ")
	}
	f.WriteString("\n\n## Remembered from earlier conversations\n")
	for _, s := range sums[:min(len(sums), 2+rng.IntN(4))] {
		f.WriteString(s)
	}
	return d.String(), f.String()
}

// seedTime dates the i-th of old+keep seeded rows: the first old spread
// over the backlog before horizon (its last hour left empty), the rest over
// the retention after it (an hour clear of either end), so every row is
// unambiguously on its side of the boundary.
func seedTime(horizon time.Time, retain time.Duration, i, old, keep int) time.Time {
	if i < old {
		return horizon.Add(-pruneBacklog).Add(time.Duration(float64(pruneBacklog-time.Hour) * float64(i) / float64(old)))
	}
	return horizon.Add(time.Hour).Add(time.Duration(float64(retain-2*time.Hour) * float64(i-old) / float64(keep)))
}
