package memory

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"

	"switchboard/domain"
)

// PipelineRun is one private message's way through the pipeline (a
// pipeline_runs row); Service.Run is the orchestrator that moves them.
type PipelineRun struct {
	ID        int64
	UserID    int64
	ChatID    int64
	MessageID int
	Query     string
	Status    Status
	// Change holds what the steps have written so far: the analysis, the
	// contexts, the answer or the error, and whether a placeholder message
	// shows the answer as it was written (drafts refused; the final
	// answer replaces it).
	Change
	Attempts    int
	DeliveredAt time.Time
	ArchivedAt  time.Time
	CreatedAt   time.Time
	// Lang is the user's language, for what the bot writes.
	Lang string
	// TimeZone and MasterCity are the user's (domain.User), for the zone
	// the models are given times in (Notifier.Zone).
	TimeZone   string
	MasterCity string
	// Incognito: taken in while the user's incognito was on; it is
	// answered but leaves no memory (Runs.ArchiveIncognito).
	Incognito bool
}

// Change is what a transition writes besides the status.
type Change struct {
	Analysis     *Analysis
	DraftContext string
	FinalContext string
	FinalAnswer  string
	ErrorMessage string
	// Placeholder reports that the answer was streamed into a placeholder
	// message (Runs.QueuePlaceholder stored it already); the step
	// renders the final answer as its edit.
	Placeholder bool
	// Stopped: the user stopped the answer while it was written
	// (Service.Stop); FinalAnswer is what was written by then, maybe
	// nothing. Read back, a run the user asked to stop.
	Stopped bool
}

// Summary is one lsm_storage record: a memory.
type Summary struct {
	ID           int64
	BucketStart  time.Time
	BucketEnd    time.Time
	Tags         []string
	Summary      string
	SourceRunIDs []int64
	CreatedAt    time.Time
	// InvalidAt is when a later memory (SupersededBy) replaced this one;
	// zero while it is current, the only state answers read.
	InvalidAt    time.Time
	SupersededBy int64
	// Supersedes are the memories this one replaced: read from storage
	// for a page of /memory; given to Runs.Archive, the user's
	// current ones the archivist said the exchange contradicts.
	Supersedes []int64
}

// reader is the run's user as Notifier.Zone reads them.
func (r PipelineRun) reader() domain.User {
	return domain.User{ID: r.UserID, Language: r.Lang, TimeZone: r.TimeZone, MasterCity: r.MasterCity}
}

// Current says whether the memory is still true (not superseded).
func (m Summary) Current() bool { return m.InvalidAt.IsZero() }

// LogEntry is one raw_logs record: a query or an answer.
type LogEntry struct {
	Type      string // "query" or "answer"
	Text      string
	RunID     int64
	CreatedAt time.Time
}

// Prompt is one version of a role's system prompt.
type Prompt struct {
	Role      string
	Template  string
	Version   int
	Active    bool
	UpdatedAt time.Time
}

// Roles whose prompts live in system_prompts.
var Roles = []string{"analyzer", "assembler", "mentor", "archivist"}

// Forgotten counts what /forget erased: everything of the user's in every
// workflow, not the memory chat's alone (storage/forget.go says what each
// table gives up, README "Forgetting a user" why).
type Forgotten struct {
	// The memory chat: runs, raw logs (messages and answers), summaries.
	Runs, Logs, Summaries int
	// Vacancies: saved searches, ban words, matches (every state).
	Searches, BanWords, Matches int
	// Group messages they wrote: the text, name and id erased (cited ones
	// kept blank, so proposals made from them keep their sources) or the
	// row deleted.
	GroupMessages int
	// Outbox rows addressed to their private chat, sent or waiting.
	Messages int
	// Master: their master record is referenced by orders or offers, so it
	// is kept detached (no name, paused, city and skills erased) with the
	// users row it hangs on; Orders counts the orders assigned to them.
	MasterKept bool
	Orders     int
}

