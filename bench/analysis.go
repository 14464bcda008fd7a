package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"switchboard/bot"
	"switchboard/domain"
	"switchboard/domain/analysis"
	"switchboard/llm"
	"switchboard/llm/llmtest"
	"switchboard/locales"
	"switchboard/storage"
)

const (
	analysisPollEvery = 10 * time.Millisecond
	// analysisAdminChat is ADMIN_CHAT_ID: where the bot posts the run's
	// events and its board (the progress, then the proposals to review,
	// one message edited in place).
	analysisAdminChat = -1001000000001
	analysisAdmin     = 500_000_001 // the admin who opens the runs
	// Group i (from 0) is analysisFirstChat − i; its members' user ids
	// start at analysisFirstAuthor + 100·i.
	analysisFirstChat   = -1002000000001
	analysisFirstAuthor = 800_000_001
	// analysisSpan is how far back the messages go: inside the 24h window
	// of a run opened a few minutes after they were generated.
	analysisSpan = 23*time.Hour + 45*time.Minute
	// The batching the application runs with (ANALYSIS_BATCH_GAP's
	// default and the domain's batch size), set explicitly so that the
	// bench's own count of batches matches the service's.
	analysisBatchGap  = 10 * time.Minute
	analysisBatchSize = 50
	// proposalsSystem is a sentence of the proposals system prompt
	// (domain/analysis/prompt.go), which the scripted model matches on.
	proposalsSystem = "You read a batch of messages from a team's group chat"
)

// The bot is the analysis workflow's notifier, as in the application.
var _ analysis.Notifier = (*bot.Bot)(nil)

type analysisConfig struct {
	commonFlags
	n       int
	chats   int
	filters string
	latency time.Duration
	seed    uint64
	timeout time.Duration
	stages  bool
	prof    profiles
}

// analysisReport is the scenario's JSON line.
type analysisReport struct {
	Scenario     string  `json:"scenario"`
	Messages     int     `json:"messages"`
	TotalS       float64 `json:"total_s"`
	MessagesPerS float64 `json:"messages_per_s"`
	Batches      int     `json:"batches"`
	Proposals    int     `json:"proposals"`
	Chats        int     `json:"chats"`
	// What the run without filters told the admin chat: its messages (the
	// event lines and the board) and the edits of its board that reached
	// Telegram (the board's edits are paced, the ones in between
	// coalescing, so these are far fewer than the batches).
	AdminMessages int `json:"admin_messages"`
	BoardEdits    int `json:"board_edits"`
	// The run with -filters, left out without it: the messages left after
	// the prefilter, their batches and the run's time.
	FilteredMessages int     `json:"filtered_messages,omitempty"`
	FilteredBatches  int     `json:"filtered_batches,omitempty"`
	FilteredTotalS   float64 `json:"filtered_total_s,omitempty"`
	tail
}

// analysisWorld is what the runs share.
type analysisWorld struct {
	store   *storage.Store
	svc     *analysis.Service
	llmSrv  *llmtest.Server
	model   *proposer
	tg      *telegram
	pub     *countingPublisher
	reaped  chan struct{} // a reap of Serve asked the runs store
	poll    *pgx.Conn
	stages  *stages // nil without -stages
	timeout time.Duration
}

