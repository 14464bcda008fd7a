package main

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/prometheus/client_golang/prometheus"

	"switchboard/bot"
	"switchboard/domain"
	"switchboard/domain/memory"
	"switchboard/llm"
	"switchboard/llm/llmtest"
	"switchboard/locales"
)

// memoryEvalSet is the evaluation set shipped with the project
// (bench/evalset/memory.json); -set reads another in its shape.
//
//go:embed evalset/memory.json
var memoryEvalSet []byte

// evalSet is a memory-quality evaluation set: conversations of several
// sessions, then questions whose answers need what was said.
type evalSet struct {
	Version       int                `json:"version"`
	Conversations []evalConversation `json:"conversations"`
}

type evalConversation struct {
	ID        string         `json:"id"`
	Language  string         `json:"language"`
	Sessions  [][]string     `json:"sessions"`
	Questions []evalQuestion `json:"questions"`
}

// evalQuestion is judged by keywords: every Expect entry (alternatives
// separated by "|") must be in the answer, no Reject entry may be;
// case-folded.
type evalQuestion struct {
	Kind   string   `json:"kind"`
	Q      string   `json:"q"`
	Expect []string `json:"expect"`
	Reject []string `json:"reject"`
}

// questionKinds are the kinds in the order the table prints them.
var questionKinds = []string{"single-hop", "multi-hop", "temporal", "contradiction"}

func loadEvalSet(path string) (evalSet, error) {
	raw := memoryEvalSet
	if path != "" {
		var err error
		if raw, err = os.ReadFile(path); err != nil {
			return evalSet{}, fmt.Errorf("evaluation set: %w", err)
		}
	}
	var set evalSet
	if err := json.Unmarshal(raw, &set); err != nil {
		return evalSet{}, fmt.Errorf("evaluation set: %w", err)
	}
	if set.Version != 1 || len(set.Conversations) == 0 {
		return evalSet{}, fmt.Errorf("evaluation set: want version 1 with conversations, got version %d with %d", set.Version, len(set.Conversations))
	}
	for _, c := range set.Conversations {
		if !locales.Supported(c.Language) {
			return evalSet{}, fmt.Errorf("evaluation set: conversation %q: language %q", c.ID, c.Language)
		}
		for _, q := range c.Questions {
			if !slices.Contains(questionKinds, q.Kind) || q.Q == "" || len(q.Expect) == 0 {
				return evalSet{}, fmt.Errorf("evaluation set: conversation %q: question %q needs a kind (%s), text and expect",
					c.ID, q.Q, strings.Join(questionKinds, ", "))
			}
		}
	}
	return set, nil
}

type memoryQualityConfig struct {
	commonFlags
	set                          string
	provider, url, model, strong string
	timeout                      time.Duration
	judge                        string
	stream                       time.Duration
	answerTimeout                time.Duration
}

func (cfg *memoryQualityConfig) define(fs *flag.FlagSet) {
	fs.StringVar(&cfg.set, "set", "", "an evaluation set in bench/evalset/memory.json's shape (default: that one, built in)")
	fs.StringVar(&cfg.url, "llm-url", os.Getenv("LLM_URL"), "the model's server (LLM_URL); empty: the scripted model, which proves the plumbing")
	fs.StringVar(&cfg.provider, "llm-provider", envOr("LLM_PROVIDER", "ollama"), "ollama or openai (LLM_PROVIDER)")
	fs.StringVar(&cfg.model, "llm-model", os.Getenv("LLM_MODEL"), "the model of the analyzer, assembler and archivist (LLM_MODEL)")
	fs.StringVar(&cfg.strong, "llm-strong-model", os.Getenv("LLM_STRONG_MODEL"), "the responder's model (LLM_STRONG_MODEL; default -llm-model)")
	fs.DurationVar(&cfg.timeout, "llm-timeout", 2*time.Minute, "one LLM call's timeout")
	fs.StringVar(&cfg.judge, "judge", "keywords", "keywords (every expected fact in the answer, no rejected one) or llm (the model grades each answer against the expected facts, as LoCoMo's LLM judge does)")
	fs.DurationVar(&cfg.stream, "stream-every", time.Second, "MEMORY_STREAM_EVERY: answers stream, and the time to the first shown text is measured")
	fs.DurationVar(&cfg.answerTimeout, "answer-timeout", 5*time.Minute, "give up on one message not answered and archived after this long")
}

