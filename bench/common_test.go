package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"switchboard/storage/storagetest"
)

// smoke runs the named scenario end to end on the test server (args follow -db)
// and checks what every scenario promises: it succeeds, the last line of
// its output is the JSON summary, which decodes into R with no unknown
// field, and the bench database the output names is dropped. It returns
// the output, its last line and the decoded report.
func smoke[R any](t *testing.T, scenario string, args ...string) (out, last string, rep R) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs PostgreSQL and a few seconds")
	}
	sc, ok := lookup(scenario)
	require.True(t, ok, scenario)
	// A scenario takes seconds alone; beside CI's other packages on two
	// cores it has taken two minutes. Ten is no healthy run.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	server := storagetest.ServerURL()
	err := sc.run(ctx, append([]string{"-db", server}, args...), &stdout, &stderr)
	require.NoError(t, err, "stderr:\n%s\nstdout:\n%s", stderr.String(), stdout.String())

	out = stdout.String()
	require.True(t, strings.HasSuffix(out, "}\n"), "the JSON line ends the output:\n%s", out)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	last = lines[len(lines)-1]
	dec := json.NewDecoder(strings.NewReader(last))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&rep), "last line: %s", last)
	requireReference(t, out, last)

	name := regexp.MustCompile(`database (switchboard_bench_[0-9a-f]+)`).FindStringSubmatch(out)
	require.NotNil(t, name, out)
	requireDropped(t, context.Background(), server, name[1])
	return out, last, rep
}

// postgresServer skips t in -short mode and returns the test server's URL.
func postgresServer(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("needs PostgreSQL")
	}
	return storagetest.ServerURL()
}

// requireDropsOnError runs bench with cfg on the test server: it must fail
// after it has created its database, with an error that says each of want,
// and the database is gone all the same.
func requireDropsOnError[C any, R interface{ databaseName() string }, PC options[C]](t *testing.T,
	bench func(context.Context, C, io.Writer, *slog.Logger) (R, error), cfg C, want ...string) {
	t.Helper()
	server := postgresServer(t)
	PC(&cfg).common().db = server
	rep, err := bench(context.Background(), cfg, io.Discard, newLogger(io.Discard))
	for _, w := range want {
		require.ErrorContains(t, err, w)
	}
	require.NotEmpty(t, rep.databaseName())
	requireDropped(t, context.Background(), server, rep.databaseName())
}

// A run that fails after its database was created still drops it: in
// each scenario a timeout of 1ns ends the wait at its first poll.
func TestDropsDatabaseOnError(t *testing.T) {
	for _, tc := range []struct {
		scenario string
		run      func(t *testing.T)
	}{
		// Long before 2000 messages are analysed.
		{"analysis", func(t *testing.T) {
			requireDropsOnError(t, benchAnalysis, analysisConfig{n: 2000, chats: 2, seed: 1, timeout: time.Nanosecond}, "is running after 1ns")
		}},
		// Long before an offer with a 1 s SLA expires.
		{"dispatch", func(t *testing.T) {
			requireDropsOnError(t, benchDispatch, dispatchConfig{n: 5, replicas: 1, slaMin: time.Second, slaMax: time.Second,
				batch: 5, sweeps: 1, sweepN: 10, timeout: time.Nanosecond, seed: 1}, "of 5 offers closed", "SENT=5")
		}},
		{"memory", func(t *testing.T) {
			requireDropsOnError(t, benchMemory, memoryConfig{runs: 5, users: 2, workers: 1, orchestrators: 1, submitters: 1,
				timeout: time.Nanosecond}, "runs archived after")
		}},
		// Run A ends long before a match can have travelled HH, the LLM
		// and Telegram.
		{"vacancies", func(t *testing.T) {
			requireDropsOnError(t, benchVacancies, vacanciesConfig{n: 5, llmConc: 1, latencyN: 1, timeout: time.Nanosecond}, "SENT_TO_USER after")
		}},
	} {
		t.Run(tc.scenario, tc.run)
	}
}

// requireDropped checks on a budget of its own, not what the scenario left
// of one.
func requireDropped(t *testing.T, ctx context.Context, server, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, server)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	var exists bool
	require.NoError(t, conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name).Scan(&exists))
	require.False(t, exists, "the bench database is dropped at the end")
}

// tgPost returns a poster of Bot API calls to the fake Telegram: it posts
// body to method, requires the answer's status code to be status and
// returns the response body.
func tgPost(t *testing.T, tg *telegram) func(status int, method, body string) string {
	return func(status int, method, body string) string {
		t.Helper()
		resp, err := http.Post(tg.URL()+"/bot"+tgToken+"/"+method, "application/json", strings.NewReader(body))
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.Equal(t, status, resp.StatusCode, "%s: %s", method, b)
		return string(b)
	}
}

// Pool settings in -db are the pool's, not runtime parameters for the
// bench's own connections (which the server would refuse, leaving the
// bench database behind).
func TestConnConfigKeepsPoolSettingsToThePool(t *testing.T) {
	cfg, err := connConfig("postgres://postgres@127.0.0.1:5432/x?sslmode=disable&pool_max_conns=7&application_name=b")
	require.NoError(t, err)
	require.NotContains(t, cfg.RuntimeParams, "pool_max_conns")
	require.Equal(t, "b", cfg.RuntimeParams["application_name"])
	require.Equal(t, "x", cfg.Database)
}
