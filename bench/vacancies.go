package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"switchboard/bot"
	"switchboard/bot/delivery"
	"switchboard/domain"
	"switchboard/domain/vacancy"
	"switchboard/hh"
	"switchboard/hh/hhtest"
	"switchboard/llm"
	"switchboard/llm/llmtest"
	"switchboard/locales"
	"switchboard/storage"
)

// defaultDB is the server the bench creates its database on when neither
// -db nor DATABASE_URL says otherwise.
const defaultDB = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

const (
	benchUsers   = 50  // matches are spread round robin over this many users
	seedChunk    = 500 // vacancies per SaveDiscovery, like a few discovery runs
	pollEvery    = 20 * time.Millisecond
	latencyLLM   = 200 * time.Millisecond // run B's LLM latency
	latencyConc  = 4                      // run B's LLM calls in flight (LLM_MAX_CONCURRENCY)
	tgToken      = "123456789:bench-token"
	hhUserAgent  = "switchboard-bench/1.0 (bench@example.com)"
	benchSearch  = "golang"
	benchProfile = "Go developer, five years of backend work: PostgreSQL, gRPC, Kafka, Kubernetes. " +
		"Remote or Moscow; no PHP, no 1C."
)

// verdict is the LLM's answer to every relevance request.
var verdict = map[string]any{"is_relevant": true, "score": 80, "reasons": []string{"fits"}, "matched_skills": []string{"Go"}}

type vacanciesConfig struct {
	commonFlags
	n        int
	llmConc  int
	latencyN int
	timeout  time.Duration
	stages   bool
}

// vacanciesReport is the scenario's JSON line.
type vacanciesReport struct {
	Scenario         string  `json:"scenario"`
	ZeroLatencyPerS  float64 `json:"zero_latency_per_s"`
	Latency200msPerS float64 `json:"latency_200ms_per_s"`
	Efficiency       float64 `json:"efficiency"`
	tail
}

// benchVacancies runs both runs on a database of its own, dropped before it
// returns whatever happened.
func benchVacancies(ctx context.Context, cfg vacanciesConfig, out io.Writer, log *slog.Logger) (vacanciesReport, error) {
	return onBenchDB(ctx, cfg.db, log, func(db *benchDB) (rep vacanciesReport, err error) {
		store := db.store
		key, users, err := seedUsers(ctx, store)
		if err != nil {
			return rep, err
		}
		fmt.Fprintf(out, "vacancies: database %s (PostgreSQL %s, pool max %d connections), %d users\n",
			db.name, db.pgVersion, store.Pool().Config().MaxConns, len(users))

		w := &world{store: store, dbURL: db.url, key: key, users: users, log: log, timeout: cfg.timeout,
			catalog: locales.MustLoad(), stages: cfg.stages}
		a, err := w.run(ctx, runSpec{label: "A zero latency", n: cfg.n, llmConc: cfg.llmConc, firstID: 90_000_001, seed: 1})
		if err != nil {
			return rep, fmt.Errorf("zero-latency run: %w", err)
		}
		a.print(out)
		if err := w.reset(ctx); err != nil {
			return rep, err
		}
		b, err := w.run(ctx, runSpec{label: "B 200ms LLM", n: cfg.latencyN, llmConc: latencyConc, llmLatency: latencyLLM,
			firstID: 95_000_001, seed: 2})
		if err != nil {
			return rep, fmt.Errorf("200 ms latency run: %w", err)
		}
		b.print(out)

		rep.notePeakRSS(out)
		rep.Scenario = "vacancies"
		rep.ZeroLatencyPerS = round(a.rate(), 1)
		rep.Latency200msPerS = round(b.rate(), 2)
		rep.Efficiency = round(b.efficiency(), 3)
		return rep, nil
	})
}

// world is what the runs share: the database and its users.
type world struct {
	store   *storage.Store
	dbURL   string
	key     string // the search_key discovery saves the vacancies under
	users   []int64
	log     *slog.Logger
	timeout time.Duration
	catalog *locales.Catalog
	stages  bool // wrap the collaborators in timers
}

