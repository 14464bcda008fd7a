package ghfake

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// object is a request's JSON body, kept raw so each field's type can be
// checked the way GitHub's schema validation checks it.
type object map[string]json.RawMessage

func parseObject(body []byte) (object, *apiError) {
	if len(bytes.TrimSpace(body)) == 0 {
		return object{}, nil
	}
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		return nil, newError(http.StatusBadRequest, MsgProblemsParsing, docRest)
	}
	var o object
	if err := json.Unmarshal(body, &o); err != nil {
		return nil, newError(http.StatusBadRequest, MsgBodyNotObject, docRest)
	}
	return o, nil
}

func isNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

// fields reads one request's body for its endpoint (doc), keeping the
// first refusal as GitHub's schema validation answers the first value it
// rejects: a handler reads every field, then checks err once.
type fields struct {
	o   object
	doc string
	err *apiError
}

func (o object) fields(doc string) *fields { return &fields{o: o, doc: doc} }

// raw is a field's value; false when it is absent or null, or a refusal
// came before.
func (f *fields) raw(key string) (json.RawMessage, bool) {
	raw, ok := f.o[key]
	return raw, ok && !isNull(raw) && f.err == nil
}

// refuse keeps err unless a refusal came before.
func (f *fields) refuse(err *apiError) {
	if f.err == nil {
		f.err = err
	}
}

// str reads a string field. present is false when the field is absent or
// null; a value of another type is refused.
func (f *fields) str(key string) (val string, present bool) {
	raw, ok := f.raw(key)
	if !ok {
		return "", false
	}
	if err := json.Unmarshal(raw, &val); err != nil {
		f.refuse(invalidRequest(f.doc, "For 'properties/%s', %s is not a string.", key, raw))
		return "", false
	}
	return val, true
}

// strOrInt reads a field GitHub's schema takes as string or integer (an
// issue's title).
func (f *fields) strOrInt(key string) (string, bool) {
	raw, ok := f.raw(key)
	if !ok {
		return "", false
	}
	var n json.Number
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&n); err == nil {
		if _, err := n.Int64(); err == nil {
			return n.String(), true
		}
	}
	return f.str(key)
}

// required reads a field GitHub requires of resource: absent, null or
// blank is its missing_field.
func (f *fields) required(resource, key string, read func(string) (string, bool)) string {
	val, ok := read(key)
	if f.err == nil && (!ok || strings.TrimSpace(val) == "") {
		f.missing(resource, key)
	}
	return val
}

// missing refuses the request for want of resource's field key.
func (f *fields) missing(resource, key string) {
	f.refuse(validationFailed(f.doc, FieldError{Resource: resource, Code: "missing_field", Field: key}))
}

// names reads an array of strings; with objects true, elements may also be
// objects with a "name" (labels take either).
func (f *fields) names(key string, objects bool) ([]string, bool) {
	raw, ok := f.raw(key)
	if !ok {
		return nil, false
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		f.refuse(invalidRequest(f.doc, "For 'properties/%s', %s is not an array.", key, raw))
		return nil, false
	}
	out := make([]string, 0, len(items))
	for _, it := range items {
		var s string
		if err := json.Unmarshal(it, &s); err == nil {
			out = append(out, s)
			continue
		}
		var named struct {
			Name *string `json:"name"`
		}
		if objects && json.Unmarshal(it, &named) == nil && named.Name != nil {
			out = append(out, *named.Name)
			continue
		}
		f.refuse(invalidRequest(f.doc, "For 'items', %s is not a string.", it))
		return nil, false
	}
	return out, true
}

// enum reads a string field that must be one of allowed.
func (f *fields) enum(key string, allowed ...string) (string, bool) {
	val, ok := f.str(key)
	if ok {
		if err := oneOf(key, val, f.doc, allowed...); err != nil {
			f.refuse(err)
			return "", false
		}
	}
	return val, ok
}

// oneOf checks an enum field as GitHub's schema validation does.
func oneOf(key, val, doc string, allowed ...string) *apiError {
	for _, a := range allowed {
		if val == a {
			return nil
		}
	}
	quoted := make([]string, len(allowed))
	for i, a := range allowed {
		quoted[i] = strconv.Quote(a)
	}
	return invalidRequest(doc, "For 'properties/%s', %q is not one of [%s].", key, val, strings.Join(quoted, ", "))
}

// paging reads per_page (default 30, at most 100, as GitHub caps it) and
// page (from 1).
func paging(q url.Values) (perPage, page int) {
	perPage, page = 30, 1
	if n, err := strconv.Atoi(q.Get("per_page")); err == nil && n > 0 {
		perPage = min(n, 100)
	}
	if n, err := strconv.Atoi(q.Get("page")); err == nil && n > 0 {
		page = n
	}
	return perPage, page
}

// linkHeader is GitHub's pagination Link header for page of total items;
// empty when everything fits one page.
func (s *Server) linkHeader(r *http.Request, page, perPage, total int) string {
	last := max((total+perPage-1)/perPage, 1)
	if last == 1 && page == 1 {
		return ""
	}
	link := func(p int, rel string) string {
		q := r.URL.Query()
		q.Set("page", strconv.Itoa(p))
		if q.Get("per_page") != "" {
			q.Set("per_page", strconv.Itoa(perPage))
		}
		return fmt.Sprintf("<%s%s?%s>; rel=%q", s.URL(), r.URL.EscapedPath(), q.Encode(), rel)
	}
	var parts []string
	if page > 1 {
		parts = append(parts, link(min(page-1, last), "prev"))
	}
	if page < last {
		parts = append(parts, link(page+1, "next"), link(last, "last"))
	}
	if page > 1 {
		parts = append(parts, link(1, "first"))
	}
	return strings.Join(parts, ", ")
}

// pageOf cuts one page out of n items: the half-open index range.
func pageOf(n, page, perPage int) (from, to int) {
	from = min((page-1)*perPage, n)
	to = min(from+perPage, n)
	return from, to
}
