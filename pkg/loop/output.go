package loop

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/lovia-fleet/lovia/pkg/loop/jsonschema"
)

// OutputSpec asks for structured output: the final answer must be JSON
// matching Schema. Providers with native JSON-schema support receive it as a
// response format; others get an "Output format" block in the system prompt.
type OutputSpec struct {
	// Name names the schema (default "output").
	Name string
	// Schema is the JSON Schema of the output.
	Schema json.RawMessage
	// Strict asks for strict schema adherence where supported.
	Strict bool
	// Decode validates the parsed JSON and returns the run's output value.
	// Nil accepts any JSON value (decoded into `any`).
	Decode func(raw json.RawMessage) (any, error)
	// TypeName names the output type in errors.
	TypeName string
}

// OutputFor derives an OutputSpec from T: its schema, validation of the
// model's JSON against it, and decoding into a T (the run's Output is a T).
func OutputFor[T any]() *OutputSpec {
	schema, err := jsonschema.For[T]()
	if err != nil {
		panic(fmt.Sprintf("loop.OutputFor: %v", err))
	}
	var zero T
	return &OutputSpec{
		Name:     "output",
		Schema:   schema.JSON(),
		TypeName: fmt.Sprintf("%T", zero),
		Decode: func(raw json.RawMessage) (any, error) {
			var v any
			if err := json.Unmarshal(raw, &v); err != nil {
				return nil, err
			}
			if err := schema.Validate(v); err != nil {
				return nil, err
			}
			var out T
			if err := json.Unmarshal(raw, &out); err != nil {
				return nil, err
			}
			return out, nil
		},
	}
}

func (s *OutputSpec) name() string {
	if s.Name == "" {
		return "output"
	}
	return s.Name
}

func (s *OutputSpec) promptBlock() string {
	return "Output format:\nRespond with only a JSON value that matches this JSON Schema, with no other text before or after it:\n" + string(s.Schema)
}

// parse parses text leniently (raw, then inside a single code fence, then
// the first balanced JSON object or array) and decodes it.
func (s *OutputSpec) parse(text string) (any, error) {
	raw, err := lenientJSON(text)
	if err != nil {
		return nil, &OutputValidationError{
			Message:    "Output could not be parsed as JSON: " + err.Error(),
			Raw:        snippet(text, 200),
			OutputType: s.TypeName,
			Cause:      err,
		}
	}
	if s.Decode == nil {
		var v any
		_ = json.Unmarshal(raw, &v)
		return v, nil
	}
	v, err := s.Decode(raw)
	if err != nil {
		return nil, &OutputValidationError{
			Message:    "Output did not validate against the output schema: " + err.Error(),
			Raw:        snippet(text, 200),
			OutputType: s.TypeName,
			Cause:      err,
		}
	}
	return v, nil
}

func snippet(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n])
}

func lenientJSON(text string) (json.RawMessage, error) {
	t := strings.TrimSpace(text)
	if t == "" {
		return nil, fmt.Errorf("the response is empty")
	}
	if json.Valid([]byte(t)) {
		return json.RawMessage(t), nil
	}
	if inner, ok := unfence(t); ok && json.Valid([]byte(inner)) {
		return json.RawMessage(inner), nil
	}
	if v, ok := firstBalanced(t); ok {
		return json.RawMessage(v), nil
	}
	var probe any
	err := json.Unmarshal([]byte(t), &probe)
	return nil, err
}

func unfence(t string) (string, bool) {
	if !strings.HasPrefix(t, "```") || !strings.HasSuffix(t, "```") || len(t) < 6 {
		return "", false
	}
	body := t[3 : len(t)-3]
	if nl := strings.IndexByte(body, '\n'); nl >= 0 {
		body = body[nl+1:]
	} else {
		return "", false
	}
	if strings.Contains(body, "```") {
		return "", false
	}
	return strings.TrimSpace(body), true
}

// firstBalanced returns the first balanced {…} or […] span that is valid
// JSON, skipping brackets inside strings.
func firstBalanced(t string) (string, bool) {
	b := []byte(t)
	for start := 0; start < len(b); start++ {
		if b[start] != '{' && b[start] != '[' {
			continue
		}
		depth, inStr, esc := 0, false, false
		for i := start; i < len(b); i++ {
			c := b[i]
			if inStr {
				switch {
				case esc:
					esc = false
				case c == '\\':
					esc = true
				case c == '"':
					inStr = false
				}
				continue
			}
			switch c {
			case '"':
				inStr = true
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					cand := b[start : i+1]
					if json.Valid(cand) {
						return string(bytes.TrimSpace(cand)), true
					}
					i = len(b)
				}
			}
		}
	}
	return "", false
}

// RepairPolicy decides what to do after an output failed validation on
// attempt k (1-based): return a prompt to append as a user message and run
// another turn, or ok=false to fail the run.
type RepairPolicy interface {
	RepairPrompt(attempt int, err *OutputValidationError) (prompt string, ok bool)
}

// RepairAttempts is the default repair policy: up to N repair turns with a
// prompt that quotes the error.
type RepairAttempts int

// RepairPrompt implements RepairPolicy.
func (n RepairAttempts) RepairPrompt(attempt int, err *OutputValidationError) (string, bool) {
	if attempt > int(n) {
		return "", false
	}
	return "Your previous response could not be parsed or validated against the required output format.\n" +
		"Error: " + err.Error() + "\n" +
		"Respond again with only the JSON value that matches the schema, and nothing else.", true
}

// DefaultRepair allows one repair turn.
const DefaultRepair = RepairAttempts(1)

// NoRepair fails at the first invalid output.
const NoRepair = RepairAttempts(0)