func (cfg *memoryQualityConfig) resolve() string {
	switch {
	case cfg.judge != "keywords" && cfg.judge != "llm":
		return "-judge must be keywords or llm"
	case cfg.url == "" && cfg.judge == "llm":
		return "-judge llm needs a real model (-llm-url)"
	case cfg.url != "" && cfg.model == "":
		return "-llm-url needs -llm-model"
	case cfg.provider != llm.ProviderOllama && cfg.provider != llm.ProviderOpenAI:
		return "-llm-provider must be ollama or openai"
	case cfg.timeout <= 0 || cfg.answerTimeout <= 0 || cfg.stream < 0:
		return "-llm-timeout and -answer-timeout must be positive, -stream-every not negative"
	}
	return ""
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// memoryQualityReport is the scenario's JSON line.
type memoryQualityReport struct {
	Scenario  string             `json:"scenario"`
	Model     string             `json:"model"`
	Judge     string             `json:"judge"`
	Questions int                `json:"questions"`
	Correct   int                `json:"correct"`
	Accuracy  float64            `json:"accuracy"`
	ByKind    map[string]float64 `json:"accuracy_by_kind"`
	// AnswerP50MS and AnswerP95MS: a question's message taken in until its
	// answer is complete; FirstTextP50MS until the first text of the
	// answer was written (what a streamed answer shows first).
	AnswerP50MS    float64 `json:"answer_p50_ms"`
	AnswerP95MS    float64 `json:"answer_p95_ms"`
	FirstTextP50MS float64 `json:"first_text_p50_ms"`
	tail
	scripted bool
}

// goals: with the scripted model every question must be answered right,
// which proves each remembered fact reaches the responder (and a
// superseded one does not); a real model's figures are the finding, with no
// goal.
func (r memoryQualityReport) goals() []goal {
	if !r.scripted {
		return nil
	}
	return []goal{{what: "scripted model: accuracy (the plumbing)", value: r.Accuracy, limit: 1}}
}

// qualityUserBase is the first evaluation user's id.
const qualityUserBase = 900_000_001

func benchMemoryQuality(ctx context.Context, cfg memoryQualityConfig, out io.Writer, log *slog.Logger) (rep memoryQualityReport, err error) {
	set, err := loadEvalSet(cfg.set)
	if err != nil {
		return rep, err
	}
	rep = memoryQualityReport{Scenario: "memory-quality", Judge: cfg.judge, ByKind: map[string]float64{}, scripted: cfg.url == ""}
	db, err := openBenchDB(ctx, cfg.db, log)
	if err != nil {
		return rep, err
	}
	defer db.close(&err)
	rep.setDatabase(db.name)

	lc := llm.Config{Provider: cfg.provider, URL: cfg.url, Model: cfg.model, StrongModel: cfg.strong, APIKey: os.Getenv("LLM_API_KEY"),
		Timeout: cfg.timeout, MaxConcurrency: 2}
	if rep.scripted {
		srv := llmtest.New(llmtest.WithoutRecording())
		defer srv.Close()
		scriptReader(srv)
		lc = llm.Config{Provider: llm.ProviderOllama, URL: srv.URL(), Model: "scripted", StrongModel: "scripted", Timeout: cfg.timeout, MaxConcurrency: 2}
	}
	if lc.StrongModel == "" {
		lc.StrongModel = lc.Model
	}
	rep.Model = lc.StrongModel
	client, err := llm.New(lc, llm.WithRegistry(prometheus.NewRegistry()), llm.WithLogger(log))
	if err != nil {
		return rep, err
	}
	defer client.Close()

	firsts := &firstTexts{at: map[string]time.Time{}}
	svc, err := memory.NewService(memory.Config{Workers: 4, StreamEvery: cfg.stream},
		memory.Deps{Runs: db.store.PipelineRuns(), Memories: db.store.Memories(), Prompts: db.store.Prompts(), Outbox: db.store.Outbox(), Users: db.store.Users(), LLM: firsts.wrap(client),
			Notifier: bot.NewRenderer(bot.RenderConfig{}, locales.MustLoad(), log), Drafts: quietDrafts{},
			Log: log, Registerer: prometheus.NewRegistry()})
	if err != nil {
		return rep, err
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	ready := make(chan struct{}, 1)
	var once sync.Once
	go func() {
		defer close(done)
		svc.Run(runCtx, func(ctx context.Context, ch string, onConnect func(), onNotify func(string)) {
			db.store.Listen(ctx, []string{ch}, func() {
				onConnect()
				once.Do(func() { ready <- struct{}{} })
			}, func(_, payload string) { onNotify(payload) })
		})
	}()
	defer func() { stop(); <-done }()
	if err := awaitListening(ctx, ready, 1, "orchestrator"); err != nil {
		return rep, err
	}

	fmt.Fprintf(out, "memory-quality: database %s, %d conversations, model %s (%s), judge %s\n",
		db.name, len(set.Conversations), rep.Model, lc.Provider, cfg.judge)
	type tally struct{ n, ok int }
	kinds := map[string]*tally{}
	var answerTimes, firstTimes durations
	var wrong []string
	msgID := 0
	for i, conv := range set.Conversations {
		user := int64(qualityUserBase + i)
		if _, err := db.store.Users().Upsert(ctx, domain.User{ID: user, FirstName: conv.ID, Language: conv.Language}); err != nil {
			return rep, err
		}
		say := func(text string) (memory.PipelineRun, time.Duration, error) {
			msgID++
			start := time.Now()
			r, _, err := svc.Submit(ctx, user, user, msgID, text)
			if err != nil {
				return r, 0, fmt.Errorf("conversation %s: %w", conv.ID, err)
			}
			got, err := waitRunArchived(ctx, db, r.ID, cfg.answerTimeout)
			return got, time.Since(start), err
		}
		for _, session := range conv.Sessions {
			for _, text := range session {
				if _, _, err := say(text); err != nil {
					return rep, err
				}
			}
		}
		for _, q := range conv.Questions {
			r, took, err := say(q.Q)
			if err != nil {
				return rep, err
			}
			answerTimes = append(answerTimes, took)
			if at, ok := firsts.first(q.Q); ok {
				firstTimes = append(firstTimes, at.Sub(r.CreatedAt))
			}
			ok := false
			if r.Status == memory.Completed {
				if ok, err = judgeAnswer(ctx, cfg.judge, client, q, r.FinalAnswer); err != nil {
					return rep, err
				}
			}
			t := kinds[q.Kind]
			if t == nil {
				t = &tally{}
				kinds[q.Kind] = t
			}
			t.n++
			if ok {
				t.ok++
			} else {
				wrong = append(wrong, fmt.Sprintf("  %s/%s %q → %s %q", conv.ID, q.Kind, q.Q, r.Status, shorten(r.FinalAnswer, 160)))
			}
		}
	}

	fmt.Fprintf(out, "  %-14s %9s %8s %9s\n", "kind", "questions", "correct", "accuracy")
	for _, k := range questionKinds {
		if t := kinds[k]; t != nil {
			rep.ByKind[k] = float64(t.ok) / float64(t.n)
			rep.Questions += t.n
			rep.Correct += t.ok
			fmt.Fprintf(out, "  %-14s %9d %8d %8.1f%%\n", k, t.n, t.ok, 100*rep.ByKind[k])
		}
	}
	rep.Accuracy = float64(rep.Correct) / float64(max(rep.Questions, 1))
	fmt.Fprintf(out, "  %-14s %9d %8d %8.1f%%\n", "all", rep.Questions, rep.Correct, 100*rep.Accuracy)
	slices.Sort(answerTimes)
	slices.Sort(firstTimes)
	rep.AnswerP50MS, rep.AnswerP95MS = ms(answerTimes.p(0.5)), ms(answerTimes.p(0.95))
	rep.FirstTextP50MS = ms(firstTimes.p(0.5))
	fmt.Fprintf(out, "  answer latency (message taken in → answer complete) p50 %.0f ms, p95 %.0f ms; first text of the answer p50 %.0f ms (%d streamed)\n",
		rep.AnswerP50MS, rep.AnswerP95MS, rep.FirstTextP50MS, len(firstTimes))
	if len(wrong) > 0 {
		fmt.Fprintln(out, "  wrong:")
		for _, w := range wrong {
			fmt.Fprintln(out, w)
		}
	}
	rep.notePeakRSS(out)
	return rep, nil
}

// shorten cuts s to n runes on one line, for the list of wrong answers.
func shorten(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}

// waitRunArchived polls a run until it is archived (or FAILED and told).
func waitRunArchived(ctx context.Context, db *benchDB, id int64, timeout time.Duration) (memory.PipelineRun, error) {
	var r memory.PipelineRun
	err := poll(ctx, 20*time.Millisecond, timeout, func() (bool, error) {
		var err error
		if r, err = db.store.PipelineRuns().Get(ctx, id); err != nil {
			return false, err
		}
		return !r.ArchivedAt.IsZero() || (r.Status == memory.Failed && !r.DeliveredAt.IsZero()), nil
	}, func() error { return fmt.Errorf("run %d is %s after %s", id, r.Status, timeout) })
	return r, err
}

// judgeAnswer grades one answer.
func judgeAnswer(ctx context.Context, how string, client *llm.Client, q evalQuestion, answer string) (bool, error) {
	if how == "keywords" {
		return keywordsJudge(q, answer), nil
	}
	var verdict struct {
		Correct *bool `json:"correct"`
	}
	prompt := fmt.Sprintf("Question: %s\nThe answer must contain: %s\nThe answer must not claim: %s\nAnswer to grade:\n%s\n",
		q.Q, strings.Join(q.Expect, "; "), strings.Join(q.Reject, "; "), answer)
	err := client.JSON(ctx, llm.Request{Label: "memory_quality_judge", System: "You grade answers of a personal assistant. " +
		"An answer is correct when it states every required fact (any of the alternatives separated by |, in any wording or language) " +
		"and does not present a fact it must not claim as current. Reply with JSON {\"correct\": true} or {\"correct\": false}.",
		Prompt: prompt}, &verdict)
	if err != nil || verdict.Correct == nil {
		return false, errors.Join(fmt.Errorf("judge %q", q.Q), err)
	}
	return *verdict.Correct, nil
}

func keywordsJudge(q evalQuestion, answer string) bool {
	a := strings.ToLower(answer)
	for _, want := range q.Expect {
		found := false
		for _, alt := range strings.Split(strings.ToLower(want), "|") {
			if alt = strings.TrimSpace(alt); alt != "" && strings.Contains(a, alt) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	for _, bad := range q.Reject {
		if strings.Contains(a, strings.ToLower(bad)) {
			return false
		}
	}
	return true
}

// firstTexts records when each answer's first text came from the model
// (the streamed responder's first Partial), by the run's message.
type firstTexts struct {
	mu sync.Mutex
	at map[string]time.Time
}

func (f *firstTexts) wrap(l memory.LLM) memory.LLM { return firstTextLLM{l, f} }

func (f *firstTexts) first(query string) (time.Time, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, ok := f.at[query]
	return t, ok
}

type firstTextLLM struct {
	memory.LLM
	f *firstTexts
}

func (l firstTextLLM) Text(ctx context.Context, c memory.Call) (string, error) {
	if c.Partial != nil {
		query := c.Prompt[strings.LastIndex(c.Prompt, "## The user's message\n")+len("## The user's message\n"):]
		query = strings.TrimSpace(query)
		inner := c.Partial
		c.Partial = func(text string) {
			l.f.mu.Lock()
			if _, seen := l.f.at[query]; !seen {
				l.f.at[query] = time.Now()
			}
			l.f.mu.Unlock()
			inner(text)
		}
	}
	return l.LLM.Text(ctx, c)
}

// quietDrafts takes every draft and shows it nowhere: the evaluation
// measures answers, not Telegram.
type quietDrafts struct{}

func (quietDrafts) Draft(context.Context, memory.PipelineRun, string) error { return nil }

// scriptReader scripts the model for the plumbing run: the analyzer asks
// for memory with the question's words as keywords, the archivist keeps
// what the user said, and the responder reads the remembered lines that
// share the most words with the question and answers with them. It is a
// reader, not a reasoner: every fact it answers with must have reached
// its prompt through the pipeline, which is what the run proves.
func scriptReader(srv *llmtest.Server) {
	srv.On(llmtest.SystemContains("Decide whether answering needs that memory")).ReplyFunc(func(r llmtest.Request) string {
		msg := section(r.Prompt, "## New message\n")
		b, _ := json.Marshal(map[string]any{"needs_context": true, "context_type": "facts", "time_scope": "all",
			"search_keywords": stems(msg), "context_found": true})
		return string(b)
	})
	srv.On(llmtest.SystemContains("You prepare the context")).Reply("Answer from the remembered conversations.")
	srv.On(llmtest.SystemContains("You summarise one exchange")).ReplyFunc(func(r llmtest.Request) string {
		said := strings.TrimSpace(section(r.Prompt, "## The user wrote\n"))
		prefix := "The user said: "
		if strings.HasSuffix(said, "?") {
			prefix = "The user asked: "
		}
		b, _ := json.Marshal(map[string]any{"summary": prefix + said, "tags": []string{},
			"supersedes": contradicted(said, section(r.Prompt, "## Remembered about the user now (id: memory)\n"))})
		return string(b)
	})
	srv.On(llmtest.SystemContains("patient, practical mentor")).ReplyFunc(func(r llmtest.Request) string {
		question := stems(section(r.Prompt, "## The user's message\n"))
		type line struct {
			text  string
			score int
		}
		var lines []line
		for _, l := range strings.Split(section(r.Prompt, "## Remembered from earlier conversations\n"), "\n") {
			_, text, ok := strings.Cut(l, "The user said: ")
			if !ok {
				continue
			}
			score := 0
			for _, w := range stems(text) {
				if slices.Contains(question, w) {
					score++
				}
			}
			if score > 0 {
				lines = append(lines, line{text, score})
			}
		}
		if len(lines) == 0 {
			return "I don't remember that."
		}
		sort.SliceStable(lines, func(i, j int) bool { return lines[i].score > lines[j].score })
		var b strings.Builder
		for _, l := range lines[:min(3, len(lines))] {
			b.WriteString("You told me: " + l.text + "\n")
		}
		return b.String()
	})
}

// changeWords say that what the user now says replaces something they said.
var changeWords = []string{"moved", "left", "now", "переех", "теперь", "переїх", "тепер"}

// contradicted is the scripted archivist's judgement: when the user says
// something changed, the remembered memories (lines "- id: text") that
// share two or more words with it are no longer true.
func contradicted(said, remembered string) []int64 {
	low := strings.ToLower(said)
	if !slices.ContainsFunc(changeWords, func(w string) bool { return strings.Contains(low, w) }) {
		return []int64{}
	}
	words := stems(said)
	out := []int64{}
	for _, l := range strings.Split(remembered, "\n") {
		var id int64
		var text string
		if n, _ := fmt.Sscanf(l, "- %d:", &id); n != 1 {
			continue
		}
		_, text, _ = strings.Cut(l, ":")
		shared := 0
		for _, w := range stems(text) {
			if slices.Contains(words, w) {
				shared++
			}
		}
		if shared >= 2 {
			out = append(out, id)
		}
	}
	return out
}

// section is what follows heading in a prompt, up to the next "## ".
func section(prompt, heading string) string {
	_, rest, ok := strings.Cut(prompt, heading)
	if !ok {
		return ""
	}
	if i := strings.Index(rest, "\n## "); i >= 0 {
		rest = rest[:i]
	}
	return rest
}

// readerStop are words too common to tell facts apart.
var readerStop = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`the and did does you your are was were how who for has have had not but
		what which when where that this with from about some there then than into
		как кто что где когда какой какая каком котор сейча меня моего мой моя мои это для
		як хто що де коли який яка якому яких мене мій моя мої для`) {
		m[w] = true
	}
	return m
}()

// stems are a text's words of three letters or more, lower-cased, cut to
// their first five letters (a crude stem, enough for Russian and Ukrainian
// endings), without readerStop.
func stems(s string) []string {
	var out []string
	for _, w := range strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
		if len([]rune(w)) < 3 {
			continue
		}
		if r := []rune(w); len(r) > 5 {
			w = string(r[:5])
		}
		if !readerStop[w] && !slices.Contains(out, w) {
			out = append(out, w)
		}
	}
	return out
}
