package tgfake

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"sort"
	"strconv"
	"strings"
)

// maxRequestBody bounds what the fake reads from one request: a file at
// Telegram's upload limit for bots (maxUploadBytes) and the other
// parameters. A longer body is refused as too large (413).
const maxRequestBody = maxUploadBytes + 1<<20

// errTooLarge: the request body is over maxRequestBody.
var errTooLarge = errors.New("request body too large")

// upload is a file part of a multipart request.
type upload struct {
	Field       string
	Name        string
	ContentType string
	Data        []byte
}

// request is one Bot API call with its parameters flattened to strings the
// way the Bot API server does it: JSON strings are unquoted, every other JSON
// value (number, bool, object, array, null) is kept as its JSON text. That is
// why both {"chat_id":123} and {"chat_id":"123"} work, and why reply_markup
// may be an object or a JSON-encoded string.
type request struct {
	ctx    context.Context
	method string // lower-cased, as Telegram matches methods case-insensitively
	args   map[string]string
	files  map[string]*upload
}

func (r *request) str(name string) string { return r.args[name] }

func (r *request) has(name string) bool {
	_, ok := r.args[name]
	return ok
}

// int64Arg parses an integer parameter leniently, like td::to_integer: an
// absent or malformed value is 0, which the callers then reject with
// Telegram's wording ("chat not found", "message to edit not found", ...).
func (r *request) int64Arg(name string) int64 {
	v, err := strconv.ParseInt(strings.TrimSpace(r.args[name]), 10, 64)
	if err != nil {
		return 0
	}
	return v
}

func (r *request) intArg(name string, def, lo, hi int) int {
	s := strings.TrimSpace(r.args[name])
	if s == "" {
		return def
	}
	v, err := strconv.Atoi(s)
	if err != nil {
		v = 0
	}
	return min(max(v, lo), hi)
}

// boolArg mirrors the Bot API's to_bool: "true", "yes" and "1" are true.
func (r *request) boolArg(name string) bool {
	switch strings.ToLower(strings.TrimSpace(r.args[name])) {
	case "true", "yes", "1":
		return true
	}
	return false
}

// sortedArgs renders the parameters deterministically for the call log.
func (r *request) sortedArgs() map[string]string {
	out := make(map[string]string, len(r.args))
	for k, v := range r.args {
		out[k] = v
	}
	for k, f := range r.files {
		out[k] = fmt.Sprintf("<file %q, %d bytes>", f.Name, len(f.Data))
	}
	return out
}

func parseRequest(hr *http.Request, method string) (*request, error) {
	req := &request{
		ctx:    hr.Context(),
		method: method,
		args:   map[string]string{},
		files:  map[string]*upload{},
	}
	// The first occurrence of a parameter wins, query string first, which is
	// the order in which the Bot API server collects them.
	set := func(k, v string) {
		if _, ok := req.args[k]; !ok {
			req.args[k] = v
		}
	}
	for k, vs := range hr.URL.Query() {
		if len(vs) > 0 {
			set(k, vs[0])
		}
	}
	if hr.Body == nil || (hr.Method != http.MethodPost && hr.Method != http.MethodPut) {
		return req, nil
	}
	mediaType, mediaParams, _ := mime.ParseMediaType(hr.Header.Get("Content-Type"))
	body := http.MaxBytesReader(nil, hr.Body, maxRequestBody)
	switch mediaType {
	case "application/json":
		data, err := io.ReadAll(body)
		if err != nil {
			return nil, fmt.Errorf("read JSON body: %w", err)
		}
		parseJSONArgs(data, set)
	case "application/x-www-form-urlencoded":
		hr.Body = body
		if err := hr.ParseForm(); err != nil {
			return nil, fmt.Errorf("parse form body: %w", err)
		}
		for k, vs := range hr.PostForm {
			if len(vs) > 0 {
				set(k, vs[0])
			}
		}
	case "multipart/form-data":
		if mediaParams["boundary"] == "" {
			return nil, fmt.Errorf("multipart body without boundary")
		}
		hr.Body = body
		if err := hr.ParseMultipartForm(maxRequestBody); err != nil {
			var over *http.MaxBytesError
			if errors.As(err, &over) {
				return nil, errTooLarge
			}
			return nil, fmt.Errorf("parse multipart body: %w", err)
		}
		for k, vs := range hr.MultipartForm.Value {
			if len(vs) > 0 {
				set(k, vs[0])
			}
		}
		for k, fhs := range hr.MultipartForm.File {
			if len(fhs) == 0 {
				continue
			}
			fh := fhs[0]
			f, err := fh.Open()
			if err != nil {
				return nil, fmt.Errorf("open part %q: %w", k, err)
			}
			data, err := io.ReadAll(f)
			_ = f.Close()
			if err != nil {
				return nil, fmt.Errorf("read part %q: %w", k, err)
			}
			req.files[k] = &upload{Field: k, Name: fh.Filename, ContentType: fh.Header.Get("Content-Type"), Data: data}
		}
	}
	return req, nil
}