// Held is what /forget would erase, so its confirmation names only that.
type Held struct {
	// Memory: runs, raw logs or summaries of the memory chat.
	Memory bool
	// JobSearch: a profile, saved searches, ban words or matches.
	JobSearch bool
	// GroupMessages: messages they wrote in the groups the bot reads.
	GroupMessages bool
	// Master: a master record; MasterKept: one that orders or offers
	// name, so it would be kept detached (see Forgotten.MasterKept).
	Master, MasterKept bool
}

// ErrAlreadyForgotten: the user confirmed /forget for a users row that is
// gone or was made anew since (a second press of the confirm button, on
// any replica); nothing was erased again.
var ErrAlreadyForgotten = errors.New("already forgotten")

// Ref names a run to look at, as a notification or a sweep gives it.
type Ref struct {
	ID     int64
	UserID int64
	Status Status
}

// Recall is what a stage reads of the user's memory: their raw logs from
// before the run (newest first, the run's own query and anything the user
// wrote after it left out) and their latest summaries (newest first).
type Recall struct {
	Logs      []LogEntry
	Summaries []Summary
	// Read says the summaries were read (there may be none); the archivist
	// then offers these rather than reading them again.
	Read bool
}

// RecallSize asks a capture to read the user's memory in the same round
// trip: at most Logs raw logs and Summaries summaries; zero reads nothing.
type RecallSize struct{ Logs, Summaries int }

// Step moves a run out of the stage it is in: From → To, storing the
// stage's output.
//
// With Then set, the worker goes straight on to the next stage: the run is
// captured To → Then in the same transaction (one commit, both status
// changes notified), so nobody else has to be woken for it.
//
// Hold is the lease the run keeps afterwards: the next stage's capture, or
// the finishing claim of a COMPLETED or FAILED run that this worker goes on
// to deliver. Zero releases the run, and its notification sends whichever
// orchestrator is free (a stage handed back on a stop).
//
// A step into COMPLETED or FAILED also queues what the user is told:
// Tell's messages (the answer, or the failure notice, as the Notifier
// renders them from the run the step leaves) go into the outbox in the
// same commit, which records delivered_at
// ("the answer is queued", once: the step names the status it leaves and
// a NULL delivered_at). The outbox's senders deliver them in order.
//
// Steps, like captures, the delivery mark and the archive, commit without
// waiting for the disk (synchronous_commit off for their transaction): a
// database crash can lose the last fraction of a second of them, which
// makes a run repeat a stage and queue its answer again (its rows were
// lost with the step, but a sender may have delivered them in that
// fraction of a second). Only intake, the user's message, waits until it
// is durable.
type Step struct {
	From, To Status
	Change   Change
	Then     Status
	Hold     time.Duration
	// Tell is what the step tells (see domain.Render): the step is one
	// statement, so its messages are rendered before it (domain.Fixed).
	Tell domain.Render[PipelineRun]
}

