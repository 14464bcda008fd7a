package analysis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"

	"switchboard/domain"
)

// GroupMessage is one stored group-chat message, an analysis run's input
// (domain.Message is an outgoing one).
type GroupMessage struct {
	ChatID    int64
	MessageID int64
	AuthorID  int64
	Author    string // display name (first name, or @username)
	Text      string
	Date      time.Time
}

// Ref names a message.
type Ref struct {
	ChatID    int64 `json:"chat_id"`
	MessageID int64 `json:"message_id"`
}

// Chat is a tracked group, for /chats.
type Chat struct {
	ID       int64
	Title    string
	Messages int
	LastAt   time.Time // zero: no message yet
	// CanRead is false when the bot found that privacy mode hides
	// ordinary messages from it.
	CanRead bool
}

// Filters are a run's window and prefilter, from /run_new.
type Filters struct {
	Window   time.Duration `json:"window"`
	ChatID   int64         `json:"chat_id,omitempty"`
	Keywords []string      `json:"keywords,omitempty"` // lower-case
	MinLen   int           `json:"min_len,omitempty"`  // in characters
	Mentions bool          `json:"mentions,omitempty"` // only messages with an @mention
}

// Run is one analysis run.
type Run struct {
	ID        int64
	State     State
	CreatedBy int64
	// The creator's first name and username, for people to read; filled
	// by Runs.Get and Runs.List (empty if the user is gone).
	CreatorName, CreatorUsername string
	Filters                      Filters
	From, To                     time.Time // the window, fixed at /run_new
	RAG                          bool
	StartedAt                    time.Time
	CompletedAt                  time.Time
	ClosedAt                     time.Time
	FailedAt                     time.Time
	ErrorLog                     *ErrorLog
	// Counters, kept by the same statements that change proposals.
	ProposalsTotal    int
	ProposalsPending  int
	ProposalsApproved int
	ProposalsRejected int
	// Progress.
	Messages    int // fetched in the window
	Filtered    int // left after the prefilter
	Batches     int
	BatchesDone int
	Processed   int // messages in finished batches
	// The admin-chat board (progress and review), recorded when the
	// outbox delivers it (zero: not delivered yet).
	ProgressMessageID int
	// The board's review: the page shown (0-based) and whether it asks to
	// confirm "approve all remaining".
	ReviewPage    int
	ReviewConfirm bool
	Metrics       *Metrics
	CreatedAt     time.Time
}

// ErrorLog is what a failed run stores in error_log.
type ErrorLog struct {
	Step  string `json:"step"`
	Batch int    `json:"batch,omitempty"` // 1-based; 0 outside the batch loop
	Error string `json:"error"`
}

// Metrics are stored at close as accuracy_metrics.
type Metrics struct {
	ProposalsTotal int     `json:"proposals_total"`
	ApprovalRate   float64 `json:"approval_rate"`
	RejectionRate  float64 `json:"rejection_rate"`
}

// Proposal is one task an LLM proposed from a batch.
type Proposal struct {
	ID    int64
	RunID int64
	// Ordinal is the proposal's number in its run (1, 2, …, in the order
	// made): the board's pages and the buttons show it.
	Ordinal     int
	Batch       int
	Title       string
	Description string
	Priority    string // low, medium, high
	Assignee    string // empty unless the messages name one
	Deadline    string // YYYY-MM-DD, empty unless the messages state one
	Sources     []Ref
	Decision    Decision
	DecidedBy   int64
	DecidedAt   time.Time
	// The admin-chat message with the buttons, recorded when the outbox
	// delivers it (zero: not delivered yet).
	MessageID int
	// FiledURL and FiledNumber name the issue an approved proposal became
	// in the team's tracker (domain/tasks), once pushed; "" and 0 before,
	// and for a tracker without numbers (a webhook). The board reads them.
	FiledURL    string
	FiledNumber int
	// Like names the open issue of the tracker an approved proposal looks
	// like, while its push waits for an admin to link it there or file it
	// anyway (Number 0: none).
	Like      Filing
	CreatedAt time.Time
}

// Filing is an issue in the team's tracker, as the board names it.
type Filing struct {
	Number int
	URL    string
	Title  string
}

// Chats is the recorded group messages and chats (api.go, the executor's
// window); storage.GroupChats implements it.
type Chats interface {
	SaveMessage(ctx context.Context, m GroupMessage) error
	// EditMessage updates a stored message's text; false if unknown.
	EditMessage(ctx context.Context, chatID, messageID int64, text string) (bool, error)
	// Track records a group the bot is in (title, whether it can read
	// ordinary messages).
	Track(ctx context.Context, id int64, title string, canRead bool) error
	List(ctx context.Context) ([]Chat, error)
	// Window returns the window's messages (of one chat if chatID is not
	// 0) oldest first, leaving out those a proposal of another run
	// already cites.
	Window(ctx context.Context, runID int64, from, to time.Time, chatID int64) ([]GroupMessage, error)
}