type runSpec struct {
	label      string
	n, llmConc int
	llmLatency time.Duration
	firstID    int64
	seed       int64
}

type runResult struct {
	runSpec
	elapsed  time.Duration
	llmCalls int
	hhDetail int
	tg       telegramStats
	stages   *stages // nil without -stages
}

// workers is what the bot runs for this LLM concurrency.
func (s runSpec) workers() int { return vacancy.WorkersFor(s.llmConc) }

func (r runResult) rate() float64 { return float64(r.n) / r.elapsed.Seconds() }

// ideal is the rate the LLM budget allows: one answer per latency per
// worker (0 for a zero-latency run, which has no such bound).
func (r runResult) ideal() float64 {
	if r.llmLatency <= 0 {
		return 0
	}
	return float64(r.llmConc) / r.llmLatency.Seconds()
}

// efficiency is the share of the LLM budget used.
func (r runResult) efficiency() float64 {
	if r.ideal() == 0 {
		return 0
	}
	return r.rate() / r.ideal()
}

func (r runResult) print(out io.Writer) {
	fmt.Fprintf(out, "run %s: n=%d workers=%d llm_concurrency=%d llm_latency=%s elapsed=%.3fs rate=%.1f/s\n",
		r.label, r.n, r.workers(), r.llmConc, r.llmLatency, r.elapsed.Seconds(), r.rate())
	if r.ideal() > 0 {
		fmt.Fprintf(out, "  efficiency=%.3f (ideal %.1f/s: %d LLM calls in flight, each %s)\n",
			r.efficiency(), r.ideal(), r.llmConc, r.llmLatency)
	}
	fmt.Fprintf(out, "  llm_calls=%d hh_detail_calls=%d telegram_messages=%d (distinct matches %d, duplicates %d) telegram_tcp_conns=%d\n",
		r.llmCalls, r.hhDetail, r.tg.Messages, r.tg.Distinct, r.tg.Duplicates, r.tg.Conns)
	if r.stages != nil {
		r.stages.print(out, r.n, r.workers(), r.elapsed)
	}
}

// seedUsers creates the users, each with a profile, and returns the
// search_key their matches are discovered under. No searches rows are
// needed: the queue only joins users and vacancies.
func seedUsers(ctx context.Context, store *storage.Store) (string, []int64, error) {
	p, err := vacancy.ParseParams(benchSearch)
	if err != nil {
		return "", nil, err
	}
	langs := []string{"en", "ru", "uk"}
	users := make([]int64, 0, benchUsers)
	for i := range benchUsers {
		id := int64(500_000_001 + i)
		if _, err := store.Users().Upsert(ctx, domain.User{ID: id, Username: fmt.Sprintf("bench%02d", i),
			FirstName: fmt.Sprintf("Bench %d", i), TelegramLanguage: langs[i%len(langs)]}); err != nil {
			return "", nil, err
		}
		if err := store.Users().SetProfile(ctx, id, benchProfile); err != nil {
			return "", nil, err
		}
		users = append(users, id)
	}
	return p.Key(), users, nil
}

// reset empties the queue, the vacancies and the outbox between runs;
// users stay.
func (w *world) reset(ctx context.Context) error {
	_, err := w.store.Pool().Exec(ctx, `TRUNCATE vacancy_matches, vacancies, search_hits, discovery_state, outbox, cover_letters`)
	if err != nil {
		return fmt.Errorf("reset: %w", err)
	}
	return nil
}