// Runs is the memory chat's runs: a run's way through the pipeline
// (service.go, pipeline.go), the orchestrator's sweep (orchestrator.go)
// and the closing of incognito runs; storage.PipelineRuns implements it.
type Runs interface {
	// Submit is intake; it returns once the message is durable.
	Submit(ctx context.Context, userID, chatID int64, messageID int, query string) (PipelineRun, int, error)
	// RequestStop marks the user's RESPONDING run as stopped by them and
	// tells every replica (a stop event on Channel); false if there is no
	// such run.
	RequestStop(ctx context.Context, id, userID int64) (bool, error)
	// Capture starts a stage: from → to with a lease, reading the user's
	// memory as asked.
	Capture(ctx context.Context, id int64, from, to Status, lease time.Duration, claimer string, recall RecallSize) (PipelineRun, Recall, bool, error)
	// Step applies st; false if the run was not in st.From.
	Step(ctx context.Context, id int64, st Step) (bool, error)
	// GiveBack returns a run captured in from to the status before it,
	// counting the return in Attempts as Reap does; false if the run was
	// not in from.
	GiveBack(ctx context.Context, id int64, from Status) (bool, error)
	// Get reads a run as it is now.
	Get(ctx context.Context, id int64) (PipelineRun, error)
	ClaimFinished(ctx context.Context, id int64, lease time.Duration, claimer string) (PipelineRun, bool, error)
	// MarkDelivered queues tell's messages (the answer or the failure
	// notice, domain.Fixed: one statement) and
	// records delivered_at, in one statement, for a finished run whose
	// step did not (FAILED by the reaper); false, and nothing queued, if
	// delivered_at was set already.
	MarkDelivered(ctx context.Context, id int64, tell domain.Render[PipelineRun]) (bool, error)
	// Archive stores the summary (if any) and archived_at of a COMPLETED
	// run whose answer is queued, releases the run and returns the user's
	// next NEW run (ID 0 if none); false if it was archived already (or
	// its answer is not queued yet).
	Archive(ctx context.Context, id int64, s *Summary) (next Ref, archived bool, err error)
	// ArchiveIncognito closes a finished incognito run whose answer (or
	// failure notice) is queued, erasing its texts and its raw logs, and
	// returns the user's next NEW run (ID 0 if none); false if it was
	// closed and erased already.
	ArchiveIncognito(ctx context.Context, id int64) (next Ref, ok bool, err error)
	Release(ctx context.Context, id int64) error
	// QueuePlaceholder queues the placeholder message of a RESPONDING
	// run's answer and marks the run as having one, in one statement;
	// false, and nothing queued, if the run has left RESPONDING or has its
	// placeholder already.
	QueuePlaceholder(ctx context.Context, id int64, msgs []domain.Message) (bool, error)
	// TellWaiting queues the notice that a run captured in status waits
	// for the model, and marks the run as told, in one statement; false,
	// and nothing queued, if it was told already or has left status.
	TellWaiting(ctx context.Context, id int64, status Status, msgs []domain.Message) (bool, error)
	Next(ctx context.Context, userID int64) (Ref, bool, error)
	// Open, Reap and Backlog are the orchestrator's sweep.
	Open(ctx context.Context, limit int) ([]Ref, error)
	Reap(ctx context.Context, maxReaps int) (returned, failed []Ref, err error)
	Backlog(ctx context.Context) (int, error)
}

// Memories is the long-term memory: what the archivist is offered, and
// what the user sees, corrects and deletes (memories.go), exports and
// keeps out of it (/export and /incognito, export.go); storage.Memories
// implements it. Every method acts on the user's own memories only: an
// id of anyone else's is as good as absent.
type Memories interface {
	// Summaries lists the user's current memories, newest first.
	Summaries(ctx context.Context, userID int64, limit int) ([]Summary, error)
	// Page is a page of the user's current memories, newest first,
	// each with the ids it superseded, and how many current ones there are.
	Page(ctx context.Context, userID int64, offset, limit int) ([]Summary, int, error)
	// Versions lists the user's memories, current and superseded,
	// newest first.
	Versions(ctx context.Context, userID int64, limit int) ([]Summary, error)
	// History is the version chain of one of the user's memories:
	// the current version and every one it replaced, newest first; empty
	// if there is no such memory of theirs.
	History(ctx context.Context, userID, id int64) ([]Summary, error)
	// Delete deletes the whole version chain of each of the
	// user's memories named and every copy of their text (see Erased).
	Delete(ctx context.Context, userID int64, ids []int64) (Erased, error)
	// AskCorrection records that the user's next text corrects the
	// memory (replacing any correction waiting), until ttl passes; false
	// if it is not one of their current memories.
	AskCorrection(ctx context.Context, userID, id int64, ttl time.Duration) (Summary, bool, error)
	// CancelCorrection drops the correction of that memory waiting;
	// false if none was.
	CancelCorrection(ctx context.Context, userID, id int64) (bool, error)
	// CorrectionWaiting says whether a correction waits for the
	// user's text (expired ones do not).
	CorrectionWaiting(ctx context.Context, userID int64) (bool, error)
	// TakeCorrection consumes the correction waiting, if any, and
	// saves fix as the new current version of its memory, the old one
	// superseded, in one transaction. The version names messageID, the
	// private message it came from: that message again returns the
	// version it saved and changes nothing.
	TakeCorrection(ctx context.Context, userID int64, messageID int, fix Summary) (Correction, error)
	// AskForget records the memories a "forget what I told you
	// about X" found, for the confirmation's button, until ttl passes,
	// and returns the request and the ids it names. The request names
	// messageID, the private message that asked (0: none): that message
	// again returns the request it made, as made, and records nothing.
	AskForget(ctx context.Context, userID int64, messageID int, ids []int64, ttl time.Duration) (int64, []int64, error)
	// Forget consumes that request and deletes its memories as
	// Delete does, in one transaction; false if it is gone or
	// expired.
	Forget(ctx context.Context, userID, requestID int64) (Erased, bool, error)
	// DropForgetRequest drops the request unanswered; false if it is gone.
	DropForgetRequest(ctx context.Context, userID, requestID int64) (bool, error)
	// RequestExport queues tell's messages (the export's files, built
	// when they are sent) if the user has anything to export and their last
	// export is at least every old, recording the request in the same
	// statement. messageID is the command's, so a command handled twice
	// queues once.
	RequestExport(ctx context.Context, userID int64, messageID int, every time.Duration, tell []domain.Message) (ExportRequest, error)
	// Export reads what an export asked for at asOf holds, the
	// conversation's newest messages whose texts fit textBudget bytes.
	Export(ctx context.Context, userID int64, asOf time.Time, textBudget int) (Export, error)
	// SetIncognito turns incognito on or off (set), or toggles it
	// (nil), once per command message.
	SetIncognito(ctx context.Context, userID int64, messageID int, set *bool) (Incognito, error)
}

