package ghfake

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"unicode/utf8"
)

// GitHub's bounds on a label, in characters.
const (
	MaxLabelName        = 50
	MaxLabelDescription = 100
)

var hexColor = regexp.MustCompile(`^[0-9a-fA-F]{6}$`)

// createLabelLocked answers POST /repos/{owner}/{repo}/labels (see
// write).
func (s *Server) createLabelLocked(_ request, in object, r *repo) answer {
	f := in.fields(docCreateLabel)
	labelName := f.required("Label", "name", f.str)
	color, colorSet := f.str("color")
	desc, _ := f.str("description")
	if f.err != nil {
		return errAnswer(f.err)
	}
	var errs []FieldError
	if utf8.RuneCountInString(labelName) > MaxLabelName {
		errs = append(errs, FieldError{Resource: "Label", Code: "custom", Field: "name", Message: MsgLabelNameTooLong})
	}
	if colorSet && !hexColor.MatchString(color) {
		// "#ff0000" is the usual mistake: the docs say without '#'.
		errs = append(errs, FieldError{Resource: "Label", Code: "invalid", Field: "color"})
	}
	if utf8.RuneCountInString(desc) > MaxLabelDescription {
		errs = append(errs, FieldError{Resource: "Label", Code: "custom", Field: "description",
			Message: "description is too long (maximum is 100 characters) (ghfake)"})
	}
	if r.label(labelName) != nil {
		errs = append(errs, FieldError{Resource: "Label", Code: "already_exists", Field: "name"})
	}
	if len(errs) > 0 {
		return errAnswer(validationFailed(docCreateLabel, errs...))
	}
	if !colorSet {
		color = defaultLabelColor
	}
	s.nextID++
	l := &label{ID: s.nextID, Name: labelName, Color: strings.ToLower(color), Description: desc}
	r.labels = append(r.labels, l)
	s.hub.NotifyLocked()
	out := s.labelJSON(r, l)
	return answer{status: http.StatusCreated, body: out, header: http.Header{"Location": {out.URL}}}
}

// getLabel answers GET /repos/{owner}/{repo}/labels/{name}; names match
// case-insensitively, as on GitHub.
func (s *Server) getLabel(q request, owner, name, labelName string) answer {
	return s.read(q, owner, name, docGetLabel, func(r *repo) answer {
		l := r.label(labelName)
		if l == nil {
			return errAnswer(notFound(docGetLabel))
		}
		return answer{status: http.StatusOK, body: s.labelJSON(r, l)}
	})
}

// listLabels answers GET /repos/{owner}/{repo}/labels.
func (s *Server) listLabels(q request, owner, name string) answer {
	return s.read(q, owner, name, "https://docs.github.com/rest/issues/labels#list-labels-for-a-repository", func(r *repo) answer {
		perPage, page := paging(q.URL.Query())
		from, to := pageOf(len(r.labels), page, perPage)
		out := make([]LabelJSON, 0, to-from)
		for _, l := range r.labels[from:to] {
			out = append(out, s.labelJSON(r, l))
		}
		a := answer{status: http.StatusOK, body: out}
		if link := s.linkHeader(q.Request, page, perPage, len(r.labels)); link != "" {
			a.header = http.Header{"Link": {link}}
		}
		return a
	})
}

// LabelPath is the API path of a label, its name escaped as GitHub wants
// it in a path (a space as %20).
func LabelPath(repo, name string) string {
	return "/repos/" + repo + "/labels/" + url.PathEscape(name)
}
