package llm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"

	"github.com/kaptinlin/jsonrepair"
)

// Repair kinds, the "kind" label of llm_answer_repairs_total: what the
// extractor had to remove or convert before an answer decoded. An operator
// reads them to see what their model needs (a model that always needs
// "think" wants LLM_THINK=false or a non-reasoning model).
const (
	repairThink        = "think"         // <think>…</think>, a lone leading …</think>
	repairBOM          = "bom"           // a UTF-8 byte order mark
	repairFence        = "fence"         // a ```json … ``` code fence
	repairProse        = "prose"         // text before the JSON value
	repairTrailing     = "trailing"      // text after the first complete JSON value
	repairCoerceNumber = "coerce_number" // "80" → 80, 80.0 → 80 for a numeric field
	repairCoerceBool   = "coerce_bool"   // "true" → true for a boolean field
	repairJSONRepair   = "jsonrepair"    // syntax fixed by jsonrepair (quotes, commas, comments)
)

// Causes of a rejected answer. Each wraps ErrInvalidJSON, so callers that
// retry or skip on invalid JSON keep working, and each says what to change.
var (
	// ErrTruncated: the answer was cut off at the answer budget
	// (done_reason / finish_reason "length"). It is refused before any
	// repair: completing cut-off JSON would be guessing.
	ErrTruncated = fmt.Errorf("%w: answer cut off at the length limit", ErrInvalidJSON)
	// ErrReasoningOnly: the model reasoned but gave no answer (content
	// empty, or only a <think> block), typically because reasoning used up
	// the budget.
	ErrReasoningOnly = fmt.Errorf("%w: the answer holds only the model's reasoning", ErrInvalidJSON)
)

// answerText is what extraction works on: one provider answer.
type answerText struct {
	content    string
	reasoning  string
	stopReason string
}

// repairs collects the repair kinds applied to one answer, counted once
// the answer is accepted or rejected.
type repairs []string

func (r *repairs) add(kind string) { *r = append(*r, kind) }

// stripReasoning removes a BOM and the model's reasoning from an answer:
// leading <think>…</think> (or <thinking>) blocks, empty ones included, and
// everything up to a lone closing tag (templates that put the opening tag
// in the prompt leave only the closing one in the answer). The reasoning
// field servers split off is never part of content, so nothing is done
// about it here. ok is false when no answer remains.
func stripReasoning(s string, rep *repairs) (string, bool) {
	if t := strings.TrimLeft(s, " \t\r\n"); strings.HasPrefix(t, "\uFEFF") {
		s = strings.TrimPrefix(t, "\uFEFF")
		rep.add(repairBOM)
	}
	stripped := false
	for {
		t := strings.TrimLeft(s, " \t\r\n")
		open, closeTag := "", ""
		switch {
		case strings.HasPrefix(t, "<think>"):
			open, closeTag = "<think>", "</think>"
		case strings.HasPrefix(t, "<thinking>"):
			open, closeTag = "<thinking>", "</thinking>"
		}
		if open == "" {
			break
		}
		stripped = true
		end := strings.Index(t, closeTag)
		if end < 0 {
			// Reasoning never closed: the budget ran out while thinking.
			rep.add(repairThink)
			return "", false
		}
		s = t[end+len(closeTag):]
	}
	for _, closeTag := range []string{"</think>", "</thinking>"} {
		if i := strings.Index(s, closeTag); i >= 0 {
			s = s[i+len(closeTag):]
			stripped = true
		}
	}
	if stripped {
		rep.add(repairThink)
		s = strings.TrimLeft(s, " \t\r\n")
	}
	return s, strings.TrimSpace(s) != ""
}

