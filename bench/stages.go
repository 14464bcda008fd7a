package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"sync"
	"time"

	"switchboard/bot/delivery"
	"switchboard/domain"
	"switchboard/domain/analysis"
	"switchboard/domain/dispatch"
	"switchboard/domain/memory"
	"switchboard/domain/vacancy"
)

// stages adds up the time the workers spend in each collaborator (-stages),
// to show what dominates a run. The wrappers delegate to the real
// implementations; each call costs two clock reads and a mutex.
type stages struct {
	mu    sync.Mutex
	total map[string]time.Duration
	calls map[string]int
}

func newStages() *stages {
	return &stages{total: map[string]time.Duration{}, calls: map[string]int{}}
}

func (s *stages) since(name string, start time.Time) {
	d := time.Since(start)
	s.mu.Lock()
	s.total[name] += d
	s.calls[name]++
	s.mu.Unlock()
}

// print lists the stages by total time, with the mean per call and the
// total per delivered match; workers×elapsed is the time available.
func (s *stages) print(out io.Writer, matches, workers int, elapsed time.Duration) {
	s.printPer(out, "match", matches, workers, elapsed)
}

// printPer is print with the unit of work named (a match, a run).
func (s *stages) printPer(out io.Writer, unit string, items, workers int, elapsed time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	names := make([]string, 0, len(s.total))
	var sum time.Duration
	for n, d := range s.total {
		names = append(names, n)
		sum += d
	}
	sort.Slice(names, func(i, j int) bool { return s.total[names[i]] > s.total[names[j]] })
	budget := time.Duration(workers) * elapsed
	fmt.Fprintf(out, "  stages (worker time; %d workers × %.3fs = %.3fs, %.1f%% inside the calls below):\n",
		workers, elapsed.Seconds(), budget.Seconds(), 100*sum.Seconds()/budget.Seconds())
	for _, n := range names {
		d, c := s.total[n], s.calls[n]
		fmt.Fprintf(out, "    %-20s %6d calls  %5.2f per %s  mean %8.3fms  per %s %8.3fms  %5.1f%%\n",
			n, c, float64(c)/float64(items), unit, ms(d)/float64(c), unit, ms(d)/float64(items), 100*d.Seconds()/budget.Seconds())
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// timedMatches times the queries a worker makes per match.
type timedMatches struct {
	vacancy.Matches
	s *stages
}

func (r timedMatches) Claim(ctx context.Context, o vacancy.ClaimOptions) (vacancy.Claim, bool, error) {
	defer r.s.since("db claim", time.Now())
	return r.Matches.Claim(ctx, o)
}

func (r timedMatches) NextLeaseExpiry(ctx context.Context) (time.Time, bool, error) {
	defer r.s.since("db lease expiry", time.Now())
	return r.Matches.NextLeaseExpiry(ctx)
}

func (r timedMatches) Transition(ctx context.Context, id int64, from, to vacancy.Status, ch vacancy.Change) (vacancy.Match, bool, error) {
	defer r.s.since("db transition", time.Now())
	return r.Matches.Transition(ctx, id, from, to, ch)
}

type timedSource struct {
	vacancy.Source
	s *stages
}

func (t timedSource) Vacancy(ctx context.Context, id int64) (vacancy.Vacancy, error) {
	defer t.s.since("hh detail", time.Now())
	return t.Source.Vacancy(ctx, id)
}

type timedLLM struct {
	vacancy.LLM
	s *stages
}

func (t timedLLM) JSON(ctx context.Context, system, prompt string, out any) error {
	defer t.s.since("llm", time.Now())
	return t.LLM.JSON(ctx, system, prompt, out)
}

type timedNotifier struct {
	vacancy.Notifier
	s *stages
}

// Card times rendering only: the card goes to the outbox with the
// match's transition, and the senders deliver it.
func (t timedNotifier) Card(d vacancy.CardData) []domain.Message {
	defer t.s.since("render card", time.Now())
	return t.Notifier.Card(d)
}

// timedMemoryRuns, timedMemories and timedPrompts time the storage calls
// the memory orchestrators make. Each is one round trip: one statement, or
// (Capture with a recall, Step with a capture) a few sent together. The
// stages keep the names the calls had on storage.Store. Submit is intake,
// made by the submitters, not the workers; the bench times it on its own.
type timedMemoryRuns struct {
	memory.Runs
	s *stages
}

type timedMemories struct {
	memory.Memories
	s *stages
}

type timedPrompts struct {
	memory.Prompts
	s *stages
}

func (r timedMemoryRuns) Capture(ctx context.Context, id int64, from, to memory.Status, lease time.Duration, claimer string, size memory.RecallSize) (memory.PipelineRun, memory.Recall, bool, error) {
	name := "db CapturePipelineRun"
	if size != (memory.RecallSize{}) {
		name += " + recall"
	}
	defer r.s.since(name, time.Now())
	return r.Runs.Capture(ctx, id, from, to, lease, claimer, size)
}

func (r timedMemoryRuns) Step(ctx context.Context, id int64, st memory.Step) (bool, error) {
	name := "db StepPipelineRun"
	if st.Then != "" {
		name += " + capture"
	}
	defer r.s.since(name, time.Now())
	return r.Runs.Step(ctx, id, st)
}

func (r timedMemoryRuns) ClaimFinished(ctx context.Context, id int64, lease time.Duration, claimer string) (memory.PipelineRun, bool, error) {
	defer r.s.since("db ClaimFinishedPipelineRun", time.Now())
	return r.Runs.ClaimFinished(ctx, id, lease, claimer)
}

func (r timedMemoryRuns) MarkDelivered(ctx context.Context, id int64, tell domain.Render[memory.PipelineRun]) (bool, error) {
	defer r.s.since("db MarkPipelineRunDelivered", time.Now())
	return r.Runs.MarkDelivered(ctx, id, tell)
}

func (r timedMemoryRuns) Archive(ctx context.Context, id int64, sum *memory.Summary) (memory.Ref, bool, error) {
	defer r.s.since("db ArchivePipelineRun", time.Now())
	return r.Runs.Archive(ctx, id, sum)
}

func (r timedMemoryRuns) Release(ctx context.Context, id int64) error {
	defer r.s.since("db ReleasePipelineRun", time.Now())
	return r.Runs.Release(ctx, id)
}

func (r timedMemoryRuns) Open(ctx context.Context, limit int) ([]memory.Ref, error) {
	defer r.s.since("db OpenPipelineRuns", time.Now())
	return r.Runs.Open(ctx, limit)
}

func (r timedMemoryRuns) Next(ctx context.Context, userID int64) (memory.Ref, bool, error) {
	defer r.s.since("db NextPipelineRun", time.Now())
	return r.Runs.Next(ctx, userID)
}

func (r timedMemories) Summaries(ctx context.Context, userID int64, limit int) ([]memory.Summary, error) {
	defer r.s.since("db MemorySummaries", time.Now())
	return r.Memories.Summaries(ctx, userID, limit)
}

func (r timedPrompts) Active(ctx context.Context, role string) (memory.Prompt, error) {
	defer r.s.since("db ActiveSystemPrompt", time.Now())
	return r.Prompts.Active(ctx, role)
}

func (r timedMemoryRuns) Backlog(ctx context.Context) (int, error) {
	defer r.s.since("db PipelineBacklog", time.Now())
	return r.Runs.Backlog(ctx)
}

type timedMemoryNotifier struct {
	memory.Notifier
	s *stages
}

type timedTypist struct {
	memory.Typist
	s *stages
}

func (t timedTypist) Typing(ctx context.Context, chatID int64) error {
	defer t.s.since("telegram typing", time.Now())
	return t.Typist.Typing(ctx, chatID)
}

func (t timedMemoryNotifier) Answer(r memory.PipelineRun) []domain.Message {
	defer t.s.since("render answer", time.Now())
	return t.Notifier.Answer(r)
}

func (t timedMemoryNotifier) Failed(r memory.PipelineRun) []domain.Message {
	defer t.s.since("render failed", time.Now())
	return t.Notifier.Failed(r)
}

// timedDispatchOrders times the calls on the orders store the dispatch
// replicas make (Run's timer loop, the follow-up workers and the
// distribution passes). NextOffer is named by its outcome.
type timedDispatchOrders struct {
	dispatch.Orders
	s *stages
}

// timedDispatchMasters times the masters store's reads of the same.
type timedDispatchMasters struct {
	dispatch.Masters
	s *stages
}

var outcomeNames = map[dispatch.Outcome]string{
	dispatch.Offered: "offered", dispatch.Busy: "busy", dispatch.NotSearching: "not searching",
	dispatch.Unassignable: "unassignable", dispatch.StillUnassignable: "still unassignable",
	dispatch.AfterHours: "after hours", dispatch.Taken: "taken",
}

func (r timedDispatchOrders) ExpireOffers(ctx context.Context, by string, tell domain.Render[dispatch.Changed]) ([]dispatch.Offer, error) {
	defer r.s.since("db ExpireOffers", time.Now())
	return r.Orders.ExpireOffers(ctx, by, tell)
}

func (r timedDispatchOrders) NextOfferExpiry(ctx context.Context) (time.Time, bool, error) {
	defer r.s.since("db NextOfferExpiry", time.Now())
	return r.Orders.NextOfferExpiry(ctx)
}

func (r timedDispatchMasters) Get(ctx context.Context, id int64) (dispatch.Master, error) {
	defer r.s.since("db Master", time.Now())
	return r.Masters.Get(ctx, id)
}

func (r timedDispatchOrders) Get(ctx context.Context, id int64) (dispatch.Order, error) {
	defer r.s.since("db Order", time.Now())
	return r.Orders.Get(ctx, id)
}

func (r timedDispatchOrders) Searching(ctx context.Context, limit int, pass dispatch.Pass, by string, gate dispatch.Gate) ([]int64, error) {
	defer r.s.since("db SearchingOrders", time.Now())
	return r.Orders.Searching(ctx, limit, pass, by, gate)
}

func (r timedDispatchOrders) NextOffer(ctx context.Context, orderID int64, sla time.Duration, gate dispatch.Gate, tell domain.Render[dispatch.Changed]) (dispatch.Offer, dispatch.Order, dispatch.Outcome, error) {
	return r.offerStep(r.Orders.NextOffer, ctx, orderID, sla, gate, tell)
}

func (r timedDispatchOrders) NextOwedOffer(ctx context.Context, orderID int64, sla time.Duration, gate dispatch.Gate, tell domain.Render[dispatch.Changed]) (dispatch.Offer, dispatch.Order, dispatch.Outcome, error) {
	return r.offerStep(r.Orders.NextOwedOffer, ctx, orderID, sla, gate, tell)
}

// offerStep times NextOffer and NextOwedOffer, the same step, under one
// stage per outcome; "taken" tells the owed steps that found their order
// settled by another.
func (r timedDispatchOrders) offerStep(step func(context.Context, int64, time.Duration, dispatch.Gate, domain.Render[dispatch.Changed]) (dispatch.Offer, dispatch.Order, dispatch.Outcome, error),
	ctx context.Context, orderID int64, sla time.Duration, gate dispatch.Gate, tell domain.Render[dispatch.Changed]) (dispatch.Offer, dispatch.Order, dispatch.Outcome, error) {
	start := time.Now()
	f, o, out, err := step(ctx, orderID, sla, gate, tell)
	r.s.since("db NextOffer ("+r.outcome(out, err)+")", start)
	return f, o, out, err
}

// outcome names a step's outcome for its stage.
func (timedDispatchOrders) outcome(out dispatch.Outcome, err error) string {
	if err != nil {
		return "error"
	}
	return outcomeNames[out]
}

// reset forgets what was timed so far, so that a second run is timed alone.
func (s *stages) reset() {
	s.mu.Lock()
	s.total = map[string]time.Duration{}
	s.calls = map[string]int{}
	s.mu.Unlock()
}

// timedAnalysisRuns times the runs store's calls of the analysis executor
// (and of Start and Serve). Each is one statement except SaveProposalBatch (a
// transaction: the run's counters, then the proposals and their sources in
// one pipelined batch).
type timedAnalysisRuns struct {
	analysis.Runs
	s *stages
}

// timedAnalysisChats times the executor's read of its window.
type timedAnalysisChats struct {
	analysis.Chats
	s *stages
}

func (r timedAnalysisRuns) Start(ctx context.Context, id int64, rag bool, lease time.Duration, render domain.Render[analysis.Review]) (analysis.Run, bool, error) {
	defer r.s.since("db StartAnalysisRun", time.Now())
	return r.Runs.Start(ctx, id, rag, lease, render)
}

func (r timedAnalysisChats) Window(ctx context.Context, runID int64, from, to time.Time, chatID int64) ([]analysis.GroupMessage, error) {
	defer r.s.since("db WindowGroupMessages", time.Now())
	return r.Chats.Window(ctx, runID, from, to, chatID)
}

// SetProgress, SaveProposalBatch and Complete include the rendering of their
// messages and writing them to the outbox, in the same transaction.
func (r timedAnalysisRuns) SetProgress(ctx context.Context, id int64, messages, filtered, batches int, render domain.Render[analysis.Review]) (analysis.Run, error) {
	defer r.s.since("db SetAnalysisProgress", time.Now())
	return r.Runs.SetProgress(ctx, id, messages, filtered, batches, render)
}

func (r timedAnalysisRuns) SaveProposalBatch(ctx context.Context, runID int64, batch, messages int, ps []analysis.Proposal, render domain.Render[analysis.Review]) (analysis.Run, []analysis.Proposal, error) {
	defer r.s.since("db SaveProposalBatch", time.Now())
	return r.Runs.SaveProposalBatch(ctx, runID, batch, messages, ps, render)
}

func (r timedAnalysisRuns) Complete(ctx context.Context, id int64, render domain.Render[analysis.Review]) (analysis.Run, bool, error) {
	defer r.s.since("db CompleteAnalysisRun", time.Now())
	return r.Runs.Complete(ctx, id, render)
}

func (r timedAnalysisRuns) RenewLease(ctx context.Context, id int64, lease time.Duration) (bool, error) {
	defer r.s.since("db RenewAnalysisLease", time.Now())
	return r.Runs.RenewLease(ctx, id, lease)
}

func (r timedAnalysisRuns) SimilarProposals(ctx context.Context, runID int64, v []float32, k int) ([]analysis.Proposal, error) {
	defer r.s.since("db SimilarProposals", time.Now())
	return r.Runs.SimilarProposals(ctx, runID, v, k)
}

type timedAnalysisLLM struct {
	analysis.LLM
	s *stages
}

func (t timedAnalysisLLM) JSON(ctx context.Context, system, prompt string, out any) error {
	defer t.s.since("llm proposals", time.Now())
	return t.LLM.JSON(ctx, system, prompt, out)
}

func (t timedAnalysisLLM) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	defer t.s.since("llm embed", time.Now())
	return t.LLM.Embed(ctx, texts)
}

// timedAnalysisNotifier times the bot's rendering (called inside the
// repository's transactions, so also part of the db stages). Event
// includes, for run_completed, the final edit of the run's board.
// Nothing is sent here: the outbox's senders deliver the messages.
type timedAnalysisNotifier struct {
	analysis.Notifier
	s *stages
}

func (t timedAnalysisNotifier) Event(e analysis.Event) []domain.Message {
	defer t.s.since("render Event", time.Now())
	return t.Notifier.Event(e)
}

func (t timedAnalysisNotifier) Board(rv analysis.Review, first bool) []domain.Message {
	defer t.s.since("render Board", time.Now())
	return t.Notifier.Board(rv, first)
}

// timedPublisher times pg_notify('analysis_runs', …): one statement, a
// commit of its own.
type timedPublisher struct {
	analysis.Publisher
	s *stages
}

func (t timedPublisher) Publish(ctx context.Context, payload string) error {
	defer t.s.since("db NotifyAnalysisRuns (pg_notify)", time.Now())
	return t.Publisher.Publish(ctx, payload)
}

// timedOutbox times the outbox sender's statements (-stages of the
// vacancies bench): the sender's goroutines, not the workers, spend this
// time, so its share of the workers' budget is only a scale.
type timedOutbox struct {
	delivery.Store
	s *stages
}

func (o timedOutbox) Claim(ctx context.Context, claimer string, n int, lease time.Duration) ([]domain.Queued, error) {
	defer o.s.since("outbox claim", time.Now())
	return o.Store.Claim(ctx, claimer, n, lease)
}

func (o timedOutbox) Delivered(ctx context.Context, r domain.Queued, messageID int) (bool, error) {
	defer o.s.since("outbox delivered", time.Now())
	return o.Store.Delivered(ctx, r, messageID)
}

func (o timedOutbox) Retry(ctx context.Context, id int64, token string, after time.Duration, why string, tried bool) error {
	defer o.s.since("outbox retry", time.Now())
	return o.Store.Retry(ctx, id, token, after, why, tried)
}
