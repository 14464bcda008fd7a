package github_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"switchboard/e2e/ghfake"
)

// Open lists the open issues, the liveliest first, over pages; asked
// again with nothing changed, every page is a 304 that costs no rate
// limit; a change is read.
func TestOpenIsConditional(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	for i := range 150 {
		b.srv.AddIssue(repoName, ghfake.Issue{Title: fmt.Sprintf("Issue %d", i), Author: "alice"})
	}
	closed := b.srv.AddIssue(repoName, ghfake.Issue{Title: "Closed one", Author: "alice"})
	b.srv.CloseIssue(repoName, closed.Number, "completed")

	open, err := b.client.Open(ctx, repoName)
	require.NoError(t, err)
	require.Len(t, open, 150, "two pages, the closed one left out")
	for _, o := range open {
		require.NotEqual(t, closed.Number, o.Number)
		require.NotEmpty(t, o.URL)
	}
	before := len(b.srv.Requests())

	again, err := b.client.Open(ctx, repoName)
	require.NoError(t, err)
	require.Equal(t, open, again)
	reqs := b.srv.Requests()[before:]
	require.Len(t, reqs, 2)
	for _, r := range reqs {
		require.Equal(t, http.StatusNotModified, r.Status, "%s %s", r.Path, r.Query)
		require.Empty(t, r.Resource, "a 304 costs no rate limit")
	}

	added := b.srv.AddIssue(repoName, ghfake.Issue{Title: "Brand new", Author: "alice"})
	open, err = b.client.Open(ctx, repoName)
	require.NoError(t, err)
	require.Len(t, open, 151)
	require.Equal(t, added.Number, open[0].Number, "the most recently updated first")
	require.Equal(t, "Brand new", open[0].Title)
}
