package ghfake_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"switchboard/e2e/ghfake"
)

func TestAuthentication(t *testing.T) {
	t.Parallel()
	b := setup(t)
	path := "/repos/" + repoName + "/issues"

	r := b.call(t, http.MethodGet, path, "")
	requireError(t, r, http.StatusUnauthorized, ghfake.MsgRequiresAuth)

	r = b.call(t, http.MethodGet, path, "github_pat_unknown")
	requireError(t, r, http.StatusUnauthorized, ghfake.MsgBadCredentials)
	require.Equal(t, "60", r.header.Get("X-RateLimit-Limit"), "a refused credential gets the anonymous figures")

	r = b.call(t, http.MethodGet, path, "", nil, "Authorization", "token "+botToken)
	require.Equal(t, http.StatusOK, r.status, "the older token scheme: %s", r.body)

	r = b.call(t, http.MethodGet, path, "", nil, "Authorization", "Basic "+botToken)
	requireError(t, r, http.StatusUnauthorized, ghfake.MsgBadCredentials)

	b.srv.RevokeToken(botToken)
	r = b.call(t, http.MethodGet, path, botToken)
	requireError(t, r, http.StatusUnauthorized, ghfake.MsgBadCredentials)
}

func TestRepositoryAccess(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.srv.AddRepo("acme/secret")
	b.srv.AddRepo("acme/open", ghfake.Public())

	// A private repository without a grant is hidden, even from writes.
	r := b.call(t, http.MethodGet, "/repos/acme/secret/issues", botToken)
	requireError(t, r, http.StatusNotFound, ghfake.MsgNotFound)
	r = b.call(t, http.MethodPost, "/repos/acme/secret/issues", botToken, map[string]any{"title": "x"})
	requireError(t, r, http.StatusNotFound, ghfake.MsgNotFound)
	require.Empty(t, b.srv.Issues("acme/secret"))

	// A public one can be read, but a fine-grained token writes only
	// where granted.
	r = b.call(t, http.MethodGet, "/repos/acme/open/issues", botToken)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	r = b.call(t, http.MethodPost, "/repos/acme/open/issues", botToken, map[string]any{"title": "x"})
	requireError(t, r, http.StatusForbidden, ghfake.MsgNotAccessible)

	// A read grant reads and is refused writes, naming the permission.
	r = b.call(t, http.MethodGet, "/repos/"+repoName+"/issues", readTok)
	require.Equal(t, http.StatusOK, r.status)
	r = b.call(t, http.MethodPost, "/repos/"+repoName+"/issues", readTok, map[string]any{"title": "x"})
	requireError(t, r, http.StatusForbidden, ghfake.MsgNotAccessible)
	require.Equal(t, "issues=write", r.header.Get("X-Accepted-GitHub-Permissions"))
	r = b.call(t, http.MethodPost, "/repos/"+repoName+"/labels", readTok, map[string]any{"name": "x"})
	requireError(t, r, http.StatusForbidden, ghfake.MsgNotAccessible)
	require.Empty(t, b.srv.Issues(repoName))

	// Repository names are not case sensitive.
	r = b.call(t, http.MethodGet, "/repos/ACME/Jobs/issues", botToken)
	require.Equal(t, http.StatusOK, r.status)

	b.srv.DeleteRepo(repoName)
	r = b.call(t, http.MethodGet, "/repos/"+repoName+"/issues", botToken)
	requireError(t, r, http.StatusNotFound, ghfake.MsgNotFound)
}

func TestArchivedRepository(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.call(t, http.MethodPost, "/repos/"+repoName+"/issues", botToken, map[string]any{"title": "before"})
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)

	b.srv.SetArchived(repoName, true)
	// Reads go on; every write is refused, the token's write grant
	// notwithstanding.
	r = b.call(t, http.MethodGet, "/repos/"+repoName+"/issues", botToken)
	require.Equal(t, http.StatusOK, r.status)
	r = b.call(t, http.MethodPost, "/repos/"+repoName+"/issues", botToken, map[string]any{"title": "x"})
	requireError(t, r, http.StatusForbidden, ghfake.MsgArchived)
	r = b.call(t, http.MethodPost, "/repos/"+repoName+"/labels", botToken, map[string]any{"name": "x"})
	requireError(t, r, http.StatusForbidden, ghfake.MsgArchived)
	r = b.call(t, http.MethodPatch, "/repos/"+repoName+"/issues/1", botToken, map[string]any{"state": "closed"})
	requireError(t, r, http.StatusForbidden, ghfake.MsgArchived)
	require.Len(t, b.srv.Issues(repoName), 1)

	b.srv.SetArchived(repoName, false)
	r = b.call(t, http.MethodPost, "/repos/"+repoName+"/issues", botToken, map[string]any{"title": "after"})
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
}

func TestGatewayRefusals(t *testing.T) {
	t.Parallel()
	b := setup(t)
	path := "/repos/" + repoName + "/issues"

	r := b.call(t, http.MethodGet, path, botToken, nil, "User-Agent", "")
	require.Equal(t, http.StatusForbidden, r.status)
	require.Contains(t, r.header.Get("Content-Type"), "text/plain")
	require.Contains(t, string(r.body), "User-Agent")

	r = b.call(t, http.MethodGet, path, botToken, nil, "X-GitHub-Api-Version", "2020-01-01")
	require.Equal(t, http.StatusBadRequest, r.status)
	r = b.call(t, http.MethodGet, path, botToken, nil, "X-GitHub-Api-Version", ghfake.APIVersion)
	require.Equal(t, http.StatusOK, r.status)
	require.Equal(t, ghfake.APIVersion, r.header.Get("X-GitHub-Api-Version-Selected"))

	// Unknown routes, unsupported methods and a trailing slash are 404.
	for _, c := range []struct{ method, path string }{
		{http.MethodGet, "/repos/" + repoName + "/issues/"},
		{http.MethodDelete, "/repos/" + repoName + "/issues/1"},
		{http.MethodGet, "/repos/" + repoName + "/pulls"},
		{http.MethodGet, "/user/repos"},
	} {
		r = b.call(t, c.method, c.path, botToken)
		requireError(t, r, http.StatusNotFound, ghfake.MsgNotFound)
	}
}
