package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"switchboard/bot/delivery"
	"switchboard/domain"
)

type outboxConfig struct {
	commonFlags
	n       int
	chats   int
	workers int // of the unlimited run
	order   string
	timeout time.Duration
}

// outboxReport is the scenario's JSON line.
type outboxReport struct {
	Scenario      string  `json:"scenario"`
	Messages      int     `json:"messages"`
	PerS          float64 `json:"per_s"`
	Efficiency    float64 `json:"efficiency"`
	RateLimited   float64 `json:"rate_limited"`
	UnlimitedPerS float64 `json:"unlimited_per_s"`
	reference
	// databases are the runs' bench databases (dropped by then), for tests.
	databases []string
}

// The goal of the limited run: Telegram's limits, not the host's.
const (
	outboxTelegramRate  = 30.0 // Telegram's global limit, messages a second
	outboxGoalPerS      = 29.4 // 98 % of it
	outboxGoalThrottled = 0.002
)

// outboxFirstChat is the first chat's id; the chats are private (> 0).
const outboxFirstChat int64 = 900_000_001

// outboxPass is one of the scenario's two runs.
type outboxPass struct {
	name   string
	flood  *floodLimits // the fake's limits; nil: none
	sender delivery.Config
	limits delivery.Limits
}

// benchOutbox makes both runs, each on a database of its own.
func benchOutbox(ctx context.Context, cfg outboxConfig, out io.Writer, log *slog.Logger) (rep outboxReport, err error) {
	msgs, want := outboxMessages(cfg)
	order := map[string]string{"chat": "chat by chat", "round": "round robin over the chats"}[cfg.order]
	fmt.Fprintf(out, "outbox: %d messages to %d private chats (%s each, enqueued at once, %s), one sender\n",
		cfg.n, cfg.chats, perChatCount(cfg), order)

	flood := telegramFloodLimits()
	limited, err := outboxRun(ctx, cfg, outboxPass{name: "limited", flood: &flood, limits: delivery.DefaultLimits()},
		msgs, want, out, log)
	rep.databases = append(rep.databases, limited.database)
	if err != nil {
		return rep, err
	}
	unlimited, err := outboxRun(ctx, cfg, outboxPass{name: "unlimited", sender: delivery.Config{Workers: cfg.workers}, limits: benchLimits},
		msgs, want, out, log)
	rep.databases = append(rep.databases, unlimited.database)
	if err != nil {
		return rep, err
	}

	rep.Scenario = "outbox"
	rep.Messages = cfg.n
	perS := limited.rate(cfg.n)
	rep.PerS = round(perS, 2)
	rep.Efficiency = round(perS/outboxTelegramRate, 4)
	rep.RateLimited = round(limited.rateLimited(), 5)
	rep.UnlimitedPerS = round(unlimited.rate(cfg.n), 1)
	return rep, nil
}

// perChatCount says how many messages each chat gets.
func perChatCount(cfg outboxConfig) string {
	if cfg.n%cfg.chats == 0 {
		return fmt.Sprint(cfg.n / cfg.chats)
	}
	return fmt.Sprintf("%d or %d", cfg.n/cfg.chats, cfg.n/cfg.chats+1)
}

// outboxMessages are the messages to enqueue, in cfg.order, and what each
// chat must receive, in order. Chat c gets n/chats messages, one more for
// the first n%chats chats.
func outboxMessages(cfg outboxConfig) ([]domain.Message, map[int64][]string) {
	want := make(map[int64][]string, cfg.chats)
	counts := make([]int, cfg.chats)
	for c := range counts {
		counts[c] = cfg.n / cfg.chats
		if c < cfg.n%cfg.chats {
			counts[c]++
		}
		chat := outboxFirstChat + int64(c)
		for k := range counts[c] {
			want[chat] = append(want[chat], fmt.Sprintf("Outbox bench: chat %d, message %d of %d", c+1, k+1, counts[c]))
		}
	}
	msg := func(c, k int) domain.Message {
		chat := outboxFirstChat + int64(c)
		return domain.Message{ChatID: chat, Kind: domain.KindNote, Text: want[chat][k]}
	}
	msgs := make([]domain.Message, 0, cfg.n)
	if cfg.order == "round" {
		for k := range counts[0] {
			for c := range counts {
				if k < counts[c] {
					msgs = append(msgs, msg(c, k))
				}
			}
		}
	} else {
		for c := range counts {
			for k := range counts[c] {
				msgs = append(msgs, msg(c, k))
			}
		}
	}
	return msgs, want
}

// outboxResult is what one run measured.
type outboxResult struct {
	database string
	start    time.Time // the sender started
	tg       telegramStats
	retried  map[string]float64 // the sender's outbox_retried_total by reason
	attempts int64              // claims of the rows, all told
	maxTries int                // most claims of one row
	max1s    int                // most messages accepted within any 1 s
	perSec   []int              // messages accepted in each full second from the first
}

// span is the time from the first accepted message to the last.
func (r outboxResult) span() time.Duration { return r.tg.LastSent.Sub(r.tg.FirstSent) }