// run seeds spec.n QUEUED matches, starts the service over fresh fakes and
// times it until every match is SENT_TO_USER, then checks the deliveries.
func (w *world) run(ctx context.Context, spec runSpec) (runResult, error) {
	res := runResult{runSpec: spec}
	gen := hhtest.Generate(spec.n, hhtest.GenOptions{Seed: spec.seed, FirstID: spec.firstID, Newest: time.Now().Truncate(time.Second)})
	for i := range gen {
		// The workflow drops "more than 6 years" vacancies without asking
		// the LLM; every match here is meant to travel the whole way.
		if gen[i].Experience == hhtest.MoreThan6 {
			gen[i].Experience = hhtest.Between3And6
		}
	}

	hhSrv := hhtest.New(hhtest.WithVacancies(gen...))
	defer hhSrv.Close()
	llmSrv := llmtest.New(llmtest.WithoutRecording())
	defer llmSrv.Close()
	rule := llmSrv.On().Named("relevance").ReplyJSON(verdict)
	if spec.llmLatency > 0 {
		rule.Latency(spec.llmLatency)
	}
	tg := newTelegram(tgToken)
	defer tg.Close()

	llmc, err := llm.New(llm.Config{Provider: llm.ProviderOllama, URL: llmSrv.URL(), Model: "bench",
		Timeout: 30 * time.Second, MaxConcurrency: spec.llmConc},
		llm.WithRegistry(prometheus.NewRegistry()), llm.WithLogger(w.log))
	if err != nil {
		return res, err
	}
	defer llmc.Close()
	src, err := hh.New(hh.Config{URL: hhSrv.URL(), UserAgent: hhUserAgent, Log: w.log})
	if err != nil {
		return res, err
	}
	defer src.Close()
	deps := vacancy.Deps{
		Matches: w.store.Matches(), Profiles: w.store.Users(), Searches: w.store.Searches(), Applications: w.store.Applications(),
		Source: src, Notifier: bot.NewRenderer(bot.RenderConfig{}, w.catalog, w.log), Log: w.log, AboutData: storage.AboutData,
		LLM: llm.Port{Client: llmc, Label: "vacancy_relevance"},
	}
	if w.stages {
		res.stages = newStages()
		deps.Matches = timedMatches{deps.Matches, res.stages}
		deps.Source = timedSource{deps.Source, res.stages}
		deps.LLM = timedLLM{deps.LLM, res.stages}
		deps.Notifier = timedNotifier{deps.Notifier, res.stages}
	}
	svc, err := vacancy.NewService(vacancy.Config{Workers: spec.workers()}, deps)
	if err != nil {
		return res, err
	}

	if err := w.seed(ctx, gen); err != nil {
		return res, err
	}
	poll, err := connect(ctx, w.dbURL)
	if err != nil {
		return res, fmt.Errorf("poll connection: %w", err)
	}
	defer poll.Close(context.WithoutCancel(ctx))

	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	// The bot only renders the cards: the workers write them to the outbox
	// with QUEUED → ANALYZED, and a match becomes SENT_TO_USER when the
	// outbox sender has delivered its card, so one runs next to the
	// service, as in the application (limits lifted: see benchLimits).
	var outbox delivery.Store = w.store.Outbox()
	if res.stages != nil {
		outbox = timedOutbox{w.store.Outbox(), res.stages}
	}
	stopSender, err := startSenderWith(runCtx, outbox, tg.URL(), delivery.Config{}, delivery.NewMemoryLimiter(benchLimits),
		w.log, prometheus.NewRegistry())
	if err != nil {
		return res, err
	}
	defer stopSender()
	done := make(chan struct{})
	start := time.Now()
	go func() {
		defer close(done)
		svc.Run(runCtx)
	}()
	svc.Wake()
	res.elapsed, err = waitSent(ctx, poll, tg, spec.n, start, w.timeout)
	stop()
	<-done
	stopSender()
	if err != nil {
		return res, err
	}
	res.llmCalls = llmSrv.Calls("relevance")
	res.hhDetail = hhSrv.DetailCallsTotal()
	res.tg = tg.stats()
	return res, verify(ctx, poll, tg, spec.n)
}