// Prompts is the system prompts (service.go, pipeline.go);
// storage.Prompts implements it.
type Prompts interface {
	Active(ctx context.Context, role string) (Prompt, error)
	ActiveAll(ctx context.Context) (map[string]string, error)
	// Set makes template the role's active version, unless the active
	// one says it already; by, the /prompt message, once: that message
	// again returns the version it set and changes nothing.
	Set(ctx context.Context, role, template string, by domain.MessageRef) (Prompt, error)
}

// UserStore is /forget and what it would erase (service.go);
// storage.Users implements it.
type UserStore interface {
	// Forget erases the user if their users row is still the one
	// created at known (else ErrAlreadyForgotten).
	Forget(ctx context.Context, userID int64, known time.Time) (Forgotten, error)
	Held(ctx context.Context, userID int64) (Held, error)
}

// Outbox is the outbox as the chat uses it beside a run's own statements;
// storage.Outbox implements it.
type Outbox interface {
	// EnqueueAsync writes messages to the outbox with no state change
	// (the note that a message waits behind others), committed without
	// waiting for the disk: a note lost in a crash only goes unsaid.
	EnqueueAsync(ctx context.Context, msgs []domain.Message) error
}

// Call is one LLM request as the pipeline makes it.
type Call = domain.LLMCall

// LLM is the model as this workflow needs it (*llm.Client is it). Its
// errors are the domain's LLM classes (domain.ErrLLMInvalidAnswer,
// ErrLLMTimeout, ErrLLMBusy, ErrLLMRefused, ErrLLMDown) where they apply;
// the pipeline's error policy treats those apart.
type LLM interface {
	Text(ctx context.Context, c Call) (string, error)
	JSON(ctx context.Context, c Call, out any) error
}

// Notifier renders what a run tells its chat; the bot's renderer
// implements it. It only renders: the messages are queued with the state
// change that causes them (Step.Tell, Runs.MarkDelivered), and
// the outbox's senders deliver them.
type Notifier interface {
	// Answer renders the final answer, the first message a reply to the
	// user's message.
	Answer(r PipelineRun) []domain.Message
	// Failed renders the notice that this message could not be answered
	// and may be sent again.
	Failed(r PipelineRun) []domain.Message
	// Waiting renders the notice that the model is not answering and this
	// message will be answered once it is back, a reply to it.
	Waiting(r PipelineRun) []domain.Message
	// Partial renders the answer so far (the model's Markdown) where
	// drafts are refused: the placeholder message when first, else its
	// edit. Answer and Failed replace it when r.Placeholder.
	Partial(r PipelineRun, text string, first bool) []domain.Message
	// Zone is the zone the user reads times in, the one /timezone shows
	// them: the models are given times in it, so that the user's
	// "yesterday evening" is their evening.
	Zone(u domain.User) *time.Location
}

