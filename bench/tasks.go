package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"switchboard/bot"
	"switchboard/domain/analysis"
	"switchboard/domain/tasks"
	"switchboard/e2e/ghfake"
	"switchboard/internal/testkit"
	"switchboard/locales"
	"switchboard/storage"
	"switchboard/tracker/github"
)

type tasksConfig struct {
	commonFlags
	n        int
	scale    float64
	interval time.Duration
	timeout  time.Duration
}

// tasksReport is the scenario's JSON line.
type tasksReport struct {
	Scenario string `json:"scenario"`
	Pushes   int    `json:"pushes"`
	// PerS is pushes / (last creation − the job's start); LimitPerS is
	// GitHub's hourly content limit in the run's time; IdealPerS is what
	// the fastest schedule the fake's windows allow gives, and Efficiency
	// its time over the measured one.
	PerS       float64 `json:"per_s"`
	LimitPerS  float64 `json:"limit_per_s"`
	IdealPerS  float64 `json:"ideal_per_s"`
	Efficiency float64 `json:"efficiency"`
	TotalS     float64 `json:"total_s"`
	IdealS     float64 `json:"ideal_s"`
	// Approval → the issue's creation on the fake, seconds; the ideal is
	// the same approvals under the fastest schedule.
	LatencyP50S      float64 `json:"latency_p50_s"`
	LatencyP99S      float64 `json:"latency_p99_s"`
	IdealLatencyP99S float64 `json:"ideal_latency_p99_s"`
	Refused          int     `json:"refused"`
	Early            int     `json:"early"`
	Labels           int     `json:"labels"`
	Scale            float64 `json:"scale"`
	tail
}

// The fake GitHub's repository and token, and the team whose tasks go there.
const (
	tasksRepo      = "acme/app"
	tasksToken     = "github_pat_bench"
	tasksLogin     = "switchboard-bot"
	tasksTeam      = int64(-1001234567890)
	tasksAdminChat = int64(-1009999999999)
	tasksApprover  = int64(7)
)

// tasksPriorities are the proposals' priorities, round robin: each is a
// label the first push of it makes, which GitHub's content limits count.
var tasksPriorities = []string{"high", "medium", "low"}

// tasksLabels is how many labels n pushes make.
func tasksLabels(n int) int { return min(n, len(tasksPriorities)) }

// scaledContent are GitHub's content limits at the time scale.
func scaledContent(scale float64) []tasks.Window {
	ws := tasks.GitHubContent()
	for i := range ws {
		ws[i].Per = time.Duration(float64(ws[i].Per) / scale)
	}
	return ws
}

