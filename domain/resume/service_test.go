package resume_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"switchboard/domain"
	"switchboard/domain/domaintest"
	"switchboard/domain/resume"
	"switchboard/internal/testkit"
	"switchboard/llm"
	"switchboard/llm/llmtest"
	"switchboard/storage"
	"switchboard/storage/storagetest"
)

// cvText is the résumé every test user sends, as a plain-text file.
const cvText = "Alex Doe. Senior Go developer, 7 years: Go, PostgreSQL, Kafka."

// textFile serves the one file in Telegram's place.
type textFile struct{}

func (textFile) Download(context.Context, string, int64) ([]byte, error) { return []byte(cvText), nil }

// plainNotes renders what the workers tell as bare words an assertion
// reads: the workflow's choice of message, not the bot's wording.
type plainNotes struct{}

func (plainNotes) ResumeDraft(d resume.Draft) []domain.Message {
	return []domain.Message{{ChatID: d.ChatID, Kind: domain.KindReply, Text: "draft: " + d.Text}}
}

func (plainNotes) ResumeFailed(d resume.Draft, why error) []domain.Message {
	return []domain.Message{{ChatID: d.ChatID, Kind: domain.KindReply, Text: fmt.Sprint("failed: ", why)}}
}

func (plainNotes) ResumeWaiting(d resume.Draft) []domain.Message {
	return []domain.Message{{ChatID: d.ChatID, Kind: domain.KindReply, Text: "waiting"}}
}

// drafting is one test's world: a real database, the scripted model behind
// the real client with a breaker that opens at the first failure, and the
// workflow running with one attempt a draft.
type drafting struct {
	store *storage.Store
	srv   *llmtest.Server
	model *llmtest.Rule
	svc   *resume.Service
}

func startDrafting(t *testing.T, cfg resume.Config) drafting {
	t.Helper()
	srv := testkit.Closing(t, llmtest.New())
	d := drafting{store: storagetest.New(t), srv: srv, model: srv.On(llmtest.SystemContains("turn a job seeker's résumé")).Named("resume")}
	client := domaintest.LLM(t, srv, llm.Config{}, llm.WithBreaker(1, 50*time.Millisecond))
	cfg.Attempts, cfg.Backoff, cfg.Workers, cfg.Sweep = 1, 10*time.Millisecond, 1, 20*time.Millisecond
	var err error
	d.svc, err = resume.NewService(cfg, resume.Deps{Drafts: d.store.ProfileDrafts(), Files: textFile{}, LLM: llm.Port{Client: client, Label: "resume"},
		Notifier: plainNotes{}, Log: slog.New(slog.DiscardHandler), Registerer: prometheus.NewRegistry()})
	require.NoError(t, err)
	_, err = d.store.Users().Upsert(context.Background(), domain.User{ID: 1, FirstName: "Ann"})
	require.NoError(t, err)
	domaintest.Run(t, context.Background(), d.svc.Run)
	return d
}

// send accepts the file as the bot does for a document in private chat.
func (d drafting) send(t *testing.T) {
	t.Helper()
	_, created, err := d.svc.Accept(context.Background(), resume.Document{UserID: 1, ChatID: 1, MessageID: 10, FileID: "f", FileName: "cv.txt",
		MIMEType: "text/plain", Size: int64(len(cvText))}, "en", func(resume.Draft) []domain.Message {
		return []domain.Message{{ChatID: 1, Kind: domain.KindReply, Text: "reading"}}
	})
	require.NoError(t, err)
	require.True(t, created)
}

// told is what the user has been told so far, in order.
func (d drafting) told(t *testing.T) []string {
	t.Helper()
	rows, err := d.store.Pool().Query(context.Background(), `SELECT body->>'text' FROM outbox WHERE chat_id = 1 ORDER BY id`)
	require.NoError(t, err)
	var out []string
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		out = append(out, s)
	}
	require.NoError(t, rows.Err())
	return out
}

// toldAtLeast waits until the user has been told n things: 30 s is no
// healthy run's wait, whose tries are 50 ms apart.
func (d drafting) toldAtLeast(t *testing.T, n int) []string {
	t.Helper()
	var got []string
	require.Eventually(t, func() bool { got = d.told(t); return len(got) >= n }, 30*time.Second, 10*time.Millisecond,
		"told %q", got)
	return got
}

// While the provider refuses the key, a draft waits, spending none of its
// one attempt and trying the model again every ModelRetry; its user is
// told once, and the draft comes when the key works again.
func TestDraftWaitsWhileTheModelIsAway(t *testing.T) {
	t.Parallel()
	d := startDrafting(t, resume.Config{ModelRetry: 50 * time.Millisecond})
	d.model.Fault(llmtest.HTTPErrorSaying(http.StatusUnauthorized, "invalid api key"))
	d.send(t)
	require.Eventually(t, func() bool { return d.srv.Calls("resume") >= 3 }, 30*time.Second, 10*time.Millisecond,
		"the model is tried again while it refuses")
	d.model.Fault(llmtest.Fault{}).ReplyJSON(map[string]any{"profile": "Senior Go developer."})
	require.Equal(t, []string{"reading", "waiting", "draft: Senior Go developer."}, d.toldAtLeast(t, 3))
	var attempts int
	require.NoError(t, d.store.Pool().QueryRow(context.Background(), `SELECT attempts FROM profile_drafts`).Scan(&attempts))
	require.Equal(t, 1, attempts, "the waits spent no attempt")
}

// A model away for longer than ModelWait: the user is asked to send the
// file again, once, and the draft is failed.
func TestDraftGivesUpWaitingAfterModelWait(t *testing.T) {
	t.Parallel()
	d := startDrafting(t, resume.Config{ModelRetry: 50 * time.Millisecond, ModelWait: 100 * time.Millisecond})
	d.model.Fault(llmtest.HTTPErrorSaying(http.StatusUnauthorized, "invalid api key"))
	d.send(t)
	got := d.toldAtLeast(t, 3)
	require.Equal(t, []string{"reading", "waiting", "failed: " + resume.ErrGaveUp.Error()}, got)
	var state string
	require.NoError(t, d.store.Pool().QueryRow(context.Background(), `SELECT state FROM profile_drafts`).Scan(&state))
	require.Equal(t, "failed", state)
	calls := d.srv.Calls("resume")
	time.Sleep(200 * time.Millisecond)
	require.Equal(t, calls, d.srv.Calls("resume"), "a failed draft is not tried again")
	require.Len(t, d.told(t), 3)
}