// benchAnalysis seeds the messages and times the run(s), on a database of
// its own that is dropped before it returns whatever happened.
func benchAnalysis(ctx context.Context, cfg analysisConfig, out io.Writer, log *slog.Logger) (analysisReport, error) {
	return onBenchDB(ctx, cfg.db, log, func(db *benchDB) (rep analysisReport, err error) {
		store := db.store

		genStart := time.Now()
		msgs := generateConversations(cfg.n, cfg.chats, cfg.seed, genStart)
		if err := seedGroupMessages(ctx, store, msgs, cfg.chats); err != nil {
			return rep, err
		}
		plan := planBatches(msgs, analysisBatchGap, analysisBatchSize)
		fmt.Fprintf(out, "analysis: database %s (PostgreSQL %s, pool max %d connections), %d messages in %d groups seeded in %.2fs, LLM latency %s\n",
			db.name, db.pgVersion, store.Pool().Config().MaxConns, len(msgs), cfg.chats, time.Since(genStart).Seconds(), cfg.latency)
		describeMessages(out, msgs, plan)

		w := &analysisWorld{store: store, model: &proposer{}, pub: &countingPublisher{Publisher: store.Runs()},
			reaped: make(chan struct{}, 1), timeout: cfg.timeout}
		if cfg.stages {
			w.stages = newStages()
		}
		w.llmSrv = llmtest.New(llmtest.WithoutRecording())
		defer w.llmSrv.Close()
		w.llmSrv.On(llmtest.SystemContains(proposalsSystem)).Named("proposals").ReplyFunc(w.model.reply).Latency(cfg.latency)
		w.tg = newTelegram(tgToken)
		defer w.tg.Close()
		llmc, err := llm.New(llm.Config{Provider: llm.ProviderOllama, URL: w.llmSrv.URL(), Model: "bench", StrongModel: "bench-strong",
			EmbedModel: "bench-embed", Timeout: 30 * time.Second},
			llm.WithRegistry(prometheus.NewRegistry()), llm.WithLogger(log))
		if err != nil {
			return rep, err
		}
		defer llmc.Close()
		// The real bot renders the admin chat's messages (ADMIN_CHAT_ID set),
		// which the workflow writes to the outbox in its transactions; an
		// outbox sender delivers them to the fake Telegram, as in the
		// application (bot/delivery). Delivery runs alongside the executor but
		// is not part of the timed path: each run waits for the outbox to
		// drain before it reads what Telegram got.
		stopSender, err := startSender(ctx, store, w.tg.URL(), log)
		if err != nil {
			return rep, err
		}
		defer stopSender()
		render := bot.NewRenderer(bot.RenderConfig{AdminChatID: analysisAdminChat, AdminLang: "en"}, locales.MustLoad(), log)
		deps := analysis.Deps{
			Runs:      reapSignal{Runs: store.Runs(), reaped: w.reaped},
			Chats:     store.GroupChats(),
			LLM:       llm.AnalysisPort{Client: llmc},
			Notifier:  render,
			Publisher: w.pub,
			Log:       log, Registerer: prometheus.NewRegistry(),
		}
		if w.stages != nil {
			deps.Runs = timedAnalysisRuns{deps.Runs, w.stages}
			deps.Chats = timedAnalysisChats{deps.Chats, w.stages}
			deps.LLM = timedAnalysisLLM{deps.LLM, w.stages}
			deps.Notifier = timedAnalysisNotifier{deps.Notifier, w.stages}
			w.pub.Publisher = timedPublisher{w.pub.Publisher, w.stages}
		}
		w.svc, err = analysis.NewService(analysis.Config{BatchGap: analysisBatchGap, BatchSize: analysisBatchSize}, deps)
		if err != nil {
			return rep, err
		}
		if w.poll, err = connect(ctx, db.url); err != nil {
			return rep, fmt.Errorf("poll connection: %w", err)
		}
		defer w.poll.Close(context.WithoutCancel(ctx))

		all, err := w.run(ctx, "all messages", "24h", expectation{messages: len(msgs), filtered: msgs, plan: plan})
		if err != nil {
			return rep, fmt.Errorf("run without filters: %w", err)
		}
		all.print(out)

		rep.Scenario = "analysis"
		rep.Messages = all.run.Messages
		rep.TotalS = round(all.elapsed.Seconds(), 3)
		rep.MessagesPerS = round(all.rate(), 1)
		rep.Batches = all.run.Batches
		rep.Proposals = all.run.ProposalsTotal
		rep.Chats = cfg.chats
		rep.AdminMessages = all.adminMessages
		rep.BoardEdits = all.boardEdits

		if strings.TrimSpace(cfg.filters) != "" {
			exp, err := w.closeRun(ctx, out, all.run, msgs, cfg.filters)
			if err != nil {
				return rep, err
			}
			fr, err := w.run(ctx, "filtered", cfg.filters, exp)
			if err != nil {
				return rep, fmt.Errorf("run with filters %q: %w", cfg.filters, err)
			}
			fr.print(out)
			rep.FilteredMessages = fr.run.Filtered
			rep.FilteredBatches = fr.run.Batches
			rep.FilteredTotalS = round(fr.elapsed.Seconds(), 3)
		}

		rep.notePeakRSS(out)
		return rep, nil
	})
}

// expectation is what a run must find: the messages in its window, those
// left after its prefilter and their batches.
type expectation struct {
	messages int
	filtered []analysis.GroupMessage
	plan     batchPlan
}

type analysisResult struct {
	label   string
	args    string
	run     analysis.Run
	elapsed time.Duration // Start → the poll that saw the run completed
	// executor is completed_at − started_at, the service's own clock.
	executor time.Duration
	// Deltas over the run: LLM calls, message lines in their prompts,
	// proposals the model made and messages they cite, batches it made
	// proposals for; pg_notify calls; what the fake Telegram saw.
	llmCalls, promptLines, proposed, cited, withProposals int64
	published                                             int64
	tg                                                    telegramStats
	adminMessages                                         int // messages to the admin chat
	boardEdits                                            int // edits of the run's board
	// proposalMessages are messages other than the board carrying a
	// proposal's Approve button: the board replaced them, so none.
	proposalMessages int
	drained          time.Duration // outbox delivered, after Serve stopped
	plan             batchPlan
	stages           *stages
}

func (r analysisResult) rate() float64 { return float64(r.run.Filtered) / r.elapsed.Seconds() }

func (r analysisResult) print(out io.Writer) {
	fmt.Fprintf(out, "run %q (#%d, /run_new %s): messages=%d filtered=%d batches=%d proposals=%d\n",
		r.label, r.run.ID, r.args, r.run.Messages, r.run.Filtered, r.run.Batches, r.run.ProposalsTotal)
	perBatch := 0.0
	if r.run.Batches > 0 {
		perBatch = ms(r.elapsed) / float64(r.run.Batches)
	}
	fmt.Fprintf(out, "  time: %.3fs from Start to completed (executor: started_at → completed_at %.3fs), %.1f messages/s, %.2f ms per batch\n",
		r.elapsed.Seconds(), r.executor.Seconds(), r.rate(), perBatch)
	fmt.Fprintf(out, "  llm_calls=%d prompt_lines=%d proposals=%d citing %d messages (batches with proposals %d)\n",
		r.llmCalls, r.promptLines, r.proposed, r.cited, r.withProposals)
	fmt.Fprintf(out, "  telegram messages=%d (admin chat %d: event lines and the board; proposal messages %d) board_edits=%d edits=%d not_modified=%d refused=%d telegram_tcp_conns=%d\n",
		r.tg.Messages, r.adminMessages, r.proposalMessages, r.boardEdits,
		r.tg.Edits, r.tg.NotModified, r.tg.Rejected, r.tg.Conns)
	fmt.Fprintf(out, "  pg_notify events=%d; outbox delivered %.3fs after Serve stopped\n", r.published, r.drained.Seconds())
	if r.stages != nil {
		// One executor works through the batches one after another.
		r.stages.printPer(out, "batch", max(r.run.Batches, 1), 1, r.elapsed)
	}
}

