package bus

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// fieldsCases are run request bodies for checkFields, plain and not.
var fieldsCases = []string{
	`{}`, ` { } `, `{"agent":"calc","input":"What is 12*7?"}`,
	"{\n \"agent\" : \"a\" ,\t\"input\" : [ {\"role\":\"user\",\"content\":\"x, }\\\"]\"} ] }",
	`{"input":""}`, `{"input":"  "}`, `{"input":"\t"}`, `{"input":"\u0020"}`, `{"input":"\n"}`, "{\"input\":\"\u00a0\"}",
	`{"input":"x","input":""}`, `{"input":"","input":"x"}`, `{"input":[]}`, `{"input":null}`, `{"input":5}`,
	`{"agent":"a","bogus":1}`, `{"Agent":"a"}`, `{"\u0061gent":"a"}`, `{"agent":"a","metadata":{"k":"v","n":[1,{"x":"}"}]}}`,
	`{"max_turns":3,"budget":{"max_seconds":1.5},"output_schema":{"type":"object"},"encoding":"json"}`,
	`{"run_id":"r","session_id":"s","if_run_exists":"resume","extra_instructions":"é \"q\""}`,
	`[1,2]`, `{"input":"x"} `, `{"metadata":{"a":true,"b":false,"c":null},"agent":"a"}`,
}

// TestFieldsPlainJSON: the scan says "plain" only for bodies the decoding
// check accepts, and for the common ones it does so without allocating.
func TestFieldsPlainJSON(t *testing.T) { // not parallel: AllocsPerRun
	plain := 0
	for _, body := range fieldsCases {
		b := []byte(body)
		require.True(t, json.Valid(b), body)
		if fieldsPlainJSON(b) {
			plain++
			keys, empty := topLevel(JSON, b)
			require.False(t, empty, "%s: an empty input is not plain", body)
			for _, k := range keys {
				require.True(t, isRunRequestField([]byte(k)), "%s: %s is not a known field", body, k)
			}
		}
	}
	require.GreaterOrEqual(t, plain, 10, "the common bodies are plain")
	body := []byte(`{"agent":"calc","input":"What is 12*7?","metadata":{"k":["v",1]}}`)
	require.True(t, fieldsPlainJSON(body))
	require.Zero(t, testing.AllocsPerRun(100, func() { _ = checkFields(JSON, body) }), "a plain body's check allocates nothing")
}

// FuzzFieldsPlainJSON: whatever the body, the scan never calls plain what
// the decoding check refuses.
func FuzzFieldsPlainJSON(f *testing.F) {
	for _, c := range fieldsCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if !json.Valid(b) || !fieldsPlainJSON(b) {
			return
		}
		keys, empty := topLevel(JSON, b)
		if keys == nil && string(b) != "{}" {
			var m map[string]json.RawMessage
			if json.Unmarshal(b, &m) != nil {
				t.Fatalf("plain but not an object: %q", b)
			}
		}
		if empty {
			t.Fatalf("plain with an empty input: %q", b)
		}
		for _, k := range keys {
			if !isRunRequestField([]byte(k)) {
				t.Fatalf("plain with unknown field %q: %q", k, b)
			}
		}
	})
}