// extractJSON finds the JSON value in an answer whose reasoning is already
// stripped: inside a code fence if there is one, after any prose, up to the
// end of the first complete value. It does not judge the value's syntax.
func extractJSON(s string, rep *repairs) (string, error) {
	s = strings.TrimSpace(s)
	if i := strings.Index(s, "```"); i >= 0 {
		if inner, before, after, ok := fenced(s, i); ok {
			rep.add(repairFence)
			if strings.TrimSpace(before) != "" {
				rep.add(repairProse)
			}
			if strings.TrimSpace(after) != "" {
				rep.add(repairTrailing)
			}
			s = strings.TrimSpace(inner)
		}
	}
	// Try each '{' or '[' in turn: prose may hold brackets of its own
	// ("Here is the verdict [as JSON]: {...}"). A candidate that is valid
	// JSON wins over one jsonrepair could fix, which wins over the rest.
	type cand struct{ i, end int }
	var complete []cand
	incomplete := false
	for start, n := 0, 0; start < len(s) && n < maxCandidates; n++ {
		i := strings.IndexAny(s[start:], "{[")
		if i < 0 {
			break
		}
		i += start
		end, ok := valueEnd(s, i)
		if !ok {
			incomplete = true
			start = i + 1
			continue
		}
		// Go on after the value, not inside it: a nested array must not
		// pass for the answer when the outer value needs a repair.
		start = end
		complete = append(complete, cand{i, end})
	}
	pick := func(c cand) string {
		if strings.TrimSpace(s[:c.i]) != "" {
			rep.add(repairProse)
		}
		if strings.TrimSpace(s[c.end:]) != "" {
			rep.add(repairTrailing)
		}
		return s[c.i:c.end]
	}
	for _, c := range complete {
		if json.Valid([]byte(s[c.i:c.end])) {
			return pick(c), nil
		}
	}
	for _, c := range complete {
		if repairable(s[c.i:c.end]) {
			return pick(c), nil
		}
	}
	if incomplete {
		return "", fmt.Errorf("%w: the JSON value is not complete (content %q)", ErrInvalidJSON, snippet(s))
	}
	if len(complete) > 0 {
		return pick(complete[0]), nil // malformed: the repair step says so
	}
	return "", fmt.Errorf("%w: no JSON object or array in the answer (content %q)", ErrInvalidJSON, snippet(s))
}

// maxCandidates bounds the brackets tried as the start of the JSON value,
// so a long prose answer cannot make extraction quadratic.
const maxCandidates = 32

// fenced returns the body of the first ``` fence starting at i, with the
// text around it; the info string ("json") is dropped.
func fenced(s string, i int) (inner, before, after string, ok bool) {
	rest := s[i+3:]
	nl := strings.IndexByte(rest, '\n')
	if nl < 0 {
		return "", "", "", false
	}
	info := strings.TrimSpace(rest[:nl])
	if info != "" && strings.ContainsAny(info, "{[") {
		return "", "", "", false // "```{...}```" on one line: not a fence with an info string
	}
	body := rest[nl+1:]
	end := strings.Index(body, "```")
	if end < 0 {
		return body, s[:i], "", true // an unclosed fence: the value decides
	}
	return body[:end], s[:i], body[end+3:], true
}

// repairable reports whether jsonrepair turns v into a JSON object or
// array (a bracketed aside in prose becomes at most a string list).
func repairable(v string) bool {
	r, err := jsonrepair.Repair(v)
	return err == nil && json.Valid([]byte(r)) && r != `""` && r != "null"
}

// valueEnd scans the JSON-ish value starting at s[i] ('{' or '[') and
// returns the index after its closing bracket. Strings (double or single
// quoted) are skipped, so brackets inside them do not count. complete is
// false when the text ends first.
func valueEnd(s string, i int) (end int, complete bool) {
	depth := 0
	var quote byte
	for j := i; j < len(s); j++ {
		c := s[j]
		if quote != 0 {
			switch c {
			case '\\':
				j++
			case quote:
				quote = 0
			}
			continue
		}
		switch c {
		case '"':
			quote = c
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				return j + 1, true
			}
		}
	}
	return len(s), false
}