// run opens a run with /run_new's args, starts it with Serve running and
// times it from Start to the first poll that sees it completed; Serve is
// then stopped, which waits for the executor's last posts, and the run is
// checked against exp.
func (w *analysisWorld) run(ctx context.Context, label, args string, exp expectation) (analysisResult, error) {
	res := analysisResult{label: label, args: args, plan: exp.plan, stages: w.stages}
	// What was written before (closeRun's run_closed) is delivered before
	// the snapshot, so the deltas below are this run's messages only.
	if err := waitOutboxDrained(ctx, w.poll, w.timeout); err != nil {
		return res, err
	}
	tgBefore, pubBefore, m := w.tg.stats(), w.pub.n.Load(), w.model.snapshot()
	adminBefore := w.tg.messagesTo(analysisAdminChat)
	seen := map[int]bool{} // messages with Approve buttons before this run
	for _, msgs := range w.tg.proposals() {
		for _, id := range msgs {
			seen[id] = true
		}
	}
	r, err := w.svc.NewRun(ctx, analysisAdmin, args)
	if err != nil {
		return res, err
	}
	stopServe, err := w.serve(ctx)
	if err != nil {
		return res, err
	}
	defer stopServe()
	if w.stages != nil {
		w.stages.reset()
	}

	start := time.Now()
	if _, err := w.svc.Start(ctx, r.ID, false); err != nil {
		return res, fmt.Errorf("start run %d: %w", r.ID, err)
	}
	if err := waitCompleted(ctx, w.poll, w.tg, r.ID, w.timeout); err != nil {
		return res, err
	}
	res.elapsed = time.Since(start)
	// Serve returns once the executor has finished. run_completed and the
	// board's final edit were written to the outbox with the completion
	// (the edit waits out the board's pacing, Config.BoardEvery);
	// the checks below read the fake Telegram, so they wait until the
	// sender has delivered everything the run wrote.
	stopServe()
	drainStart := time.Now()
	if err := waitOutboxDrained(ctx, w.poll, w.timeout); err != nil {
		return res, err
	}
	res.drained = time.Since(drainStart)

	if res.run, err = w.svc.Run(ctx, r.ID); err != nil {
		return res, err
	}
	res.executor = res.run.CompletedAt.Sub(res.run.StartedAt)
	after := w.model.snapshot()
	res.llmCalls = after.calls - m.calls
	res.promptLines = after.lines - m.lines
	res.proposed = after.proposed - m.proposed
	res.cited = after.cited - m.cited
	res.withProposals = after.withProposals - m.withProposals
	res.published = w.pub.n.Load() - pubBefore
	res.tg = w.tg.stats().minus(tgBefore)
	res.adminMessages = w.tg.messagesTo(analysisAdminChat) - adminBefore
	if res.run.ProgressMessageID != 0 {
		res.boardEdits, _, _ = w.tg.edited(analysisAdminChat, res.run.ProgressMessageID)
	}
	// The fake counts every message with an Approve button as a proposal's
	// (by its first one); the board has them once proposals exist, and is
	// not a proposal message. Messages from before this run do not count.
	for _, msgs := range w.tg.proposals() {
		for _, id := range msgs {
			if id != res.run.ProgressMessageID && !seen[id] {
				res.proposalMessages++
			}
		}
	}
	return res, w.verify(ctx, res, exp)
}

// serve runs the service's Serve until the returned stop, which waits for
// it (and so for the executors) to return. It returns once Serve is
// running: its first reap has asked the repository.
func (w *analysisWorld) serve(ctx context.Context) (stop func(), err error) {
	select {
	case <-w.reaped:
	default:
	}
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.svc.Serve(sctx)
	}()
	var once bool
	stop = func() {
		if !once {
			once = true
			cancel()
			<-done
		}
	}
	select {
	case <-w.reaped:
		return stop, nil
	case <-ctx.Done():
		stop()
		return nil, ctx.Err()
	case <-time.After(30 * time.Second):
		stop()
		return nil, errors.New("Serve did not start within 30s")
	}
}

