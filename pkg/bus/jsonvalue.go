package bus

import (
	"bytes"
	"encoding/json"

	"github.com/lovia-fleet/lovia/pkg/loop"
)

// maxJSONLikeDepth bounds jsonLike's walk; deeper values take the JSON
// round trip (which bounds its own).
const maxJSONLikeDepth = 32

// JSONValue returns v as the JSON-like value its JSON encoding decodes to
// (nil, bool, a string, a number — int64 when integral, else float64 —,
// []any, map[string]any): what a Go value in a free-form field (a code
// agent's typed output, a Go tool's result) is on the wire, in either
// encoding, and in a run's record. JSON names the value's fields (its
// json tags) and writes the types that marshal themselves (a time.Time
// as RFC 3339), which msgpack's own encoding of the Go value would not:
// its timestamps are an extension type the wire refuses. A value
// JSON-like already is returned as it is; an error is json.Marshal's.
func JSONValue(v any) (any, error) {
	if jsonLike(v, 0) {
		return v, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var out any
	if err := dec.Decode(&out); err != nil {
		return nil, err
	}
	return numbers(out), nil
}

// jsonLike reports whether v holds only JSON-like values.
func jsonLike(v any, depth int) bool {
	if depth > maxJSONLikeDepth {
		return false
	}
	switch x := v.(type) {
	case nil, bool, string, float64, float32, int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		return true
	case []any:
		for _, e := range x {
			if !jsonLike(e, depth+1) {
				return false
			}
		}
		return true
	case map[string]any:
		for _, e := range x {
			if !jsonLike(e, depth+1) {
				return false
			}
		}
		return true
	}
	return false
}

// numbers replaces the json.Numbers of a decoded value with int64 or
// float64.
func numbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		f, _ := x.Float64()
		return f
	case []any:
		for i, e := range x {
			x[i] = numbers(e)
		}
	case map[string]any:
		for k, e := range x {
			x[k] = numbers(e)
		}
	}
	return v
}

// jsonLikeEvent is ev with its free-form fields (run_completed's output,
// tool_call_completed's result) made JSON-like for msgpack, a copy when
// one changes; ev itself when none does or one cannot (msgpack then
// encodes it as it can).
func jsonLikeEvent(ev loop.Event) loop.Event {
	switch e := ev.(type) {
	case *loop.RunCompleted:
		if !jsonLike(e.Output, 0) {
			if v, err := JSONValue(e.Output); err == nil {
				c := *e
				c.Output = v
				return &c
			}
		}
	case *loop.ToolCallCompleted:
		if !jsonLike(e.Result, 0) {
			if v, err := JSONValue(e.Result); err == nil {
				c := *e
				c.Result = v
				return &c
			}
		}
	}
	return ev
}