// rate is messages / span: the delivered rate the goal is about.
func (r outboxResult) rate(n int) float64 { return float64(n) / r.span().Seconds() }

// rateLimited is the share of sendMessage requests answered 429.
func (r outboxResult) rateLimited() float64 {
	if r.tg.SendRequests == 0 {
		return 0
	}
	return float64(r.tg.Throttled) / float64(r.tg.SendRequests)
}

// outboxRun enqueues msgs into a fresh database and times one sender
// delivering them to a fake Telegram, then checks what arrived.
func outboxRun(ctx context.Context, cfg outboxConfig, p outboxPass, msgs []domain.Message, want map[int64][]string,
	out io.Writer, log *slog.Logger) (res outboxResult, err error) {
	db, err := openBenchDB(ctx, cfg.db, log)
	if err != nil {
		return res, err
	}
	defer db.close(&err)
	res.database = db.name
	opts := []tgOption{withTranscript()}
	fakeLimits := "no limits"
	if p.flood != nil {
		opts = append(opts, withFloodLimits(*p.flood))
		fakeLimits = fmt.Sprintf("%g msg/s (burst %d) and %g msg/s per private chat (burst %d)",
			p.flood.Global.Rate, p.flood.Global.Burst, p.flood.Private.Rate, p.flood.Private.Burst)
	}
	tg := newTelegram(tgToken, opts...)
	defer tg.Close()

	// Setup, not timed: every message in one statement, as a workflow
	// writes its messages.
	if err := db.store.Outbox().Enqueue(ctx, msgs...); err != nil {
		return res, err
	}
	poll, err := connect(ctx, db.url)
	if err != nil {
		return res, fmt.Errorf("poll connection: %w", err)
	}
	defer poll.Close(context.WithoutCancel(ctx))
	if _, err := poll.Exec(ctx, `ANALYZE outbox`); err != nil {
		return res, err
	}
	workers := p.sender.Workers
	if workers == 0 {
		workers = 16 // delivery.Config's default
	}
	fmt.Fprintf(out, "%s: database %s (PostgreSQL %s); fake Telegram: %s; sender: %d workers, limiter %g msg/s (burst %d), "+
		"%g per private chat (burst %d)\n", p.name, db.name, db.pgVersion, fakeLimits, workers,
		p.limits.Global, p.limits.GlobalBurst, p.limits.Private, p.limits.PrivateBurst)

	reg := prometheus.NewRegistry()
	res.start = time.Now()
	stop, err := startSenderWith(ctx, db.store.Outbox(), tg.URL(), p.sender, delivery.NewMemoryLimiter(p.limits), log, reg)
	if err != nil {
		return res, err
	}
	defer stop()
	if err := waitOutboxDrained(ctx, poll, cfg.timeout); err != nil {
		return res, fmt.Errorf("%s run: %w (the fake accepted %d of %d messages)", p.name, err, tg.stats().Messages, cfg.n)
	}
	stop()
	res.tg = tg.stats()

	if res.retried, err = retriedByReason(reg); err != nil {
		return res, err
	}
	if err := poll.QueryRow(ctx, `SELECT COALESCE(sum(attempts), 0), COALESCE(max(attempts), 0) FROM outbox`).
		Scan(&res.attempts, &res.maxTries); err != nil {
		return res, fmt.Errorf("attempts: %w", err)
	}
	res.max1s, res.perSec = acceptedPerSecond(tg.sendTimes())
	res.print(out, p.name, cfg.n, p.flood != nil)
	if err := verifyOutbox(ctx, poll, tg, res.tg, want, cfg.n); err != nil {
		return res, fmt.Errorf("%s run: %w", p.name, err)
	}
	fmt.Fprintf(out, "%s: verified: %d messages arrived, each exactly once, every chat's in the order written; "+
		"the outbox has %d rows, all sent\n", p.name, cfg.n, cfg.n)
	return res, nil
}

func (r outboxResult) print(out io.Writer, name string, n int, limited bool) {
	eff := ""
	if limited {
		eff = fmt.Sprintf(" (%.4f of %.0f/s)", r.rate(n)/outboxTelegramRate, outboxTelegramRate)
	}
	fmt.Fprintf(out, "%s: start → last accepted %.3fs (first accepted after %.3fs); first → last accepted %.3fs: %.2f msg/s%s\n",
		name, r.tg.LastSent.Sub(r.start).Seconds(), r.tg.FirstSent.Sub(r.start).Seconds(), r.span().Seconds(), r.rate(n), eff)
	fmt.Fprintf(out, "%s: sendMessage requests %d, answered 429 %d (by the global bucket %d, a chat's %d; early %d): "+
		"rate_limited %.5f\n", name, r.tg.SendRequests, r.tg.Throttled, r.tg.ThrottledGlobal, r.tg.ThrottledChat, r.tg.Early,
		r.rateLimited())
	var reasons []string
	for _, k := range slices.Sorted(maps.Keys(r.retried)) {
		reasons = append(reasons, fmt.Sprintf("%s=%.0f", k, r.retried[k]))
	}
	if len(reasons) == 0 {
		reasons = []string{"none"}
	}
	fmt.Fprintf(out, "%s: claims %d for %d rows (at most %d for one row); rows put back by the sender: %s; "+
		"TCP connections %d\n", name, r.attempts, n, r.maxTries, strings.Join(reasons, " "), r.tg.Conns)
	if len(r.perSec) > 0 {
		s := slices.Sorted(slices.Values(r.perSec))
		fmt.Fprintf(out, "%s: accepted per full second (%d s): min %d, median %d, max %d; most within any 1 s: %d\n",
			name, len(s), s[0], s[len(s)/2], s[len(s)-1], r.max1s)
	} else {
		fmt.Fprintf(out, "%s: most accepted within any 1 s: %d\n", name, r.max1s)
	}
}

