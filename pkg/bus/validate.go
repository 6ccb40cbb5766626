package bus

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/vmihailenco/msgpack/v5"
)

// runRequestFields are the top-level fields of a run request
// (docs/protocol.md#run-request), sorted.
func runRequestFields() []string {
	return []string{"agent", "budget", "encoding", "extra_instructions", "if_run_exists", "input",
		"max_turns", "metadata", "on_busy", "output_schema", "run_id", "session_id"}
}

// topLevel returns the top-level keys of a JSON or msgpack object, with
// whether the "input" key holds an empty or blank string. (An empty list
// is a resubmission's way to resume with nothing new.) It returns nothing for a
// body that is not an object.
func topLevel(enc Encoding, body []byte) (keys []string, emptyInput bool) {
	switch enc {
	case JSON:
		var m map[string]json.RawMessage
		if json.Unmarshal(body, &m) != nil {
			return nil, false
		}
		for k := range m {
			keys = append(keys, k)
		}
		if in, ok := m["input"]; ok {
			var s string
			emptyInput = json.Unmarshal(in, &s) == nil && strings.TrimSpace(s) == ""
		}
	case Msgpack:
		var m map[string]msgpack.RawMessage
		if Unmarshal(Msgpack, body, &m) != nil {
			return nil, false
		}
		for k := range m {
			keys = append(keys, k)
		}
		if in, ok := m["input"]; ok {
			var s string
			emptyInput = msgpack.Unmarshal(in, &s) == nil && strings.TrimSpace(s) == ""
		}
	}
	slices.Sort(keys)
	return keys, emptyInput
}

// checkFields refuses unknown top-level fields, naming them and the known
// ones, and an input given as an empty or blank string (a paid model call
// on nothing).
func checkFields(enc Encoding, body []byte) error {
	if enc == JSON && fieldsPlainJSON(body) {
		return nil
	}
	keys, emptyInput := topLevel(enc, body)
	known := runRequestFields()
	var unknown []string
	for _, k := range keys {
		if _, ok := slices.BinarySearch(known, k); !ok {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		what := "unknown field"
		if len(unknown) > 1 {
			what += "s"
		}
		return &FieldError{Field: unknown[0], Reason: fmt.Sprintf("%s %s; known fields: %s", what, strings.Join(unknown, ", "), strings.Join(known, ", "))}
	}
	if emptyInput {
		return &FieldError{Field: "input", Reason: "is empty: give the run's input, a non-blank string or a list of {role, content}"}
	}
	return nil
}

// PeekRunRequest reads what it can of a run request that does not decode
// or validate (a wrong type, a body over a size limit): its run_id, and
// its agent, each only when it is a valid identifier. It returns nil when
// the body yields neither. A worker uses it to report the failure on the
// run's own subject, <p>.events.<run_id>.
func PeekRunRequest(h nats.Header, body []byte) *RunRequest {
	enc, err := EncodingOf(h, body)
	if err != nil {
		return nil
	}
	var fields struct {
		RunID any `json:"run_id" msgpack:"run_id"`
		Agent any `json:"agent" msgpack:"agent"`
	}
	var m map[string]any
	switch enc {
	case JSON:
		var raw map[string]json.RawMessage
		if json.Unmarshal(body, &raw) != nil {
			return nil
		}
		_ = json.Unmarshal(raw["run_id"], &fields.RunID)
		_ = json.Unmarshal(raw["agent"], &fields.Agent)
	case Msgpack:
		if Unmarshal(Msgpack, body, &m) != nil {
			return nil
		}
		fields.RunID, fields.Agent = m["run_id"], m["agent"]
	}
	var r RunRequest
	if s, ok := fields.RunID.(string); ok && ValidateID("run_id", s) == nil {
		r.RunID = s
	}
	if s, ok := fields.Agent.(string); ok && ValidateID("agent", s) == nil {
		r.Agent = s
	}
	if r.RunID == "" && r.Agent == "" {
		return nil
	}
	return &r
}

// schemaTypes are the type names of JSON Schema.
var schemaTypes = []string{"array", "boolean", "integer", "null", "number", "object", "string"}

// checkSchema checks that raw is a JSON Schema object whose structural
// keywords have the right shape (type names, properties and $defs of
// schemas, required as a list of names, items and additionalProperties as
// a schema or a boolean, anyOf/oneOf/allOf as lists of schemas), naming
// the offending path.
func checkSchema(raw []byte) error {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return &FieldError{Field: "output_schema", Reason: "is not valid JSON"}
	}
	return schemaAt("output_schema", v)
}

func schemaAt(path string, v any) error {
	m, ok := v.(map[string]any)
	if !ok {
		return &FieldError{Field: path, Reason: fmt.Sprintf("must be a JSON Schema object such as {\"type\":\"object\",\"properties\":{…}}, not %s", jsonKind(v))}
	}
	if t, ok := m["type"]; ok {
		names, isList := t.([]any)
		if !isList {
			names = []any{t}
		}
		for _, n := range names {
			s, ok := n.(string)
			if _, known := slices.BinarySearch(schemaTypes, s); !ok || !known {
				return &FieldError{Field: path + ".type", Reason: fmt.Sprintf("%v is not one of %s", n, strings.Join(schemaTypes, ", "))}
			}
		}
	}
	for _, kw := range []string{"properties", "$defs", "definitions", "patternProperties"} {
		if p, ok := m[kw]; ok {
			props, ok := p.(map[string]any)
			if !ok {
				return &FieldError{Field: path + "." + kw, Reason: "must be an object of schemas"}
			}
			for _, name := range sortedKeys(props) {
				if err := schemaAt(path+"."+kw+"."+name, props[name]); err != nil {
					return err
				}
			}
		}
	}
	for _, kw := range []string{"items", "additionalProperties", "not"} {
		if s, ok := m[kw]; ok {
			if _, isBool := s.(bool); isBool && kw != "not" {
				continue
			}
			if err := schemaAt(path+"."+kw, s); err != nil {
				return err
			}
		}
	}
	for _, kw := range []string{"anyOf", "oneOf", "allOf"} {
		if l, ok := m[kw]; ok {
			list, ok := l.([]any)
			if !ok || len(list) == 0 {
				return &FieldError{Field: path + "." + kw, Reason: "must be a non-empty list of schemas"}
			}
			for i, s := range list {
				if err := schemaAt(fmt.Sprintf("%s.%s[%d]", path, kw, i), s); err != nil {
					return err
				}
			}
		}
	}
	if r, ok := m["required"]; ok {
		list, ok := r.([]any)
		if !ok {
			return &FieldError{Field: path + ".required", Reason: "must be a list of property names"}
		}
		for _, n := range list {
			if _, ok := n.(string); !ok {
				return &FieldError{Field: path + ".required", Reason: fmt.Sprintf("%v is not a property name", n)}
			}
		}
	}
	if e, ok := m["enum"]; ok {
		if _, ok := e.([]any); !ok {
			return &FieldError{Field: path + ".enum", Reason: "must be a list of values"}
		}
	}
	return nil
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case float64:
		return "a number"
	case []any:
		return "an array"
	}
	return "an object"
}