// seed stores the vacancies and one QUEUED match each, the way discovery
// does (SaveDiscovery, in chunks), matches spread round robin over users.
func (w *world) seed(ctx context.Context, gen []hhtest.Vacancy) error {
	found := make([]vacancy.Vacancy, len(gen))
	for i, g := range gen {
		v, err := toVacancy(g)
		if err != nil {
			return err
		}
		found[i] = v
	}
	var m vacancy.Markers
	for off := 0; off < len(found); off += seedChunk {
		chunk := found[off:min(off+seedChunk, len(found))]
		hits := make([]int64, len(chunk))
		matches := make([]vacancy.NewMatch, len(chunk))
		for i, v := range chunk {
			hits[i] = v.ID
			matches[i] = vacancy.NewMatch{UserID: w.users[(off+i)%len(w.users)], VacancyID: v.ID}
			m.LastSeenMaxID = max(m.LastSeenMaxID, v.ID)
		}
		// The bench, not the key's followers, decides who gets what.
		pick := func([]vacancy.Recipient) []vacancy.NewMatch { return matches }
		n, err := w.store.Matches().SaveDiscovery(ctx, w.key, chunk, hits, m, pick, nil)
		if err != nil {
			return fmt.Errorf("seed: %w", err)
		}
		if n != len(chunk) {
			return fmt.Errorf("seed: %d matches queued, want %d", n, len(chunk))
		}
	}
	// A live database has statistics (autovacuum); a freshly filled table
	// would otherwise be planned as empty until autovacuum's next round.
	if _, err := w.store.Pool().Exec(ctx, `ANALYZE vacancy_matches, vacancies`); err != nil {
		return fmt.Errorf("seed: analyze: %w", err)
	}
	return nil
}

// toVacancy is what a search result gives discovery: everything but the
// detail (description, key skills), which the workers fetch.
func toVacancy(g hhtest.Vacancy) (vacancy.Vacancy, error) {
	id, err := strconv.ParseInt(g.ID, 10, 64)
	if err != nil {
		return vacancy.Vacancy{}, fmt.Errorf("generated vacancy id %q: %w", g.ID, err)
	}
	v := vacancy.Vacancy{
		ID: id, Title: g.Name, Employer: g.Employer.Name, URL: "https://hh.ru/vacancy/" + g.ID, Area: g.Area.Name,
		Experience: g.Experience, Schedule: g.Schedule, PublishedAt: g.PublishedAt,
		Snippet: strings.TrimSpace(g.Requirement + "\n" + g.Responsibility),
	}
	if s := g.Salary; s != nil {
		v.Salary = vacancy.Salary{Currency: s.Currency, Gross: s.Gross}
		if s.From != nil {
			v.Salary.From = *s.From
		}
		if s.To != nil {
			v.Salary.To = *s.To
		}
	}
	return v, nil
}

// waitSent polls until n matches are SENT_TO_USER and returns the time
// since start at that poll. It fails fast when a match ends anywhere else,
// disappears, or Telegram refused a message: the run could never finish.
func waitSent(ctx context.Context, conn *pgx.Conn, tg *telegram, n int, start time.Time, timeout time.Duration) (elapsed time.Duration, err error) {
	var sent int
	err = poll(ctx, pollEvery, timeout, func() (bool, error) {
		var other, total int
		err := conn.QueryRow(ctx, `
SELECT count(*) FILTER (WHERE status = 'SENT_TO_USER'),
       count(*) FILTER (WHERE status NOT IN ('QUEUED', 'ANALYZED', 'SENT_TO_USER')),
       count(*)
FROM vacancy_matches`).Scan(&sent, &other, &total)
		if err != nil {
			return false, fmt.Errorf("poll: %w", err)
		}
		if sent >= n {
			// Finishing late is a timeout too, however the polls fell.
			if elapsed = time.Since(start); elapsed <= timeout {
				return true, nil
			}
			return false, fmt.Errorf("%d of %d matches SENT_TO_USER after %s: %s", sent, n, timeout, breakdown(ctx, conn))
		}
		if other > 0 || total < n {
			return false, fmt.Errorf("matches left the path to SENT_TO_USER (%d of %d exist): %s", total, n, breakdown(ctx, conn))
		}
		return false, tg.refused()
	}, func() error {
		return fmt.Errorf("%d of %d matches SENT_TO_USER after %s: %s", sent, n, timeout, breakdown(ctx, conn))
	})
	if err != nil {
		return 0, err
	}
	return elapsed, nil
}