// waitCompleted polls the run every 10 ms on a connection of its own until
// it is completed; a failed run, a refusal by the fake Telegram or the
// timeout end the wait with an error.
func waitCompleted(ctx context.Context, conn *pgx.Conn, tg *telegram, id int64, timeout time.Duration) error {
	var state, errLog string
	var done, batches int
	return poll(ctx, analysisPollEvery, timeout, func() (bool, error) {
		err := conn.QueryRow(ctx, `SELECT state, COALESCE(error_log::text, ''), batches_done, batches FROM analysis_runs WHERE id = $1`, id).
			Scan(&state, &errLog, &done, &batches)
		if err != nil {
			return false, fmt.Errorf("poll: %w", err)
		}
		switch analysis.State(state) {
		case analysis.Completed:
			return true, nil
		case analysis.Failed:
			return false, fmt.Errorf("run %d failed: %s", id, errLog)
		}
		return false, tg.refused()
	}, func() error {
		return fmt.Errorf("run %d is %s after %s: %d of %d batches done", id, state, timeout, done, batches)
	})
}

// verify checks that the run analysed what it should, exactly once: its
// counters, the model's calls, the proposals in the database (numbered
// 1…N in the run, none with a message of its own), the admin chat (the
// event lines and the run's board, no message per proposal), the board
// edited at most once per batch and at the end, ending completed with the
// proposal count, and the events published.
func (w *analysisWorld) verify(ctx context.Context, res analysisResult, exp expectation) error {
	r := res.run
	var wrong findings
	nf := len(exp.filtered)
	if r.State != analysis.Completed {
		wrong.addf("run is %s, want completed", r.State)
	}
	if r.Messages != exp.messages || r.Filtered != nf || r.Processed != nf {
		wrong.addf("messages=%d filtered=%d processed=%d, want %d, %d, %d", r.Messages, r.Filtered, r.Processed, exp.messages, nf, nf)
	}
	if r.Batches != exp.plan.batches || r.BatchesDone != r.Batches {
		wrong.addf("batches=%d batches_done=%d, want %d (the bench's own batching)", r.Batches, r.BatchesDone, exp.plan.batches)
	}
	if res.llmCalls != int64(r.Batches) || res.promptLines != int64(nf) {
		wrong.addf("%d LLM calls with %d message lines, want one per batch (%d) and every message once (%d)",
			res.llmCalls, res.promptLines, r.Batches, nf)
	}
	if int64(r.ProposalsTotal) != res.proposed || r.ProposalsPending != r.ProposalsTotal {
		wrong.addf("proposals_total=%d pending=%d, the model proposed %d", r.ProposalsTotal, r.ProposalsPending, res.proposed)
	}

	// Every proposal stored once, numbered 1…N for the board's pages.
	var stored, ordinals, firstOrdinal, lastOrdinal, withMessage, sources int64
	if err := w.poll.QueryRow(ctx, `
SELECT count(*), count(DISTINCT ordinal), COALESCE(min(ordinal), 0), COALESCE(max(ordinal), 0), count(message_id),
       (SELECT count(*) FROM analysis_proposal_sources WHERE run_id = $1)
FROM analysis_proposals WHERE run_id = $1`, r.ID).Scan(&stored, &ordinals, &firstOrdinal, &lastOrdinal, &withMessage, &sources); err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	if stored != int64(r.ProposalsTotal) || sources != res.cited {
		wrong.addf("%d proposals with %d sources in the database, want %d with %d", stored, sources, r.ProposalsTotal, res.cited)
	}
	if stored > 0 && (ordinals != stored || firstOrdinal != 1 || lastOrdinal != stored) {
		wrong.addf("the %d proposals are numbered %d to %d (%d distinct), want 1 to %d", stored, firstOrdinal, lastOrdinal, ordinals, stored)
	}
	if withMessage != 0 || res.proposalMessages != 0 {
		wrong.addf("%d proposals have a message of their own and %d messages carry a proposal's buttons besides the board, want none",
			withMessage, res.proposalMessages)
	}

	// Posted: run_created, run_started, the board and run_completed.
	// Published: the same events, proposals_created for every batch with
	// proposals, and progress_updated at the start and after every batch.
	const wantMsgs = 4
	if res.tg.Messages != wantMsgs || res.adminMessages != wantMsgs || res.tg.Rejected != 0 || res.tg.NotModified != 0 {
		wrong.addf("Telegram got %d messages (%d to the admin chat, %d refused, %d edits not modifying), want %d to the admin chat",
			res.tg.Messages, res.adminMessages, res.tg.Rejected, res.tg.NotModified, wantMsgs)
	}
	if wantPub := int64(4 + r.Batches + int(res.withProposals)); res.published != wantPub {
		wrong.addf("%d events published on pg_notify, want %d", res.published, wantPub)
	}
	if r.ProgressMessageID == 0 {
		wrong.addf("no board recorded")
	} else {
		edits, last, ok := w.tg.edited(analysisAdminChat, r.ProgressMessageID)
		if ok && edits == 0 {
			// Never edited: the send itself carried the last state (an
			// edit written while the send waited folds into it).
			last, ok = w.boardSent(ctx, r.ID)
		}
		switch {
		case !ok:
			wrong.addf("board %d was not sent to the admin chat", r.ProgressMessageID)
		case edits > r.Batches+1 || res.tg.Edits != edits:
			// The board's edits are paced; one written while another
			// waits replaces it (the latest state wins), so at most one
			// per batch plus the last reach Telegram, and usually far
			// fewer.
			wrong.addf("board edited %d times (%d edits in all), want at most %d (each of %d batches and the end)",
				edits, res.tg.Edits, r.Batches+1, r.Batches)
		default:
			if missing := boardShowsCompleted(last, r); len(missing) > 0 {
				wrong.addf("the board does not end completed with its proposals (no %s): %q", strings.Join(missing, ", "), clipText(last, 300))
			}
		}
	}
	return wrong.err()
}