// Runs is the analysis runs and their proposals; storage.Runs implements
// it. The state changes take a Render: storage calls it inside the
// change's transaction with the run as the change left it and writes the
// messages it returns to the outbox in that transaction, so they exist
// exactly when the change commits. A nil Render writes nothing.
type Runs interface {
	// The runs' lifecycle and board (api.go, the executor).

	// Create inserts a pending run unless an unclosed run exists, in one
	// statement serialised against concurrent creates; the blocking runs'
	// ids otherwise (and no run, and nothing rendered).
	Create(ctx context.Context, r Run, render domain.Render[Review]) (Run, []int64, error)
	// Get returns one run; domain.ErrNotFound if none.
	Get(ctx context.Context, id int64) (Run, error)
	// List lists runs newest first, with the total count.
	List(ctx context.Context, offset, limit int) ([]Run, int, error)
	// Start moves pending → running, sets started_at, rag and the
	// executor's lease; ok false (with the run as it is) otherwise.
	Start(ctx context.Context, id int64, rag bool, lease time.Duration, render domain.Render[Review]) (Run, bool, error)
	// RenewLease extends a running run's lease; false if it is no longer
	// running.
	RenewLease(ctx context.Context, id int64, lease time.Duration) (bool, error)
	// FailInterrupted fails every running run whose lease expired with
	// error_log {"step":"interrupted"}, rendering each; the runs failed.
	FailInterrupted(ctx context.Context, render domain.Render[Review]) ([]Run, error)
	// Fail moves running → failed with the error log.
	Fail(ctx context.Context, id int64, e ErrorLog, render domain.Render[Review]) (Run, bool, error)
	// Complete moves running → completed.
	Complete(ctx context.Context, id int64, render domain.Render[Review]) (Run, bool, error)
	// Close moves completed → closed with metrics computed from the
	// counters, only when proposals_pending = 0; ok false (with the run as
	// it is) otherwise.
	Close(ctx context.Context, id int64, render domain.Render[Review]) (Run, bool, error)
	// SetProgress records the window's counts and the number of batches
	// (with render, the progress message is posted).
	SetProgress(ctx context.Context, id int64, messages, filtered, batches int, render domain.Render[Review]) (Run, error)
	// TurnPage moves the run's board to page (clamped to its pages);
	// domain.ErrNotFound if there is no such run.
	TurnPage(ctx context.Context, runID int64, page int, render domain.Render[Review]) (Run, error)

	// The proposals: a batch's, the admins' decisions and the embeddings
	// RAG reads.

	// SaveProposalBatch stores a batch's proposals (numbered on from the run's
	// last) and adds them to the run's counters (proposals_total,
	// proposals_pending, batches_done, processed) in one transaction,
	// which also writes what tell makes of the run's board; the run
	// after it and the proposals with their ids.
	SaveProposalBatch(ctx context.Context, runID int64, batch, messages int, ps []Proposal, render domain.Render[Review]) (Run, []Proposal, error)
	// DecideProposal sets a pending proposal's decision and moves the run's
	// counters in the same statement, writing the board in the same
	// transaction; ok false (with the proposal as it is) if it was decided
	// already. domain.ErrNotFound if unknown.
	DecideProposal(ctx context.Context, id int64, d Decision, by int64, render domain.Render[Review]) (Proposal, Run, bool, error)
	// AskApproveAllProposals makes the board ask to confirm approving every pending
	// proposal of a completed run; ok false (with the run) if it is not
	// completed, has none pending, or asks already.
	AskApproveAllProposals(ctx context.Context, runID int64, render domain.Render[Review]) (Run, bool, error)
	// CancelApproveAllProposals withdraws the question; ok false if it was not asked.
	CancelApproveAllProposals(ctx context.Context, runID int64, render domain.Render[Review]) (Run, bool, error)
	// ApproveAllProposals approves every pending proposal of a completed run whose
	// board asks to confirm it, in one transaction with the counters and
	// the board; the proposals approved, or ok false (with the run) if the
	// board no longer asks.
	ApproveAllProposals(ctx context.Context, runID, by int64, render domain.Render[Review]) ([]Proposal, Run, bool, error)
	// SaveProposalEmbedding stores an approved proposal's embedding.
	SaveProposalEmbedding(ctx context.Context, proposalID int64, v []float32) error
	// SimilarProposals returns the k approved proposals of runs other than runID
	// most similar (cosine) to v.
	SimilarProposals(ctx context.Context, runID int64, v []float32, k int) ([]Proposal, error)
}

// LLM is the port to the model (llm.AnalysisPort implements it).
type LLM interface {
	// JSON asks for a JSON answer and decodes it into out;
	// domain.ErrLLMInvalidAnswer when the answer is not valid JSON of that
	// shape.
	JSON(ctx context.Context, system, prompt string, out any) error
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}

// EventKind names a run event.
type EventKind string