// Typist shows "typing…" in a chat while a run works: cosmetic, sent at
// once and its error ignored (the Telegram client implements it).
type Typist interface {
	Typing(ctx context.Context, chatID int64) error
}

// Config tunes the pipeline; zero values take the defaults.
type Config struct {
	// Workers bounds the runs this replica works on at once.
	Workers int
	// StageLease is how long a captured stage may take before the reaper returns it.
	StageLease time.Duration
	// Claimer names this replica in its captures (storage.Liveness): once
	// it is seen dead, its stages' leases end at once and the reaper is
	// woken. Empty: only StageLease ends them.
	Claimer string
	// MaxReaps is how often a run may be returned before it FAILS.
	MaxReaps int
	// SweepInterval re-reads unfinished runs even without notifications.
	SweepInterval time.Duration
	// ResponderTimeout, ResponderMaxTokens and ResponderTemperature are
	// the final responder's settings (30 s, 2000, 0.7).
	ResponderTimeout     time.Duration
	ResponderMaxTokens   int
	ResponderTemperature float64
	// Attempts is how often a timed-out or rate-limited LLM call is tried.
	Attempts int
	// Backoff is the first retry's wait; it doubles, and rate limits wait
	// three times longer.
	Backoff time.Duration
	// ContextTokens is the assembler's input budget (8000).
	ContextTokens int
	// Window is the model's context window in tokens (LLM_NUM_CTX; 0:
	// unknown). The assembler's input is trimmed to fit it with its system
	// prompt and an answer of ResponderMaxTokens, rather than leaving the
	// server to cut the front of the prompt off silently.
	Window int
	// StreamEvery is how often the answer being written is shown (a draft,
	// or a placeholder's edit at most once a second); 0: not streamed, the
	// answer is sent whole.
	StreamEvery time.Duration
}

func (c Config) withDefaults() Config {
	domain.OrDefault(&c.Workers, 8)
	domain.OrDefault(&c.StageLease, 2*time.Minute)
	domain.OrDefault(&c.MaxReaps, 3)
	domain.OrDefault(&c.SweepInterval, 30*time.Second)
	domain.OrDefault(&c.ResponderTimeout, 30*time.Second)
	domain.OrDefault(&c.ResponderMaxTokens, 2000)
	if c.ResponderTemperature == 0 {
		c.ResponderTemperature = 0.7
	}
	domain.OrDefault(&c.Attempts, 3)
	domain.OrDefault(&c.Backoff, time.Second)
	domain.OrDefault(&c.ContextTokens, 8000)
	return c
}

// Deps are the workflow's collaborators.
type Deps struct {
	Runs     Runs
	Memories Memories
	Prompts  Prompts
	Outbox   Outbox
	Users    UserStore
	LLM      LLM
	Notifier Notifier
	// Typist, when set, renews "typing…" for an answer that takes long.
	Typist Typist
	// Drafts, when set, shows a streamed answer as message drafts;
	// without it (or where they are refused) it streams into a placeholder.
	Drafts     Drafts
	Clock      clockwork.Clock
	Log        *slog.Logger
	Registerer prometheus.Registerer
}

// Service is the memory chat: intake and privacy for the bot, the
// orchestrator (Run) and the reaper.
type Service struct {
	cfg  Config
	deps Deps
	log  *slog.Logger
	m    *metrics
	o    *orchestrator

	// prompts caches the active templates for promptTTL: five reads per
	// run otherwise, for text that changes when an admin says so.
	promptMu  sync.Mutex
	prompts   map[string]string
	promptsAt time.Time

	// answering holds the cancel of each answer being written here, by
	// run id, for Stop (and a stop event from another replica) to cut it
	// short. Only a handle: that the run was stopped is in its row.
	answering sync.Map // int64 → context.CancelCauseFunc
}

// promptTTL is how soon a /prompt change reaches runs on every replica.
const promptTTL = 5 * time.Second