// benchTasks approves cfg.n proposals whose group's destination is a
// repository of a fake GitHub enforcing GitHub's content limits at the
// time scale, runs the push job as the scheduler would until every one is
// filed, and measures the pace against the fastest the limits allow.
func benchTasks(ctx context.Context, cfg tasksConfig, out io.Writer, log *slog.Logger) (tasksReport, error) {
	return onBenchDB(ctx, cfg.db, log, func(db *benchDB) (rep tasksReport, err error) {
		windows := scaledContent(cfg.scale)
		gh := ghfake.Start(ghfake.WithTimeScale(cfg.scale))
		defer gh.Close()
		gh.AddRepo(tasksRepo)
		gh.AddToken(tasksToken, tasksLogin, ghfake.Write(tasksRepo))

		setup := time.Now()
		approvedAt, err := approveTasks(ctx, db.store, cfg.n)
		if err != nil {
			return rep, err
		}
		lim := ghfake.DefaultLimits()
		fmt.Fprintf(out, "tasks: database %s (PostgreSQL %s); %d proposals approved in %.2fs (priorities %s, round robin); "+
			"fake GitHub: %d new issues and labels a minute, %d an hour, time scale %g (the minute %s, the hour %s)\n",
			db.name, db.pgVersion, cfg.n, time.Since(setup).Seconds(), strings.Join(tasksPriorities, ", "),
			lim.ContentPerMinute, lim.ContentPerHour, cfg.scale, windows[0].Per, windows[1].Per)

		client, err := github.New(github.Config{URL: gh.URL(), Token: tasksToken, UserAgent: "switchboard-bench"})
		if err != nil {
			return rep, err
		}
		render := bot.NewRenderer(bot.RenderConfig{AdminChatID: tasksAdminChat, AdminLang: "en"}, locales.MustLoad(), log)
		svc := tasks.NewService(tasks.Config{Claimer: "bench", Content: windows}, db.store.Tasks(),
			map[string]tasks.Tracker{tasks.KindGitHub: client}, storage.TaskNotices{Notices: db.store.Notices()}, render, log)
		fmt.Fprintf(out, "tasks: one tasks.Service paced to %d a %s and %d a %s, its push job run every %s on the interval's multiples\n",
			windows[0].Limit, windows[0].Per, windows[1].Limit, windows[1].Per, cfg.interval)

		start := time.Now()
		runs, err := runPushJob(ctx, svc, db, cfg)
		if err != nil {
			return rep, fmt.Errorf("%w (the fake holds %d issues)", err, len(gh.Issues(tasksRepo)))
		}
		res, err := measureTasks(gh.Requests(), start)
		if err != nil {
			return rep, err
		}
		if err := verifyTasks(ctx, db, gh, approvedAt, res); err != nil {
			return rep, err
		}

		m := len(res.creations)
		sched := idealSchedule(m, windows)
		ideal := sched[m-1]
		total := res.creations[m-1].Sub(start)
		var lat, idealLat durations
		for i, at := range res.creations {
			if id, ok := res.issueOf[i]; ok {
				lat = append(lat, at.Sub(approvedAt[id]))
				idealLat = append(idealLat, start.Add(sched[i]).Sub(approvedAt[id]))
			}
		}
		slices.Sort(lat)
		slices.Sort(idealLat)

		rep.Scenario = "tasks"
		rep.Pushes = cfg.n
		rep.TotalS = round(total.Seconds(), 3)
		rep.IdealS = round(ideal.Seconds(), 3)
		rep.PerS = round(float64(cfg.n)/total.Seconds(), 3)
		rep.LimitPerS = round(float64(windows[1].Limit)/windows[1].Per.Seconds(), 3)
		if ideal > 0 {
			rep.IdealPerS = round(float64(cfg.n)/ideal.Seconds(), 3)
			rep.Efficiency = round(ideal.Seconds()/total.Seconds(), 4)
		}
		rep.LatencyP50S = round(lat.p(0.5).Seconds(), 3)
		rep.LatencyP99S = round(lat.p(0.99).Seconds(), 3)
		rep.IdealLatencyP99S = round(idealLat.p(0.99).Seconds(), 3)
		rep.Refused, rep.Early = res.refused, res.early
		rep.Labels = res.labels
		rep.Scale = cfg.scale

		fmt.Fprintf(out, "tasks: job start → last creation %.3fs (first creation after %.3fs), %d runs of the job; "+
			"%d creations (%d issues, %d labels)\n", total.Seconds(), res.creations[0].Sub(start).Seconds(), runs, m, cfg.n, res.labels)
		if ideal > 0 {
			fmt.Fprintf(out, "tasks: the fastest schedule the windows allow for %d creations (requests taking no time) ends at %.3fs: "+
				"efficiency %.4f; %.3f pushes/s against the hour's limit of %.3f/s (ideal %.3f/s)\n",
				m, ideal.Seconds(), rep.Efficiency, rep.PerS, rep.LimitPerS, rep.IdealPerS)
		} else {
			fmt.Fprintf(out, "tasks: %d creations fit the limits at once: no limit binds, no ideal to reach (efficiency 0)\n", m)
		}
		for _, w := range windows {
			fmt.Fprintf(out, "tasks: most creations within any %s: %d (limit %d)\n", w.Per, testkit.MostWithin(res.creations, w.Per), w.Limit)
		}
		fmt.Fprintf(out, "tasks: approval → issue created: p50 %.3fs, p90 %.3fs, p99 %.3fs, max %.3fs (the fastest schedule: p50 %.3fs, p99 %.3fs); "+
			"at GitHub's own pace (× %g) p50 %.1f min, p99 %.1f min\n",
			lat.p(0.5).Seconds(), lat.p(0.9).Seconds(), lat.p(0.99).Seconds(), lat.p(1).Seconds(),
			idealLat.p(0.5).Seconds(), idealLat.p(0.99).Seconds(), cfg.scale, lat.p(0.5).Minutes()*cfg.scale, lat.p(0.99).Minutes()*cfg.scale)
		var attempts, most int
		if err := db.store.Pool().QueryRow(ctx, `SELECT coalesce(sum(attempts), 0), coalesce(max(attempts), 0) FROM task_pushes`).
			Scan(&attempts, &most); err != nil {
			return rep, fmt.Errorf("attempts: %w", err)
		}
		fmt.Fprintf(out, "tasks: requests %d (%s); refused (403/429) %d; early %d; claims %d for %d pushes (at most %d for one)\n",
			len(gh.Requests()), res.describe(), res.refused, res.early, attempts, cfg.n, most)
		fmt.Fprintf(out, "tasks: verified: %d issues on the fake, one per proposal by its marker, each push recorded once with its issue\n", cfg.n)
		rep.notePeakRSS(out)
		return rep, nil
	})
}