// boardShowsCompleted lists what the board's final text (Telegram HTML)
// lacks of a completed run: the header, the full bar, the proposal count
// and, with proposals, the first page's header.
func boardShowsCompleted(text string, r analysis.Run) []string {
	want := []string{
		fmt.Sprintf("✅ <b>Run #%d</b> completed", r.ID),
		"▓▓▓▓▓▓▓▓▓▓ 100%",
		fmt.Sprintf("Proposals: %d", r.ProposalsTotal),
	}
	if r.ProposalsTotal > 0 {
		want = append(want, fmt.Sprintf("<b>Proposals 1–%d of %d</b> · ✅ 0 · ❌ 0 · ⏳ %d",
			min(r.ProposalsTotal, analysis.ReviewPageSize), r.ProposalsTotal, r.ProposalsTotal))
	}
	var missing []string
	for _, s := range want {
		if !strings.Contains(text, s) {
			missing = append(missing, strconv.Quote(s))
		}
	}
	return missing
}

// boardSent is the text the board was sent with, as delivered.
func (w *analysisWorld) boardSent(ctx context.Context, runID int64) (string, bool) {
	var text string
	err := w.poll.QueryRow(ctx, `SELECT body->>'text' FROM outbox
WHERE chat_id = $1 AND msg_key = $2 AND NOT edit AND state = 'sent' ORDER BY id DESC LIMIT 1`,
		analysisAdminChat, fmt.Sprint("progress:", runID)).Scan(&text)
	return text, err == nil
}

// closeRun decides every proposal of the first run (one in ten approved,
// which embeds it) and closes it, so that a second run can be opened, and
// returns what a run with filters will find: the messages no proposal of
// the first run cites, and of those the ones the prefilter keeps.
func (w *analysisWorld) closeRun(ctx context.Context, out io.Writer, r analysis.Run, msgs []analysis.GroupMessage, filters string) (expectation, error) {
	start := time.Now()
	rows, err := w.poll.Query(ctx, `SELECT id FROM analysis_proposals WHERE run_id = $1 ORDER BY id`, r.ID)
	if err != nil {
		return expectation{}, err
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return expectation{}, err
	}
	approved := 0
	for i, id := range ids {
		approve := i%10 == 0
		if _, _, err := w.svc.Decide(ctx, id, analysisAdmin, approve); err != nil {
			return expectation{}, fmt.Errorf("decide proposal %d: %w", id, err)
		}
		if approve {
			approved++
		}
	}
	if _, err := w.svc.Close(ctx, r.ID); err != nil {
		return expectation{}, fmt.Errorf("close run %d: %w", r.ID, err)
	}
	rows, err = w.poll.Query(ctx, `SELECT DISTINCT chat_id, message_id FROM analysis_proposal_sources WHERE run_id = $1`, r.ID)
	if err != nil {
		return expectation{}, err
	}
	cited := map[analysis.Ref]bool{}
	var ref analysis.Ref
	if _, err := pgx.ForEachRow(rows, []any{&ref.ChatID, &ref.MessageID}, func() error {
		cited[ref] = true
		return nil
	}); err != nil {
		return expectation{}, err
	}
	f, err := analysis.ParseRunArgs(filters)
	if err != nil {
		return expectation{}, err
	}
	var left []analysis.GroupMessage
	for _, m := range msgs {
		if !cited[analysis.Ref{ChatID: m.ChatID, MessageID: m.MessageID}] && (f.ChatID == 0 || m.ChatID == f.ChatID) {
			left = append(left, m)
		}
	}
	kept := analysis.Prefilter(left, f)
	fmt.Fprintf(out, "closed run #%d in %.2fs: %d proposals decided (%d approved and embedded); %d messages cited, %d left, %d of them pass %q\n",
		r.ID, time.Since(start).Seconds(), len(ids), approved, len(cited), len(left), len(kept), filters)
	return expectation{messages: len(left), filtered: kept, plan: planBatches(kept, analysisBatchGap, analysisBatchSize)}, nil
}

// --- the scripted model ---------------------------------------------------------

// proposer is the model: it answers every batch at once with one
// proposal citing the batch's first three messages and, when the batch has
// more than one message and its first id is odd, a second citing its last
// two (but the first); ids are read from the prompt's "[id=N …]" lines. It
// counts what it did.
type proposer struct {
	calls, lines, proposed, cited, withProposals, unreadable atomic.Int64
}

type proposerCounts struct{ calls, lines, proposed, cited, withProposals int64 }

func (p *proposer) snapshot() proposerCounts {
	return proposerCounts{p.calls.Load(), p.lines.Load(), p.proposed.Load(), p.cited.Load(), p.withProposals.Load()}
}

// promptLine is one message of a batch as the prompt shows it.
type promptLine struct {
	id   int64
	date time.Time
	text string
}

var benchMentionRx = regexp.MustCompile(`@\w{5,32}`)