// NewService builds the workflow; Run starts the orchestrator.
func NewService(cfg Config, deps Deps) (*Service, error) {
	if deps.Runs == nil || deps.Memories == nil || deps.Prompts == nil || deps.Outbox == nil || deps.Users == nil || deps.LLM == nil || deps.Notifier == nil {
		return nil, errors.New("memory: Runs, Memories, Prompts, Outbox, Users, LLM and Notifier are required")
	}
	m, log, err := domain.Prepare("memory", &deps.Clock, &deps.Log, &deps.Registerer, newMetrics)
	if err != nil {
		return nil, err
	}
	s := &Service{cfg: cfg.withDefaults(), deps: deps, log: log, m: m}
	s.o = newOrchestrator(s)
	return s, nil
}

// MaxQuery bounds one message, in characters (Telegram's own limit).
const MaxQuery = 4096

// ErrEmptyQuery and ErrQueryTooLong refuse a message.
var (
	ErrEmptyQuery   = errors.New("empty query")
	ErrQueryTooLong = errors.New("query too long")
)

// ErrSubmitted is a message captured before (its chat and message id):
// the same update run again after a replica died between the capture and
// the update's done-mark. Its run goes on; nothing is to be done again.
var ErrSubmitted = errors.New("message already submitted")

// Submit is intake: archivist signal 1 (the query into raw_logs) and the NEW
// run, in one transaction. ahead counts this user's earlier runs still
// unfinished: the new one waits for them. A message captured before is
// ErrSubmitted, with its run.
func (s *Service) Submit(ctx context.Context, userID, chatID int64, messageID int, query string) (PipelineRun, int, error) {
	query = strings.TrimSpace(query)
	if query == "" {
		return PipelineRun{}, 0, ErrEmptyQuery
	}
	if utf8.RuneCountInString(query) > MaxQuery {
		return PipelineRun{}, 0, ErrQueryTooLong
	}
	r, ahead, err := s.deps.Runs.Submit(ctx, userID, chatID, messageID, query)
	if errors.Is(err, ErrSubmitted) {
		return r, ahead, ErrSubmitted
	}
	if err != nil {
		return PipelineRun{}, 0, fmt.Errorf("submit: %w", err)
	}
	s.m.submitted.Inc()
	if ahead == 0 {
		s.o.dispatch(Ref{ID: r.ID, UserID: r.UserID, Status: New}) // no need to wait for our own NOTIFY
	}
	return r, ahead, nil
}

// QueueNote queues messages for a user that no state change causes (the
// bot's note that a message waits behind others). Intake does not wait for
// Telegram, nor for its pacing of one chat's messages.
func (s *Service) QueueNote(ctx context.Context, msgs []domain.Message) error {
	if len(msgs) == 0 {
		return nil
	}
	return s.deps.Outbox.EnqueueAsync(ctx, msgs)
}

// Memory returns the user's current memories, newest first.
func (s *Service) Memory(ctx context.Context, userID int64, limit int) ([]Summary, error) {
	return s.deps.Memories.Summaries(ctx, userID, limit)
}

// Forget erases everything of the user's that is theirs alone (see
// Forgotten), once: known is the creation time of the users row the user
// confirmed for, and a row gone or created since means it was done
// (ErrAlreadyForgotten).
func (s *Service) Forget(ctx context.Context, userID int64, known time.Time) (Forgotten, error) {
	return s.deps.Users.Forget(ctx, userID, known)
}

// Held says what Forget would erase of the user's.
func (s *Service) Held(ctx context.Context, userID int64) (Held, error) {
	return s.deps.Users.Held(ctx, userID)
}

// ErrUnknownRole: not one of Roles.
var ErrUnknownRole = errors.New("unknown prompt role")

// MaxPrompt bounds a system prompt, in characters.
const MaxPrompt = 8000

// Prompt returns the active prompt of a role.
func (s *Service) Prompt(ctx context.Context, role string) (Prompt, error) {
	if !slices.Contains(Roles, role) {
		return Prompt{}, ErrUnknownRole
	}
	return s.deps.Prompts.Active(ctx, role)
}