// decodeAnswer turns one JSON-mode answer into out: the cut-off check, the
// extraction, syntax repair, the empty-object check, a decode with
// unambiguous coercions, then out's own Validate. limit names the setting
// to raise when the answer was cut off.
func decodeAnswer(a answerText, out any, limit string, rep *repairs) error {
	if a.stopReason == "length" {
		return fmt.Errorf("%w: raise %s (content %q)", ErrTruncated, limit, snippet(a.content))
	}
	body, ok := stripReasoning(a.content, rep)
	if !ok {
		if strings.TrimSpace(a.reasoning) != "" || strings.TrimSpace(a.content) != "" {
			where := "its reasoning field"
			if strings.TrimSpace(a.reasoning) == "" {
				where = "an unclosed <think> block"
			}
			return fmt.Errorf("%w: the content is empty, any JSON is only in %s (set LLM_THINK=false, or raise %s)",
				ErrReasoningOnly, where, limit)
		}
		return fmt.Errorf("%w: empty answer", ErrInvalidJSON)
	}
	v, err := extractJSON(body, rep)
	if err != nil {
		return err
	}
	if !json.Valid([]byte(v)) {
		fixed, rerr := jsonrepair.Repair(v)
		if rerr != nil || !json.Valid([]byte(fixed)) {
			return fmt.Errorf("%w: malformed JSON (content %q)", ErrInvalidJSON, snippet(a.content))
		}
		rep.add(repairJSONRepair)
		v = fixed
	}
	if isEmptyObject(v) {
		if req := requiredFields(SchemaFor(out)); len(req) > 0 {
			return fmt.Errorf("%w: empty object {} where %s are required", ErrInvalidJSON, strings.Join(req, ", "))
		}
	}
	if err := decodeCoercing([]byte(v), out, rep); err != nil {
		return fmt.Errorf("%w: %w (content %q)", ErrInvalidJSON, err, snippet(a.content))
	}
	if val, ok := out.(interface{ Validate() error }); ok {
		if err := val.Validate(); err != nil {
			return fmt.Errorf("%w: validation: %w", ErrInvalidJSON, err)
		}
	}
	return nil
}

// isEmptyObject reports whether the (valid) value is {} — by looking, not
// decoding, since every answer passes here.
func isEmptyObject(v string) bool {
	v = strings.TrimSpace(v)
	return len(v) >= 2 && v[0] == '{' && strings.TrimSpace(v[1:len(v)-1]) == ""
}

// decodeCoercing decodes b into out. A clean answer takes one strict
// json.Unmarshal (the fast path); only a type mismatch takes the slow path:
// decode to a generic tree, coerce what is unambiguous along out's type,
// decode again.
//
// Unambiguous means: a string holding a number into a numeric field
// ("80" → 80); a whole number written as a float into an integer field
// (80.0 → 80); "true"/"false" (any case) into a boolean field. A
// fractional number into an integer field (79.6) is refused, not rounded:
// an integer field says the domain wants whole numbers, and rounding
// guesses what the model meant (for an id it would point at another one).
func decodeCoercing(b []byte, out any, rep *repairs) error {
	err := json.Unmarshal(b, out)
	var te *json.UnmarshalTypeError
	if err == nil || !errors.As(err, &te) {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var tree any
	if err := dec.Decode(&tree); err != nil {
		return err
	}
	t := reflect.TypeOf(out).Elem()
	tree, cerr := coerce(tree, t, "", rep)
	if cerr != nil {
		return cerr
	}
	fixed, err := json.Marshal(tree)
	if err != nil {
		return err
	}
	// Start from zero: the failed strict decode may have filled part of out.
	reflect.ValueOf(out).Elem().SetZero()
	return json.Unmarshal(fixed, out)
}

// coerce walks a decoded answer along the type it must fit and rewrites
// only what is unambiguous (a number or a bool sent as a string, a whole
// float for an integer field), noting each repair in rep.
func coerce(v any, t reflect.Type, path string, rep *repairs) (any, error) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if v == nil || reflect.PointerTo(t).Implements(unmarshalType) {
		return v, nil
	}
	switch t.Kind() {
	case reflect.Struct:
		return coerceStruct(v, t, path, rep)
	case reflect.Slice, reflect.Array:
		list, ok := v.([]any)
		if !ok {
			return v, nil
		}
		for i := range list {
			c, err := coerce(list[i], t.Elem(), path+"["+strconv.Itoa(i)+"]", rep)
			if err != nil {
				return nil, err
			}
			list[i] = c
		}
		return list, nil
	case reflect.Map:
		m, ok := v.(map[string]any)
		if !ok {
			return v, nil
		}
		return coerceMembers(m, path, rep, func(string) (reflect.Type, bool) { return t.Elem(), true })
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return coerceInteger(v, path, rep)
	case reflect.Float32, reflect.Float64:
		if n, fromString := numberOf(v); n != "" && fromString {
			rep.add(repairCoerceNumber)
			return json.Number(n), nil
		}
	case reflect.Bool:
		return coerceBool(v, rep), nil
	}
	return v, nil
}