func (p *proposer) reply(req llmtest.Request) string {
	p.calls.Add(1)
	lines := readPrompt(req.Prompt)
	p.lines.Add(int64(len(lines)))
	if len(lines) == 0 {
		p.unreadable.Add(1)
		return `{"proposals": []}`
	}
	a := analysis.Answer{Proposals: []analysis.AnswerProposal{}}
	first := lines[0]
	k := 1
	if len(lines) > 1 && first.id%2 == 1 {
		k = 2
	}
	for j := range k {
		var src []promptLine
		if j == 0 {
			src = lines[:min(3, len(lines))]
		} else {
			src = lines[max(len(lines)-2, 1):]
		}
		a.Proposals = append(a.Proposals, proposalFrom(src, j))
		p.cited.Add(int64(len(src)))
	}
	p.proposed.Add(int64(len(a.Proposals)))
	p.withProposals.Add(1)
	b, _ := json.Marshal(a)
	return string(b)
}

// proposalFrom writes a proposal from the messages it cites: a title from
// the first one's words, the messages as the description, an assignee the
// messages @mention, sometimes a deadline two days after the first.
func proposalFrom(src []promptLine, j int) analysis.AnswerProposal {
	first := src[0]
	words := strings.Fields(first.text)
	title := "Follow up: " + strings.Join(words[:min(len(words), 8)], " ")
	if len(words) == 0 {
		title = "Follow up on the discussion"
	}
	var desc strings.Builder
	ids := make([]int64, len(src))
	for i, m := range src {
		ids[i] = m.id
		fmt.Fprintf(&desc, "Message %d: %s\n", m.id, clipText(m.text, 200))
	}
	pr := analysis.AnswerProposal{
		Title: title, Description: desc.String(), Priority: []string{"low", "medium", "high"}[(first.id+int64(j))%3],
		Sources: ids,
	}
	for _, m := range src {
		if at := benchMentionRx.FindString(m.text); at != "" {
			pr.Assignee = at
			break
		}
	}
	if j == 0 && first.id%4 == 0 && !first.date.IsZero() {
		pr.Deadline = first.date.AddDate(0, 0, 2).Format("2006-01-02")
	}
	return pr
}

// readPrompt reads the batch's messages from the prompt: each starts a
// line with "[id=N YYYY-MM-DD HH:MM Day] Author: text" (the text's further
// lines are indented).
func readPrompt(prompt string) []promptLine {
	var out []promptLine
	for line := range strings.SplitSeq(prompt, "\n") {
		rest, ok := strings.CutPrefix(line, "[id=")
		if !ok {
			continue
		}
		head, text, ok := strings.Cut(rest, "] ")
		if !ok {
			continue
		}
		idStr, date, _ := strings.Cut(head, " ")
		id, err := strconv.ParseInt(idStr, 10, 64)
		if err != nil {
			continue
		}
		pl := promptLine{id: id}
		if len(date) >= 16 {
			pl.date, _ = time.Parse("2006-01-02 15:04", date[:16])
		}
		if _, t, ok := strings.Cut(text, ": "); ok {
			pl.text = t
		}
		out = append(out, pl)
	}
	return out
}

func clipText(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n]) + "…"
}

// --- the conversations ------------------------------------------------------------

// batchPlan is the bench's own count of the batches the service must make:
// by chat and date, a new batch after a gap of more than the batch gap or
// when the batch is full.
type batchPlan struct {
	batches    int
	byGap      int // batches started by a gap
	byCap      int // batches started because the previous one was full
	largest    int
	singletons int // batches of one message
}

func planBatches(msgs []analysis.GroupMessage, gap time.Duration, size int) batchPlan {
	byChat := map[int64][]analysis.GroupMessage{}
	for _, m := range msgs {
		byChat[m.ChatID] = append(byChat[m.ChatID], m)
	}
	var p batchPlan
	for _, list := range byChat {
		slices.SortFunc(list, func(a, b analysis.GroupMessage) int {
			return cmp.Or(a.Date.Compare(b.Date), cmp.Compare(a.MessageID, b.MessageID))
		})
		cur := 0
		end := func() {
			if cur > 0 {
				p.largest = max(p.largest, cur)
				if cur == 1 {
					p.singletons++
				}
			}
		}
		for i, m := range list {
			switch {
			case i == 0:
				p.batches++
			case m.Date.Sub(list[i-1].Date) > gap:
				end()
				p.batches++
				p.byGap++
				cur = 0
			case cur >= size:
				end()
				p.batches++
				p.byCap++
				cur = 0
			}
			cur++
		}
		end()
	}
	return p
}

func describeMessages(out io.Writer, msgs []analysis.GroupMessage, p batchPlan) {
	var mentions, long, short, multiline, chars int
	for _, m := range msgs {
		n := utf8.RuneCountInString(m.Text)
		chars += n
		switch {
		case n < 20:
			short++
		case n >= 300:
			long++
		}
		if benchMentionRx.MatchString(m.Text) {
			mentions++
		}
		if strings.Contains(m.Text, "\n") {
			multiline++
		}
	}
	fmt.Fprintf(out, "  texts: mean %.0f characters, %d under 20, %d of 300 or more, %d multi-line, %d with an @mention\n",
		float64(chars)/float64(max(len(msgs), 1)), short, long, multiline, mentions)
	fmt.Fprintf(out, "  batching (gap %s, at most %d): %d batches, %d started by a gap, %d by the cap; largest %d, %d of one message\n",
		analysisBatchGap, analysisBatchSize, p.batches, p.byGap, p.byCap, p.largest, p.singletons)
}