// retriedByReason reads the sender's outbox_retried_total by reason
// (paced, flood, transient, limiter).
func retriedByReason(reg *prometheus.Registry) (map[string]float64, error) {
	mfs, err := reg.Gather()
	if err != nil {
		return nil, fmt.Errorf("sender metrics: %w", err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "outbox_retried_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "reason" {
					out[l.GetValue()] += m.GetCounter().GetValue()
				}
			}
		}
	}
	return out, nil
}

// acceptedPerSecond is the most times within any 1 s window (half open)
// and the count in each full second from the first time.
func acceptedPerSecond(times []time.Time) (most int, perSec []int) {
	j := 0
	for i := range times {
		for j < len(times) && times[j].Sub(times[i]) < time.Second {
			j++
		}
		most = max(most, j-i)
	}
	if len(times) == 0 {
		return most, nil
	}
	full := int(times[len(times)-1].Sub(times[0]) / time.Second)
	perSec = make([]int, full)
	for _, t := range times {
		if s := int(t.Sub(times[0]) / time.Second); s < full {
			perSec[s]++
		}
	}
	return most, perSec
}

// verifyOutbox checks that every message arrived exactly once, each
// chat's in the order written, that Telegram refused nothing but for its
// flood limits, and that the outbox holds every row as sent.
func verifyOutbox(ctx context.Context, conn *pgx.Conn, tg *telegram, st telegramStats, want map[int64][]string, n int) error {
	var wrong findings
	if st.Messages != n {
		wrong.addf("Telegram accepted %d messages, want %d", st.Messages, n)
	}
	if st.Rejected > 0 {
		wrong.addf("Telegram refused %d requests (last: %s)", st.Rejected, st.LastReject)
	}
	if st.SendRequests != st.Messages+st.Throttled+st.Rejected {
		wrong.addf("%d sendMessage requests, but %d accepted + %d answered 429 + %d refused",
			st.SendRequests, st.Messages, st.Throttled, st.Rejected)
	}
	if p := checkTranscript(tg.transcriptTexts(), want); p != "" {
		wrong = append(wrong, p)
	}
	rows, err := conn.Query(ctx, `SELECT state, count(*) FROM outbox GROUP BY state ORDER BY state`)
	if err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	states := map[string]int{}
	var state string
	var count int
	if _, err := pgx.ForEachRow(rows, []any{&state, &count}, func() error { states[state] = count; return nil }); err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	if states["sent"] != n || len(states) != 1 {
		wrong.addf("outbox rows by state %v, want sent=%d only", states, n)
	}
	return wrong.err()
}

// checkTranscript compares what each chat got with what it should have,
// in order: "" when every message arrived exactly once and every chat's in
// the order written, else what is wrong, with an example.
func checkTranscript(got, want map[int64][]string) string {
	var missing, duplicated, disordered, stray int
	var example string
	note := func(s string) {
		if example == "" {
			example = s
		}
	}
	for _, chat := range slices.Sorted(maps.Keys(want)) {
		texts, g := want[chat], got[chat]
		seen := map[string]int{}
		for _, t := range g {
			seen[t]++
		}
		for _, t := range texts {
			switch c := seen[t]; {
			case c == 0:
				missing++
				note(fmt.Sprintf("chat %d never got %q", chat, t))
			case c > 1:
				duplicated += c - 1
				note(fmt.Sprintf("chat %d got %q %d times", chat, t, c))
			}
			delete(seen, t)
		}
		for t, c := range seen {
			stray += c
			note(fmt.Sprintf("chat %d got %q, which was not sent to it", chat, t))
		}
		if len(g) == len(texts) && !slices.Equal(g, texts) {
			disordered++
			note(fmt.Sprintf("chat %d got %q, want %q", chat, g, texts))
		}
	}
	for chat, texts := range got {
		if _, ok := want[chat]; !ok {
			stray += len(texts)
			note(fmt.Sprintf("chat %d got %d messages and should have got none", chat, len(texts)))
		}
	}
	if missing+duplicated+disordered+stray == 0 {
		return ""
	}
	return fmt.Sprintf("%d messages missing, %d duplicates, %d chats out of order, %d stray messages (e.g. %s)",
		missing, duplicated, disordered, stray, example)
}
