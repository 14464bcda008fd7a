package llm

import (
	"encoding/json"
	"reflect"
	"strings"
	"sync"
	"time"
)

// JSONSchemaer lets a JSON target give its own schema for structured
// outputs instead of the one derived from its Go type, e.g. to add an enum
// or describe a field with a custom UnmarshalJSON.
type JSONSchemaer interface {
	JSONSchema() map[string]any
}

// schemaCache holds the derived schema per target type: derivation walks
// the type with reflection, and the memory pipeline asks hundreds of times
// a second for the same few types. Schemas are shared; never modify one.
var schemaCache sync.Map // reflect.Type → map[string]any

// SchemaFor returns the JSON schema JSON calls send for out (a pointer to
// the target): out's own JSONSchema if it has one, otherwise one derived
// from its type. Derivation is deliberately small, because all it has to
// do is tell the server the shape: objects with their properties
// (encoding/json names; every field without omitempty is required; no
// additional properties), arrays, strings, integers, numbers, booleans;
// time.Time is a string; interfaces, json.RawMessage and types with their
// own UnmarshalJSON accept anything.
func SchemaFor(out any) map[string]any {
	if s, ok := out.(JSONSchemaer); ok {
		return s.JSONSchema()
	}
	t := reflect.TypeOf(out)
	if t == nil {
		return map[string]any{}
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if s, ok := schemaCache.Load(t); ok {
		return s.(map[string]any)
	}
	s := schemaOf(t, map[reflect.Type]bool{})
	schemaCache.Store(t, s)
	return s
}

var (
	timeType      = reflect.TypeFor[time.Time]()
	rawType       = reflect.TypeFor[json.RawMessage]()
	unmarshalType = reflect.TypeFor[json.Unmarshaler]()
)

func schemaOf(t reflect.Type, visiting map[reflect.Type]bool) map[string]any {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == timeType:
		return map[string]any{"type": "string"}
	case t == rawType, t.Kind() == reflect.Interface:
		return map[string]any{}
	case reflect.PointerTo(t).Implements(unmarshalType):
		return map[string]any{}
	}
	switch t.Kind() {
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return map[string]any{"type": "integer"}
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number"}
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return map[string]any{"type": "string"} // []byte is base64 text
		}
		return map[string]any{"type": "array", "items": schemaOf(t.Elem(), visiting)}
	case reflect.Map:
		return map[string]any{"type": "object", "additionalProperties": schemaOf(t.Elem(), visiting)}
	case reflect.Struct:
		if visiting[t] {
			return map[string]any{} // a recursive type: say no more than "anything"
		}
		visiting[t] = true
		defer delete(visiting, t)
		props := map[string]any{}
		required := []string{}
		addFields(t, visiting, props, &required)
		return map[string]any{"type": "object", "properties": props, "required": required, "additionalProperties": false}
	}
	return map[string]any{}
}

// addFields adds t's JSON fields to a schema's properties and required.
func addFields(t reflect.Type, visiting map[reflect.Type]bool, props map[string]any, required *[]string) {
	jsonFields(t, func(name string, ft reflect.Type, omit bool) {
		props[name] = schemaOf(ft, visiting)
		if !omit {
			*required = append(*required, name)
		}
	})
}

// jsonFields calls visit with each field encoding/json reads of struct
// type t: its JSON name, its type and whether it is omitempty, inlining
// embedded structs without a tag as encoding/json does. The schema and the
// answer's coercion both walk a type with it, so they agree on its fields.
func jsonFields(t reflect.Type, visit func(name string, ft reflect.Type, omit bool)) {
	for i := range t.NumField() {
		f := t.Field(i)
		name, omit, skip := jsonName(f)
		if skip {
			continue
		}
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if f.Anonymous && f.Tag.Get("json") == "" && ft.Kind() == reflect.Struct {
			jsonFields(ft, visit)
			continue
		}
		if f.IsExported() {
			visit(name, f.Type, omit)
		}
	}
}

func jsonName(f reflect.StructField) (name string, omitempty, skip bool) {
	tag := f.Tag.Get("json")
	if tag == "-" {
		return "", false, true
	}
	name, opts, _ := strings.Cut(tag, ",")
	if name == "" {
		name = f.Name
	}
	for o := range strings.SplitSeq(opts, ",") {
		if o == "omitempty" || o == "omitzero" {
			omitempty = true
		}
	}
	return name, omitempty, false
}

// strictable reports whether OpenAI's strict structured outputs accept the
// schema: every object lists all its properties as required and allows no
// others. A schema that does not qualify is still sent, non-strict.
func strictable(s map[string]any) bool {
	switch s["type"] {
	case "object":
		props, _ := s["properties"].(map[string]any)
		if props == nil || s["additionalProperties"] != false {
			return false
		}
		req, _ := s["required"].([]string)
		if len(req) != len(props) {
			return false
		}
		for _, p := range props {
			ps, ok := p.(map[string]any)
			if !ok || !strictable(ps) {
				return false
			}
		}
		return true
	case "array":
		items, ok := s["items"].(map[string]any)
		return ok && strictable(items)
	case "string", "integer", "number", "boolean":
		return true
	}
	return false
}

// requiredFields lists the top-level required properties of a schema.
func requiredFields(s map[string]any) []string {
	switch r := s["required"].(type) {
	case []string:
		return r
	case []any:
		out := make([]string, 0, len(r))
		for _, v := range r {
			if str, ok := v.(string); ok {
				out = append(out, str)
			}
		}
		return out
	}
	return nil
}

// schemaName is a name OpenAI accepts for a json_schema
// (^[a-zA-Z0-9_-]{1,64}$), from the target's type.
func schemaName(out any) string {
	t := reflect.TypeOf(out)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	name := "answer"
	if t != nil && t.Name() != "" {
		name = t.Name()
	}
	b := []byte(name)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			b[i] = '_'
		}
	}
	if len(b) > 64 {
		b = b[:64]
	}
	return string(b)
}