// parseJSONArgs flattens a JSON object body. Like the Bot API server, a body
// that is not a JSON object (telebot sends "null" for parameterless calls) is
// ignored rather than rejected.
func parseJSONArgs(data []byte, set func(k, v string)) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(data, &obj); err != nil {
		return
	}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		raw := bytes.TrimSpace(obj[k])
		if len(raw) > 0 && raw[0] == '"' {
			var s string
			if err := json.Unmarshal(raw, &s); err == nil {
				set(k, s)
				continue
			}
		}
		set(k, string(raw))
	}
}

// jsonObject is a decoded JSON object with accessors that apply the Bot API
// server's typing rules (td::JsonObject): string fields also accept numbers,
// boolean fields accept only booleans.
type jsonObject map[string]any

// decodeObject reads raw as one JSON object; unparsable and notObject are
// what Telegram answers to malformed JSON and to another JSON value.
func decodeObject(raw, unparsable, notObject string) (jsonObject, *APIError) {
	v, err := decodeJSON(raw)
	if err != nil {
		return nil, badRequest("%s", unparsable)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, badRequest("%s", notObject)
	}
	return jsonObject(m), nil
}

func decodeJSON(s string) (any, error) {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("decode JSON: %w", err)
	}
	if dec.More() {
		return nil, fmt.Errorf("decode JSON: trailing data")
	}
	return v, nil
}

func (o jsonObject) optString(name string) (string, bool, error) {
	v, ok := o[name]
	if !ok {
		return "", false, nil
	}
	switch x := v.(type) {
	case string:
		return x, true, nil
	case json.Number:
		return x.String(), true, nil
	}
	return "", true, fmt.Errorf("Field \"%s\" must be of type String", name)
}

func (o jsonObject) reqString(name string) (string, error) {
	s, ok, err := o.optString(name)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", fmt.Errorf("Can't find field \"%s\"", name)
	}
	return s, nil
}

func (o jsonObject) optBool(name string) (bool, error) {
	v, ok := o[name]
	if !ok {
		return false, nil
	}
	b, isBool := v.(bool)
	if !isBool {
		return false, fmt.Errorf("Field \"%s\" must be of type Boolean", name)
	}
	return b, nil
}

func (o jsonObject) optInt(name string) (int64, bool, error) {
	v, ok := o[name]
	if !ok {
		return 0, false, nil
	}
	var s string
	switch x := v.(type) {
	case string:
		s = x
	case json.Number:
		s = x.String()
	default:
		return 0, true, fmt.Errorf("Field \"%s\" must be a Number", name)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil {
		return 0, true, fmt.Errorf("Field \"%s\" must be a valid Number", name)
	}
	return n, true, nil
}

func (o jsonObject) reqInt(name string) (int64, error) {
	n, ok, err := o.optInt(name)
	if err != nil {
		return 0, err
	}
	if !ok {
		return 0, fmt.Errorf("Can't find field \"%s\"", name)
	}
	return n, nil
}

func (o jsonObject) optObject(name string) (jsonObject, bool, error) {
	v, ok := o[name]
	if !ok {
		return nil, false, nil
	}
	m, isObj := v.(map[string]any)
	if !isObj {
		return nil, true, fmt.Errorf("Field \"%s\" must be of type Object", name)
	}
	return jsonObject(m), true, nil
}