// approveTasks sets the team's destination, saves n proposals from its
// messages in a completed run and approves them all, as an admin's
// approve-all does: n pushes queued in the approval's transaction. It
// returns when each was approved (decided_at), by proposal.
func approveTasks(ctx context.Context, store *storage.Store, n int) (map[int64]time.Time, error) {
	if err := store.Tasks().SetDestination(ctx, tasks.Destination{ChatID: tasksTeam, Kind: tasks.KindGitHub, Target: tasksRepo}, tasksApprover); err != nil {
		return nil, err
	}
	runs := store.Runs()
	now := time.Now()
	r, _, err := runs.Create(ctx, analysis.Run{CreatedBy: tasksApprover, From: now.Add(-time.Hour), To: now,
		Filters: analysis.Filters{Window: time.Hour}}, nil)
	if err != nil {
		return nil, err
	}
	if _, ok, err := runs.Start(ctx, r.ID, false, time.Hour, nil); err != nil || !ok {
		return nil, fmt.Errorf("start run %d: %v (started: %v)", r.ID, err, ok)
	}
	ps := make([]analysis.Proposal, n)
	for i := range ps {
		id := int64(i + 1)
		if err := store.GroupChats().SaveMessage(ctx, analysis.GroupMessage{ChatID: tasksTeam, MessageID: id, AuthorID: 5,
			Author: "Ann", Text: fmt.Sprintf("please do thing %d", id), Date: now}); err != nil {
			return nil, err
		}
		ps[i] = analysis.Proposal{Title: fmt.Sprintf("thing %d", id), Description: "from the chat",
			Priority: tasksPriorities[i%len(tasksPriorities)], Sources: []analysis.Ref{{ChatID: tasksTeam, MessageID: id}}}
	}
	if _, _, err := runs.SaveProposalBatch(ctx, r.ID, 1, n, ps, nil); err != nil {
		return nil, err
	}
	if _, ok, err := runs.Complete(ctx, r.ID, nil); err != nil || !ok {
		return nil, fmt.Errorf("complete run %d: %v (completed: %v)", r.ID, err, ok)
	}
	if _, ok, err := runs.AskApproveAllProposals(ctx, r.ID, nil); err != nil || !ok {
		return nil, fmt.Errorf("ask to approve all of run %d: %v (asked: %v)", r.ID, err, ok)
	}
	approved, _, ok, err := runs.ApproveAllProposals(ctx, r.ID, tasksApprover, nil)
	if err != nil || !ok || len(approved) != n {
		return nil, fmt.Errorf("approve all of run %d: %v (approved %d of %d)", r.ID, err, len(approved), n)
	}
	rows, err := store.Pool().Query(ctx, `SELECT id, decided_at FROM analysis_proposals WHERE run_id = $1`, r.ID)
	if err != nil {
		return nil, err
	}
	at := make(map[int64]time.Time, n)
	var id int64
	var decided time.Time
	if _, err := pgx.ForEachRow(rows, []any{&id, &decided}, func() error { at[id] = decided; return nil }); err != nil {
		return nil, fmt.Errorf("approval times: %w", err)
	}
	var queued int
	if err := store.Pool().QueryRow(ctx, `SELECT count(*) FROM task_pushes`).Scan(&queued); err != nil {
		return nil, err
	}
	if queued != n {
		return nil, fmt.Errorf("%d pushes queued for %d approved proposals", queued, n)
	}
	return at, nil
}

// runPushJob runs the push job as the scheduler does on one replica: a
// run at once, then one at each tick on the interval's multiples since the
// epoch, a tick that passes while a run is under way skipped; until every
// push is recorded, or the timeout.
func runPushJob(ctx context.Context, svc *tasks.Service, db *benchDB, cfg tasksConfig) (runs int, err error) {
	deadline := time.Now().Add(cfg.timeout)
	for {
		if err := svc.Push(ctx); err != nil {
			return runs, fmt.Errorf("push job: %w", err)
		}
		runs++
		var pushed int
		if err := db.store.Pool().QueryRow(ctx, `SELECT count(*) FROM task_pushes WHERE state = 'pushed'`).Scan(&pushed); err != nil {
			return runs, fmt.Errorf("poll pushes: %w", err)
		}
		if pushed == cfg.n {
			return runs, nil
		}
		if time.Now().After(deadline) {
			return runs, fmt.Errorf("%d of %d pushes filed after %s", pushed, cfg.n, cfg.timeout)
		}
		now := time.Now()
		select {
		case <-ctx.Done():
			return runs, ctx.Err()
		case <-time.After(now.Truncate(cfg.interval).Add(cfg.interval).Sub(now)):
		}
	}
}