// seedGroupMessages bulk-inserts the groups and their messages (COPY) and
// analyses the table, as autovacuum would have by then.
func seedGroupMessages(ctx context.Context, store *storage.Store, msgs []analysis.GroupMessage, chats int) error {
	pool := store.Pool()
	groups := make([][]any, chats)
	for i := range chats {
		groups[i] = []any{int64(analysisFirstChat - i), fmt.Sprintf("Team %02d", i+1), true}
	}
	if _, err := pool.CopyFrom(ctx, pgx.Identifier{"group_chats"}, []string{"id", "title", "can_read"}, pgx.CopyFromRows(groups)); err != nil {
		return fmt.Errorf("seed groups: %w", err)
	}
	n, err := pool.CopyFrom(ctx, pgx.Identifier{"group_messages"}, []string{"chat_id", "message_id", "author_id", "author", "text", "date"},
		pgx.CopyFromSlice(len(msgs), func(i int) ([]any, error) {
			m := msgs[i]
			return []any{m.ChatID, m.MessageID, m.AuthorID, m.Author, m.Text, m.Date}, nil
		}))
	if err != nil {
		return fmt.Errorf("seed messages: %w", err)
	}
	if n != int64(len(msgs)) {
		return fmt.Errorf("seed messages: %d copied, want %d", n, len(msgs))
	}
	if _, err := pool.Exec(ctx, `ANALYZE group_chats, group_messages`); err != nil {
		return fmt.Errorf("analyze: %w", err)
	}
	return nil
}

// member is one person in a group.
type member struct {
	id       int64
	name     string // first name: how the model sees the author
	username string // for @mentions (5 or more characters)
}

var (
	firstNames = []string{"Anna", "Boris", "Chen", "Dmitri", "Elena", "Farid", "Grace", "Hiro", "Irina", "Jonas", "Katya", "Lars",
		"Maria", "Nikolai", "Olga", "Pavel", "Quinn", "Rosa", "Sergei", "Tanya", "Umar", "Vera", "Wen", "Yusuf"}
	userSuffixes = []string{"_dev", "_pm", "_qa", "_ops", "_design", "_eng"}
	shortTexts   = []string{"ok", "thanks!", "+1", "👍", "on it", "sure", "lol", "got it", "done", "will check", "agreed", "brb",
		"nice", "morning all", "yes", "no idea", "same here", "🙏", "ack", "looking", "ty", "great, thanks", "hm", "fixed"}
	things = []string{"the billing service", "the login page", "invoice export", "the mobile app", "the CI pipeline",
		"the staging database", "the payment webhook", "the onboarding flow", "search indexing", "the admin panel",
		"the weekly report", "API rate limits", "the push notifications", "the Q&A page", "the pricing table",
		"the data migration", "the SSO integration", "the CSV import", "the dashboard charts", "the release notes"}
	whens    = []string{"tomorrow", "by Friday", "next week", "tonight", "before the release", "on Monday", "by end of day", "after the demo"}
	problems = []string{"a 500 error", "a timeout", "wrong totals", "missing emails", "slow page loads", "duplicate charges",
		"a blank screen", "stale data", "a memory leak", "broken links"}
	events    = []string{"standup", "release planning", "the retro", "the client call", "code freeze", "the demo", "the sprint review"}
	templates = []string{
		"Can someone look at %[1]s?",
		"%[1]s is failing again, since this morning.",
		"I pushed a fix for %[1]s, please review.",
		"Who owns %[1]s these days?",
		"Let's move %[1]s to %[2]s.",
		"Customer reports %[3]s in %[1]s.",
		"Reminder: %[4]s %[2]s.",
		"Deploy of %[1]s went fine.",
		"We need to update the docs for %[1]s %[2]s.",
		"There is a bug in %[1]s: %[3]s when the cart has > 10 items.",
		"Release of %[1]s is blocked until the review is done.",
		"Deadline for %[1]s is %[2]s, is that realistic?",
		"Can we get %[1]s into this sprint? It's urgent for the client.",
		"I'll take %[1]s, should be done %[2]s.",
		"Heads up: %[3]s on %[1]s after the last deploy.",
		"The invoice for %[1]s still shows %[3]s.",
		"Is anyone working on %[1]s? I don't want to duplicate effort.",
		"Q: does %[1]s need a migration or is it config only?",
		"Rolled back %[1]s, we saw %[3]s in production.",
		"Good news: %[1]s is 30%% faster after the cache change.",
	}
	explanations = []string{
		"I checked the logs and it only happens for accounts created before the migration.",
		"It looks related to the change we made last week, but I'm not sure yet.",
		"The workaround for now is to retry, but that won't scale.",
		"We should probably add a test for this so it doesn't come back.",
		"Product wants this before the client call, so it's a priority.",
		"I can pair with someone on it if that helps.",
		"Let's not block the release on it unless it gets worse.",
		"The metrics show it started around 3am, when the batch job runs.",
	}
)