// Run events, to the admin chat and pg_notify('analysis_runs', …).
const (
	EventCreated          EventKind = "run_created"
	EventStarted          EventKind = "run_started"
	EventProgress         EventKind = "progress_updated"
	EventProposalsCreated EventKind = "proposals_created"
	EventCompleted        EventKind = "run_completed"
	EventFailed           EventKind = "run_failed"
	EventClosed           EventKind = "run_closed"
)

// Event is one run event.
type Event struct {
	Kind      EventKind
	Run       Run
	Proposals []Proposal // proposals_created
	// Board is the run's board as the change left it (set when the event
	// is rendered with its change), for the board's edit.
	Board Review
}

// ReviewPageSize is how many proposals a page of a run's board shows:
// with their buttons and clipped texts a page stays one message.
const ReviewPageSize = 8

// Review is a run as its board shows it: the run and the page of its
// proposals the board is on.
type Review struct {
	Run  Run
	Page int // 0-based, below Pages()
	// Proposals are the page's, by ordinal.
	Proposals []Proposal
}

// Pages is the number of pages the run's proposals fill (at least 1).
func (r Review) Pages() int { return PagesOf(r.Run.ProposalsTotal) }

// PagesOf is the number of board pages n proposals fill (at least 1).
func PagesOf(n int) int { return max(1, (n+ReviewPageSize-1)/ReviewPageSize) }

// Notifier renders what the workflow tells the admin chat (the bot
// implements it). It sends nothing: the messages are written to the outbox
// with the state change that causes them (see Render) and delivered from
// there. Every method returns no messages when there is no admin chat.
type Notifier interface {
	// Event renders a run event's line (nothing for progress_updated and
	// proposals_created: the board shows them); for a run that ended or
	// closed, also its board's edit.
	Event(e Event) []domain.Message
	// Board renders the run's board: its progress and a page of its
	// proposals with their buttons, one message edited in place (the
	// message itself when first is set, else an edit of it, coalesced to
	// one per interval and posted anew if it is gone).
	Board(rv Review, first bool) []domain.Message
	// AdminZone is the zone the admin chat reads runs' times in
	// (ADMIN_CHAT_TIMEZONE): the model reads the messages' times in it
	// too, so a deadline it resolves from "tomorrow" is the admins' day.
	AdminZone() *time.Location
}

// Publisher sends events to pg_notify('analysis_runs', …); storage.Runs
// implements it.
type Publisher interface {
	Publish(ctx context.Context, payload string) error
}

// Errors the bot turns into answers.
var (
	// ErrState: the run is not in a state the command acts on.
	ErrState = errors.New("run in another state")
	// ErrDecided: the proposal was decided already.
	ErrDecided = errors.New("proposal already decided")
)

// UnclosedError refuses /run_new while runs are unclosed (the original's 409).
type UnclosedError struct{ IDs []int64 }

func (e *UnclosedError) Error() string { return fmt.Sprintf("unclosed runs %v", e.IDs) }

// PendingError refuses /run_close while proposals wait (the original's 400).
type PendingError struct{ Pending int }

func (e *PendingError) Error() string { return fmt.Sprintf("%d proposals pending", e.Pending) }

// inputError refuses the token arg of /run_new with key, naming the limit
// the key is about.
func inputError(key, arg string) *domain.InputError {
	limits := map[string]int{
		"run_new.error_min_len":  MaxMinLen,
		"run_new.error_keywords": MaxKeywords,
	}
	return &domain.InputError{Key: key, Args: map[string]any{"Arg": arg, "Max": limits[key], "MaxLen": MaxKeywordLen}}
}

// Config is the workflow's part of the configuration.
type Config struct {
	BatchGap  time.Duration // ANALYSIS_BATCH_GAP (10m)
	BatchSize int           // 50
	RunLease  time.Duration // a running run's lease, renewed by its executor (1m)
	Similar   int           // RAG context size (5)
}

func (c Config) withDefaults() Config {
	domain.OrDefault(&c.BatchGap, 10*time.Minute)
	domain.OrDefault(&c.BatchSize, 50)
	domain.OrDefault(&c.RunLease, time.Minute)
	domain.OrDefault(&c.Similar, 5)
	return c
}

// Deps are the workflow's collaborators.
type Deps struct {
	Runs       Runs
	Chats      Chats
	LLM        LLM
	Notifier   Notifier
	Publisher  Publisher
	Clock      clockwork.Clock
	Log        *slog.Logger
	Registerer prometheus.Registerer
}

// eventPayload is the pg_notify payload: small, so it stays far under
// PostgreSQL's 8000-byte limit.
func eventPayload(e Event) string {
	b, _ := json.Marshal(map[string]any{
		"event": e.Kind, "run": e.Run.ID, "state": e.Run.State,
		"proposals_total": e.Run.ProposalsTotal, "proposals_pending": e.Run.ProposalsPending,
		"batches_done": e.Run.BatchesDone, "batches": e.Run.Batches,
	})
	return string(b)
}