// breakdown describes the queue for an error message.
func breakdown(ctx context.Context, conn *pgx.Conn) string {
	return describeCounts(ctx, conn, "status", `SELECT status, skip_reason, count(*) FROM vacancy_matches GROUP BY 1, 2 ORDER BY 1, 2`, "no matches",
		func(rows pgx.Rows) (string, error) {
			var status, reason string
			var c int
			if err := rows.Scan(&status, &reason, &c); err != nil {
				return "", err
			}
			if reason != "" {
				status += "(" + reason + ")"
			}
			return fmt.Sprintf("%s=%d", status, c), nil
		})
}

// verify checks that what the database says was sent is what Telegram got:
// one message per match, each match once, every message id distinct.
func verify(ctx context.Context, conn *pgx.Conn, tg *telegram, n int) error {
	var sent, msgIDs int
	if err := conn.QueryRow(ctx, `SELECT count(*), count(DISTINCT message_id) FROM vacancy_matches WHERE status = 'SENT_TO_USER'`).
		Scan(&sent, &msgIDs); err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	st := tg.stats()
	var wrong findings
	if sent != n || msgIDs != n {
		wrong.addf("%d matches SENT_TO_USER with %d distinct message ids, want %d", sent, msgIDs, n)
	}
	if st.Messages != n || st.Distinct != n || st.Duplicates != 0 || st.Unmatched != 0 || st.Rejected != 0 {
		wrong.addf("Telegram got %d messages for %d distinct matches (%d duplicates, %d without buttons, %d refused), want %d",
			st.Messages, st.Distinct, st.Duplicates, st.Unmatched, st.Rejected, n)
	}
	rows, err := conn.Query(ctx, `SELECT id FROM vacancy_matches WHERE status = 'SENT_TO_USER'`)
	if err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	got := tg.delivered()
	missing := 0
	for _, id := range ids {
		if got[id] != 1 {
			missing++
		}
	}
	if missing > 0 {
		wrong.addf("%d matches marked sent were not delivered exactly once", missing)
	}
	return wrong.err()
}

// benchDatabaseURL names a fresh database on the server of serverURL.
func benchDatabaseURL(serverURL string) (name, dbURL string, err error) {
	u, err := url.Parse(serverURL)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") || u.Host == "" {
		return "", "", fmt.Errorf("-db %q: want a postgres:// URL", redactURL(serverURL))
	}
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		return "", "", err
	}
	name = "switchboard_bench_" + hex.EncodeToString(b)
	u.Path = "/" + name
	u.RawPath = ""
	return name, u.String(), nil
}

// dropDatabase drops the bench database, disconnecting whatever still holds
// it. It runs on the way out, so it ignores the (maybe cancelled) run context.
func dropDatabase(serverURL, name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := connectServer(ctx, serverURL)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
	return err
}

// connectServer connects to the -db server: to the URL's database, or to
// postgres when that one does not exist (yet).
func connectServer(ctx context.Context, serverURL string) (*pgx.Conn, error) {
	cfg, err := connConfig(serverURL)
	if err != nil {
		return nil, err
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "3D000" { // the URL's database does not exist
		cfg.Database = "postgres"
		conn, err = pgx.ConnectConfig(ctx, cfg)
	}
	return conn, err
}

// connConfig parses a database URL as the pool does, so that pool
// settings in -db (pool_max_conns…) are not sent to the server as runtime
// parameters by the bench's own plain connections.
func connConfig(dbURL string) (*pgx.ConnConfig, error) {
	pcfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		return nil, err
	}
	return pcfg.ConnConfig, nil
}

// connect opens a plain connection (see connConfig).
func connect(ctx context.Context, dbURL string) (*pgx.Conn, error) {
	cfg, err := connConfig(dbURL)
	if err != nil {
		return nil, err
	}
	return pgx.ConnectConfig(ctx, cfg)
}

func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable)"
	}
	return u.Redacted()
}

// peakRSSMB is the process's peak resident set (VmHWM), in MB.
func peakRSSMB() (float64, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		rest, ok := strings.CutPrefix(line, "VmHWM:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("VmHWM line %q not understood", line)
		}
		kb, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			return 0, err
		}
		return kb / 1024, nil
	}
	return 0, errors.New("no VmHWM in /proc/self/status")
}

func round(x float64, digits int) float64 {
	p := math.Pow10(digits)
	return math.Round(x*p) / p
}