// SetPrompt stores a new active version of a role's prompt; the old ones
// stay, inactive. by is the admin's /prompt message: handled again, it
// returns the version it set (Active false if another has been set since).
func (s *Service) SetPrompt(ctx context.Context, role, template string, by domain.MessageRef) (Prompt, error) {
	if !slices.Contains(Roles, role) {
		return Prompt{}, ErrUnknownRole
	}
	template = strings.TrimSpace(template)
	if template == "" {
		return Prompt{}, ErrEmptyQuery
	}
	if utf8.RuneCountInString(template) > MaxPrompt {
		return Prompt{}, ErrQueryTooLong
	}
	p, err := s.deps.Prompts.Set(ctx, role, template, by)
	if err == nil {
		s.promptMu.Lock()
		s.prompts = nil // this replica sees it at once
		s.promptMu.Unlock()
	}
	return p, err
}

// step applies st to r after checking it against the transition table.
func (s *Service) step(ctx context.Context, r PipelineRun, st Step) (PipelineRun, bool, error) {
	for _, t := range [][2]Status{{st.From, st.To}, {st.To, st.Then}} {
		if t[1] == "" {
			continue
		}
		if err := checkTransition(t[0], t[1]); err != nil {
			s.log.Error("refused pipeline transition", "run", r.ID, "from", t[0], "to", t[1])
			return r, false, err
		}
	}
	// A save the database refused is retried (saveRetries): the step names
	// the status it leaves, so a second attempt after a first that did
	// land is refused, never applied twice.
	var ok, unsure bool
	err := s.retrySave(ctx, "step run", r.ID, func(ctx context.Context) error {
		var err error
		if ok, err = s.deps.Runs.Step(ctx, r.ID, st); err != nil {
			unsure = true
		}
		return err
	})
	if err == nil && !ok && unsure {
		// An attempt whose answer was lost (the connection dropped after
		// the commit) may have landed: the run is then where this step
		// leaves it, held by us — nobody else could have moved it there
		// within the lease we hold — so carry on rather than wait it out.
		if cur, rerr := s.deps.Runs.Get(ctx, r.ID); rerr == nil && cur.Status == r.apply(st).Status {
			ok = true
		}
	}
	if err != nil || !ok {
		return r, false, err
	}
	moved := r.apply(st)
	if moved.Status.Final() {
		moved.DeliveredAt = s.deps.Clock.Now() // the step queued what the user is told
	}
	return moved, true, nil
}

// apply is r as a step leaves it (what Runs.Step wrote).
func (r PipelineRun) apply(st Step) PipelineRun {
	r.Status = st.To
	if st.Then != "" {
		r.Status = st.Then
	}
	ch := st.Change
	if ch.Analysis != nil {
		r.Analysis = ch.Analysis
	}
	r.Placeholder = r.Placeholder || ch.Placeholder
	r.Stopped = r.Stopped || ch.Stopped
	for _, f := range []struct {
		dst *string
		v   string
	}{{&r.DraftContext, ch.DraftContext}, {&r.FinalContext, ch.FinalContext},
		{&r.FinalAnswer, ch.FinalAnswer}, {&r.ErrorMessage, ch.ErrorMessage}} {
		if f.v != "" {
			*f.dst = f.v
		}
	}
	return r
}

// recallFor is what each capture reads of the user's memory: the analyzer
// and the draft builder need it, the responder works from the final context.
var recallFor = map[Status]RecallSize{
	New:      {Logs: draftLogs, Summaries: analyzerSummaries},
	Analyzed: {Logs: draftLogs, Summaries: analyzerSummaries},
}

// captureOf is the stage a waiting status is captured for: capturing
// read the other way.
var captureOf = func() map[Status]Status {
	m := make(map[Status]Status, len(capturing))
	for working, waiting := range capturing {
		m[waiting] = working
	}
	return m
}()

// capture starts the stage ref waits for, if nobody else did.
func (s *Service) capture(ctx context.Context, ref Ref) (PipelineRun, Recall, bool, error) {
	to := captureOf[ref.Status]
	if err := checkTransition(ref.Status, to); err != nil {
		return PipelineRun{}, Recall{}, false, err
	}
	r, rc, ok, err := s.deps.Runs.Capture(ctx, ref.ID, ref.Status, to, s.cfg.StageLease, s.cfg.Claimer, recallFor[ref.Status])
	if err != nil {
		return r, rc, false, fmt.Errorf("capture run %d %s → %s: %w", ref.ID, ref.Status, to, err)
	}
	return r, rc, ok, nil
}