// tasksMeasure is what the fake's request log says of a run.
type tasksMeasure struct {
	creations []time.Time   // the fake's 201s to POSTs of issues and labels, by arrival
	issueOf   map[int]int64 // creations' indices that are issues → their proposal
	labels    int
	refused   int
	early     int
	byRoute   map[string]int
}

// markerLine is a filed issue's marker line (tracker/github's Body);
// oneOf is a repository's path that names one issue or label.
var (
	markerLine = regexp.MustCompile(`(?m)^<!-- switchboard-proposal-([0-9]+) -->$`)
	oneOf      = regexp.MustCompile(`^/(issues|labels)/.+$`)
)

// measureTasks reads the fake's request log from the job's start.
func measureTasks(reqs []ghfake.Request, start time.Time) (tasksMeasure, error) {
	res := tasksMeasure{issueOf: map[int]int64{}, byRoute: map[string]int{}}
	slices.SortStableFunc(reqs, func(a, b ghfake.Request) int { return a.At.Compare(b.At) })
	for _, r := range reqs {
		route := r.Method + " " + oneOf.ReplaceAllString(strings.TrimPrefix(r.Path, "/repos/"+tasksRepo), "/$1/{one}")
		res.byRoute[route]++
		if r.Status == http.StatusForbidden || r.Status == http.StatusTooManyRequests {
			res.refused++
		}
		if r.Early {
			res.early++
		}
		if r.Method != http.MethodPost || r.Status != http.StatusCreated {
			continue
		}
		if r.At.Before(start) {
			return res, fmt.Errorf("a creation at %s, before the job started", r.At.Format(time.RFC3339Nano))
		}
		res.creations = append(res.creations, r.At)
		if strings.HasSuffix(r.Path, "/labels") {
			res.labels++
			continue
		}
		var in struct {
			Body string `json:"body"`
		}
		if err := json.Unmarshal(r.Body, &in); err != nil {
			return res, fmt.Errorf("an issue's request: %w", err)
		}
		m := markerLine.FindStringSubmatch(in.Body)
		if m == nil {
			return res, fmt.Errorf("an issue filed without a marker: %.200s", in.Body)
		}
		id, _ := strconv.ParseInt(m[1], 10, 64)
		res.issueOf[len(res.creations)-1] = id
	}
	if len(res.creations) == 0 {
		return res, fmt.Errorf("nothing was created")
	}
	return res, nil
}

func (m tasksMeasure) describe() string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m.byRoute)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m.byRoute[k]))
	}
	return strings.Join(parts, ", ")
}

// verifyTasks checks that every approved proposal was filed exactly once,
// by its marker in the fake's issues, that nothing else was filed, and
// that every push is recorded with its issue's number.
func verifyTasks(ctx context.Context, db *benchDB, gh *ghfake.Server, approvedAt map[int64]time.Time, res tasksMeasure) error {
	var wrong findings
	filed := map[int64]int{}
	for _, is := range gh.Issues(tasksRepo) {
		m := markerLine.FindStringSubmatch(is.Body)
		if m == nil {
			wrong.addf("issue #%d has no marker", is.Number)
			continue
		}
		id, _ := strconv.ParseInt(m[1], 10, 64)
		filed[id]++
	}
	for id := range approvedAt {
		if filed[id] != 1 {
			wrong.addf("proposal %d filed %d times", id, filed[id])
		}
	}
	for id := range filed {
		if _, ok := approvedAt[id]; !ok {
			wrong.addf("proposal %d filed, which was not approved", id)
		}
	}
	if len(res.issueOf) != len(approvedAt) {
		wrong.addf("%d issues created for %d proposals", len(res.issueOf), len(approvedAt))
	}
	var pushed, numbers int
	if err := db.store.Pool().QueryRow(ctx, `
SELECT count(*) FILTER (WHERE state = 'pushed' AND number IS NOT NULL), count(DISTINCT number) FROM task_pushes`).
		Scan(&pushed, &numbers); err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	if pushed != len(approvedAt) || numbers != len(approvedAt) {
		wrong.addf("%d pushes recorded with %d distinct issue numbers, want %d", pushed, numbers, len(approvedAt))
	}
	return wrong.err()
}

// idealSchedule is the fastest schedule of m creations the windows allow
// (at most Limit within any Per, as the fake counts) when a request takes
// no time: creation j's instant from the first, which is at 0, each as
// early as the creations before it let it be.
func idealSchedule(m int, windows []tasks.Window) []time.Duration {
	at := make([]time.Duration, m)
	for j := range at {
		if j > 0 {
			at[j] = at[j-1]
		}
		for _, w := range windows {
			if j >= w.Limit {
				at[j] = max(at[j], at[j-w.Limit]+w.Per)
			}
		}
	}
	return at
}