// coerceStruct coerces the members of an object that name a field of t,
// matched as encoding/json does: exactly, else ignoring case.
func coerceStruct(v any, t reflect.Type, path string, rep *repairs) (any, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return v, nil
	}
	fields := map[string]reflect.Type{}
	jsonFields(t, func(name string, ft reflect.Type, _ bool) { fields[name] = ft })
	return coerceMembers(m, path, rep, func(k string) (reflect.Type, bool) {
		if ft, ok := fields[k]; ok {
			return ft, true
		}
		for name, typ := range fields {
			if strings.EqualFold(name, k) {
				return typ, true
			}
		}
		return nil, false
	})
}

// coerceMembers coerces each member of m to the type typeOf gives its key,
// leaving the members it gives none as they are.
func coerceMembers(m map[string]any, path string, rep *repairs, typeOf func(string) (reflect.Type, bool)) (any, error) {
	for k, child := range m {
		ft, ok := typeOf(k)
		if !ok {
			continue
		}
		c, err := coerce(child, ft, join(path, k), rep)
		if err != nil {
			return nil, err
		}
		m[k] = c
	}
	return m, nil
}

// coerceInteger reads a number or a numeric string for an integer field; a
// fraction is an error, never rounded.
func coerceInteger(v any, path string, rep *repairs) (any, error) {
	n, fromString := numberOf(v)
	if n == "" {
		return v, nil
	}
	if _, err := strconv.ParseInt(n, 10, 64); err == nil {
		if fromString {
			rep.add(repairCoerceNumber)
		}
		return json.Number(n), nil
	}
	f, err := strconv.ParseFloat(n, 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return v, nil
	}
	if f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return nil, fmt.Errorf("%s: %s is not a whole number (an integer field; fractions are not rounded)", orTop(path), n)
	}
	rep.add(repairCoerceNumber)
	return json.Number(strconv.FormatInt(int64(f), 10)), nil
}

// coerceBool reads "true" and "false" in any case and spacing for a bool.
func coerceBool(v any, rep *repairs) any {
	s, ok := v.(string)
	if !ok {
		return v
	}
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "true":
		rep.add(repairCoerceBool)
		return true
	case "false":
		rep.add(repairCoerceBool)
		return false
	}
	return v
}

// numberOf returns v as a number literal: a JSON number, or a string that
// parses as one (fromString).
func numberOf(v any) (n string, fromString bool) {
	switch x := v.(type) {
	case json.Number:
		return string(x), false
	case string:
		s := strings.TrimSpace(x)
		if _, err := strconv.ParseFloat(s, 64); err == nil && s != "" && !strings.ContainsAny(s, "xXpP_") {
			if json.Valid([]byte(s)) {
				return s, true
			}
		}
	}
	return "", false
}

func join(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}

func orTop(path string) string {
	if path == "" {
		return "the answer"
	}
	return path
}
