package ghfake_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"switchboard/e2e/ghfake"
)

func TestLabels(t *testing.T) {
	t.Parallel()
	b := setup(t)
	path := "/repos/" + repoName + "/labels"

	r := b.call(t, http.MethodPost, path, botToken, map[string]any{"name": "needs triage", "color": "FBCA04", "description": "New"})
	l := decode[ghfake.LabelJSON](t, r, http.StatusCreated)
	require.Equal(t, "needs triage", l.Name)
	require.Equal(t, "fbca04", l.Color)
	require.Equal(t, "New", *l.Description)
	require.Equal(t, b.srv.URL()+"/repos/acme/jobs/labels/needs%20triage", l.URL)
	require.Equal(t, l.URL, r.header.Get("Location"))

	got := decode[ghfake.LabelJSON](t, b.call(t, http.MethodGet, ghfake.LabelPath(repoName, "Needs Triage"), readTok), http.StatusOK)
	require.Equal(t, l, got, "names match case-insensitively")
	requireError(t, b.call(t, http.MethodGet, ghfake.LabelPath(repoName, "nope"), botToken), http.StatusNotFound, ghfake.MsgNotFound)

	e := requireError(t, b.call(t, http.MethodPost, path, botToken, map[string]any{"name": "NEEDS TRIAGE"}),
		http.StatusUnprocessableEntity, ghfake.MsgValidationFailed)
	require.Equal(t, []ghfake.FieldError{{Resource: "Label", Code: "already_exists", Field: "name"}}, e.Errors)

	e = requireError(t, b.call(t, http.MethodPost, path, botToken, map[string]any{"name": "red", "color": "#ff0000"}),
		http.StatusUnprocessableEntity, ghfake.MsgValidationFailed)
	require.Equal(t, []ghfake.FieldError{{Resource: "Label", Code: "invalid", Field: "color"}}, e.Errors)

	e = requireError(t, b.call(t, http.MethodPost, path, botToken, map[string]any{"name": "long", "description": strings.Repeat("d", 101)}),
		http.StatusUnprocessableEntity, ghfake.MsgValidationFailed)
	require.Equal(t, "description", e.Errors[0].Field)

	e = requireError(t, b.call(t, http.MethodPost, path, botToken, map[string]any{"color": "ffffff"}),
		http.StatusUnprocessableEntity, ghfake.MsgValidationFailed)
	require.Equal(t, []ghfake.FieldError{{Resource: "Label", Code: "missing_field", Field: "name"}}, e.Errors)

	// A name with a slash stays one path segment when escaped.
	decode[ghfake.LabelJSON](t, b.call(t, http.MethodPost, path, botToken, map[string]any{"name": "area/bot"}), http.StatusCreated)
	grey := decode[ghfake.LabelJSON](t, b.call(t, http.MethodGet, ghfake.LabelPath(repoName, "area/bot"), botToken), http.StatusOK)
	require.Equal(t, "ededed", grey.Color)

	list := decode[[]ghfake.LabelJSON](t, b.call(t, http.MethodGet, path, botToken), http.StatusOK)
	require.Len(t, list, 2)
}

// GitHub takes a label name of 50 characters, not 51: a label create
// says so in its message, and an issue naming a label that long (which
// GitHub would have to create) is refused with the name as the value.
// Nothing is made either way.
func TestLabelNameLimit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	long := strings.Repeat("я", 51)
	e := requireError(t, b.call(t, http.MethodPost, "/repos/"+repoName+"/labels", botToken, map[string]any{"name": long}),
		http.StatusUnprocessableEntity, ghfake.MsgValidationFailed)
	require.Equal(t, []ghfake.FieldError{{Resource: "Label", Code: "custom", Field: "name",
		Message: "name is too long (maximum is 50 characters)"}}, e.Errors)

	e = requireError(t, b.call(t, http.MethodPost, "/repos/"+repoName+"/issues", botToken, map[string]any{"title": "x", "labels": []string{long}}),
		http.StatusUnprocessableEntity, ghfake.MsgValidationFailed)
	require.Equal(t, []ghfake.FieldError{{Resource: "Label", Code: "invalid", Field: "name", Value: long}}, e.Errors)
	require.Empty(t, b.srv.Issues(repoName))
	require.Empty(t, b.srv.Labels(repoName))

	fits := strings.Repeat("я", 50)
	decode[ghfake.LabelJSON](t, b.call(t, http.MethodPost, "/repos/"+repoName+"/labels", botToken, map[string]any{"name": fits}), http.StatusCreated)
	is := b.createIssue(t, map[string]any{"title": "x", "labels": []string{fits}})
	require.Len(t, is.Labels, 1)
	require.Equal(t, fits, is.Labels[0].Name)
}