// generateConversations writes n messages in groups of people talking:
// per group, sessions of 3–40 messages (some of 55–160, which the batch
// cap splits) with up to 9 minutes between messages, separated by 12 to 75
// minutes of quiet, all dated in the analysisSpan before end. Texts vary
// from "ok" to multi-line plans (see messageText).
// Message ids count up per group, as Telegram's do.
func generateConversations(n, chats int, seed uint64, end time.Time) []analysis.GroupMessage {
	rng := rand.New(rand.NewPCG(seed, 0xa11a))
	out := make([]analysis.GroupMessage, 0, n)
	for c := range chats {
		m := n / chats
		if c < n%chats {
			m++
		}
		if m == 0 {
			continue
		}
		chatID := int64(analysisFirstChat - c)
		team := make([]member, 5+rng.IntN(8))
		for i := range team {
			name := firstNames[rng.IntN(len(firstNames))]
			team[i] = member{id: int64(analysisFirstAuthor + 100*c + i), name: name,
				username: strings.ToLower(name) + userSuffixes[rng.IntN(len(userSuffixes))]}
		}
		// Sessions and the gaps between and within them.
		var sizes []int
		for left := m; left > 0; {
			s := 3 + rng.IntN(38)
			if rng.IntN(10) < 3 {
				s = 55 + rng.IntN(106)
			}
			s = min(s, left)
			sizes = append(sizes, s)
			left -= s
		}
		quiet := make([]time.Duration, len(sizes)-1)
		var quietTotal time.Duration
		for i := range quiet {
			quiet[i] = 12*time.Minute + time.Duration(rng.Int64N(int64(63*time.Minute)))
			quietTotal += quiet[i]
		}
		talk := m - len(sizes) // gaps within sessions
		maxGap := 9 * time.Minute
		if talk > 0 {
			mean := (analysisSpan - quietTotal) / time.Duration(talk)
			maxGap = min(max(2*mean, time.Second), 9*time.Minute)
		}
		gaps := make([]time.Duration, 0, m)
		for i, s := range sizes {
			if i > 0 {
				gaps = append(gaps, quiet[i-1])
			} else {
				gaps = append(gaps, 0)
			}
			for range s - 1 {
				gaps = append(gaps, time.Duration(rng.Int64N(int64(maxGap))))
			}
		}
		var total time.Duration
		for _, g := range gaps {
			total += g
		}
		scale := 1.0
		if total > analysisSpan {
			scale = float64(analysisSpan) / float64(total)
			total = analysisSpan
		}
		at := end.Add(-analysisSpan).Add(time.Duration(rng.Int64N(int64(analysisSpan-total) + 1)))
		firstID := int64(1 + rng.IntN(5000))
		for i, g := range gaps {
			at = at.Add(time.Duration(float64(g) * scale))
			author := team[rng.IntN(len(team))]
			out = append(out, analysis.GroupMessage{
				ChatID: chatID, MessageID: firstID + int64(i), AuthorID: author.id, Author: author.name,
				Text: messageText(rng, team, author), Date: at.UTC().Truncate(time.Microsecond),
			})
		}
	}
	return out
}

// messageText is one message: short (a quarter), one sentence (about
// half), a few sentences, or a multi-line plan; one in five of those that
// are not short @mentions someone else in the group (about one message in
// eight).
func messageText(rng *rand.Rand, team []member, author member) string {
	pick := func(list []string) string { return list[rng.IntN(len(list))] }
	sentence := func() string {
		return fmt.Sprintf(pick(templates), pick(things), pick(whens), pick(problems), pick(events))
	}
	var text string
	switch r := rng.IntN(100); {
	case r < 25:
		return pick(shortTexts) // no mention: "ok" stays "ok"
	case r < 72:
		text = sentence()
	case r < 95:
		parts := []string{sentence()}
		for range 1 + rng.IntN(4) {
			if rng.IntN(2) == 0 {
				parts = append(parts, pick(explanations))
			} else {
				parts = append(parts, sentence())
			}
		}
		text = strings.Join(parts, " ")
	default:
		var sb strings.Builder
		fmt.Fprintf(&sb, "Plan for %s:\n", pick(whens))
		for i := range 3 + rng.IntN(6) {
			fmt.Fprintf(&sb, "%d. %s %s\n", i+1, sentence(), pick(explanations))
		}
		sb.WriteString("Shout if anything is missing.")
		text = sb.String()
	}
	if rng.IntN(5) == 0 {
		other := team[rng.IntN(len(team))]
		if other.id != author.id {
			if rng.IntN(2) == 0 {
				text = "@" + other.username + " " + text
			} else {
				text += " cc @" + other.username
			}
		}
	}
	return text
}

// --- collaborators ---------------------------------------------------------------

// reapSignal tells serve that Serve is running: its first act is a reap,
// which asks the runs store for interrupted runs.
type reapSignal struct {
	analysis.Runs
	reaped chan struct{}
}

func (r reapSignal) FailInterrupted(ctx context.Context, render domain.Render[analysis.Review]) ([]analysis.Run, error) {
	runs, err := r.Runs.FailInterrupted(ctx, render)
	select {
	case r.reaped <- struct{}{}:
	default:
	}
	return runs, err
}

// countingPublisher counts the events published on pg_notify.
type countingPublisher struct {
	analysis.Publisher
	n atomic.Int64
}

func (p *countingPublisher) Publish(ctx context.Context, payload string) error {
	err := p.Publisher.Publish(ctx, payload)
	if err == nil {
		p.n.Add(1)
	}
	return err
}
