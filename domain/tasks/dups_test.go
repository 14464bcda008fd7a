package tasks_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"switchboard/domain"
	"switchboard/domain/analysis"
	"switchboard/domain/tasks"
	"switchboard/e2e/ghfake"
)

func TestLikelyDuplicate(t *testing.T) {
	t.Parallel()
	open := []tasks.Open{
		{Number: 3, Title: "Update the docs"},
		{Number: 7, Title: "Login page redirect is broken"},
		{Number: 9, Title: "Сервер падает при загрузке файлов"},
	}
	for _, c := range []struct {
		title string
		like  int // 0: none
	}{
		{"Fix the login page redirect", 7},
		{"login redirect broken on the login page", 7},
		{"Update the deps", 0}, // one word in common is no likeness
		{"Broken", 0},          // nor is one word alone
		{"Починить падение сервера при загрузке файла", 9}, // inflections meet
		{"", 0},
	} {
		like, ok := tasks.LikelyDuplicate(c.title, open)
		if c.like == 0 {
			require.False(t, ok, "%q looks like #%d", c.title, like.Number)
			continue
		}
		require.True(t, ok, "%q looks like nothing", c.title)
		require.Equal(t, c.like, like.Number, c.title)
	}
	require.InDelta(t, 1.0, tasks.Likeness("Deploy the API", "deploying api"), 1e-9)
	require.Zero(t, tasks.Likeness("the and for", "the and for"), "function words carry nothing")
}

// A task that looks like an open issue is not filed: it waits for the
// admins, shown on its run's board; linked, it is that issue and nothing
// is filed; filed anyway, it is filed without being asked again.
func TestALikelyDuplicateWaitsForTheAdmins(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	// Someone on GitHub reported it already; and an unrelated issue.
	like := w.gh.AddIssue("acme/app", ghfake.Issue{Title: "thing done badly: please redo thing", Author: "alice"})
	w.gh.AddIssue("acme/app", ghfake.Issue{Title: "Unrelated", Author: "alice"})
	w.approve(1) // "thing <id>" from "please do thing <id>"
	var proposal int64
	require.NoError(t, w.store.Pool().QueryRow(w.ctx, `SELECT proposal_id FROM task_pushes`).Scan(&proposal))
	// Title it so that it reads like the open issue.
	_, err := w.store.Pool().Exec(w.ctx, `UPDATE analysis_proposals SET title = 'Redo the thing done badly' WHERE id = $1`, proposal)
	require.NoError(t, err)
	boards := &boards{}
	s := w.service(w.store.Tasks(), time.Minute)
	s.ShowOn(boards)

	require.NoError(t, s.Push(w.ctx))
	var state string
	require.NoError(t, w.store.Pool().QueryRow(w.ctx, `SELECT state FROM task_pushes`).Scan(&state))
	require.Equal(t, "held", state)
	require.Len(t, w.gh.Issues("acme/app"), 2, "nothing filed")
	require.Equal(t, 1, boards.n, "the board drawn with the question")
	rv := w.review()
	require.Equal(t, analysis.Filing{Number: like.Number, URL: rv.Proposals[0].Like.URL, Title: like.Title}, rv.Proposals[0].Like)
	require.True(t, strings.HasSuffix(rv.Proposals[0].Like.URL, "/acme/app/issues/1"), rv.Proposals[0].Like.URL)
	require.NoError(t, s.Push(w.ctx))
	require.Len(t, w.gh.Issues("acme/app"), 2, "a held push is not claimed again")

	for _, r := range w.gh.Requests() {
		require.False(t, r.Method == http.MethodPost && r.Path == "/repos/acme/app/issues", "an issue filed while held")
	}

	// File anyway: filed, not asked again; a second press finds nothing held.
	runID, err := w.store.Tasks().FileAnyway(w.ctx, proposal, 7)
	require.NoError(t, err)
	require.Positive(t, runID)
	_, err = w.store.Tasks().Link(w.ctx, proposal, 7)
	require.Error(t, err, "decided already")
	require.NoError(t, s.Push(w.ctx))
	require.Equal(t, 1, w.pushed())
	require.Len(t, w.gh.Issues("acme/app"), 3)
	require.Zero(t, w.review().Proposals[0].Like.Number, "no question once filed")
}

// An open issue whose title holds what PostgreSQL cannot hold (a NUL) is
// still a likely duplicate: the push is held with the title cleaned, at
// the first push, not refused at every push for ever.
func TestALikelyDuplicateWithANULInItsTitleIsHeld(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.approve(1)
	var title string
	require.NoError(t, w.store.Pool().QueryRow(w.ctx, `SELECT title FROM analysis_proposals`).Scan(&title))
	w.gh.AddIssue("acme/app", ghfake.Issue{Title: title + " \x00", Author: "alice"})
	s := w.service(w.store.Tasks(), time.Minute)
	require.NoError(t, s.Push(w.ctx))
	var state, like string
	require.NoError(t, w.store.Pool().QueryRow(w.ctx, `SELECT state, like_title FROM task_pushes`).Scan(&state, &like))
	require.Equal(t, "held", state)
	require.Equal(t, title+" \uFFFD", like)
}

func TestALinkedDuplicateFilesNothing(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	like := w.gh.AddIssue("acme/app", ghfake.Issue{Title: "Redo the thing done badly", Author: "alice"})
	w.approve(1)
	var proposal int64
	require.NoError(t, w.store.Pool().QueryRow(w.ctx, `SELECT proposal_id FROM task_pushes`).Scan(&proposal))
	_, err := w.store.Pool().Exec(w.ctx, `UPDATE analysis_proposals SET title = 'The thing was done badly: redo it' WHERE id = $1`, proposal)
	require.NoError(t, err)
	s := w.service(w.store.Tasks(), time.Minute)
	require.NoError(t, s.Push(w.ctx))

	_, err = w.store.Tasks().Link(w.ctx, proposal, 7)
	require.NoError(t, err)
	_, err = w.store.Tasks().FileAnyway(w.ctx, proposal, 7)
	require.Error(t, err, "decided already")
	require.NoError(t, s.Push(w.ctx))
	require.Len(t, w.gh.Issues("acme/app"), 1, "nothing filed")
	p := w.review().Proposals[0]
	require.Equal(t, like.Number, p.FiledNumber, "the board links the proposal to the issue")
	require.NotEmpty(t, p.FiledURL)
	recent, err := w.store.Tasks().Recent(w.ctx, time.Hour, 10)
	require.NoError(t, err)
	require.True(t, recent[0].Linked)

	// Linked, it is followed like one filed: its closing is told once.
	w.gh.CloseIssue("acme/app", like.Number, "completed")
	require.NoError(t, s.Sync(w.ctx))
	require.NoError(t, s.Sync(w.ctx))
	var told bool
	require.NoError(t, w.store.Pool().QueryRow(w.ctx, `SELECT closed_told FROM task_pushes`).Scan(&told))
	require.True(t, told)
}

type boards struct{ n int }

func (b *boards) RefreshBoard(context.Context, int64) error { b.n++; return nil }

// review is the board of the world's one run as storage reads it.
func (w *world) review() analysis.Review {
	w.t.Helper()
	var runID int64
	require.NoError(w.t, w.store.Pool().QueryRow(w.ctx, `SELECT id FROM analysis_runs`).Scan(&runID))
	var rv analysis.Review
	_, err := w.store.Runs().TurnPage(w.ctx, runID, 0, func(r analysis.Review) []domain.Message { rv = r; return nil })
	require.NoError(w.t, err)
	return rv
}
