package bus_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/lovia-fleet/lovia/pkg/bus"
)

// TestDecodeRunRequestKeepsTheRunID: a request with a valid run_id and
// another bad field still yields its run id, so that its failure is
// reported on the run's own subject.
func TestDecodeRunRequestKeepsTheRunID(t *testing.T) {
	t.Parallel()
	mp, err := msgpack.Marshal(map[string]any{"run_id": "r-mp", "input": "hi", "max_turns": "ten"})
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		h    nats.Header
		body string
	}{
		{"negative max_turns", nil, `{"run_id":"r-neg","input":"hi","max_turns":-1}`},
		{"a wrong type", nil, `{"run_id":"r-type","input":"hi","max_turns":"ten"}`},
		{"a wrong type before the run id", nil, `{"max_turns":"ten","input":"hi","run_id":"r-type2"}`},
		{"an unknown encoding", nil, `{"run_id":"r-enc","input":"hi","encoding":"xml"}`},
		{"an unknown field", nil, `{"run_id":"r-field","inptu":"hi"}`},
		{"a malformed input", nil, `{"run_id":"r-in","input":{"role":"user"}}`},
		{"a bad schema", nil, `{"run_id":"r-schema","input":"hi","output_schema":"notaschema"}`},
		{"msgpack with a wrong type", nats.Header{bus.HeaderContentType: {bus.ContentTypeMsgpack}}, string(mp)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _, err := bus.DecodeRunRequest(tc.h, []byte(tc.body))
			require.True(t, errors.Is(err, bus.ErrInvalidRequest) || errors.Is(err, bus.ErrMalformed), "%v", err)
			require.NotNil(t, req, "the run id was readable")
			want := "r-mp"
			if tc.h == nil {
				want = tc.body[strings.Index(tc.body, `"run_id":"`)+len(`"run_id":"`):]
				want = want[:strings.IndexByte(want, '"')]
			}
			require.Equal(t, want, req.RunID)
		})
	}
	t.Run("an invalid run id is not read", func(t *testing.T) {
		req, _, err := bus.DecodeRunRequest(nil, []byte(`{"run_id":"a.b","input":"hi","max_turns":"x"}`))
		require.Error(t, err)
		require.Nil(t, req)
	})
}

// TestPeekRunRequest reads the run id of a body too large to decode as a
// request.
func TestPeekRunRequest(t *testing.T) {
	t.Parallel()
	big := `{"input":"` + strings.Repeat("x", 2<<20) + `","run_id":"r-big"}`
	req := bus.PeekRunRequest(nil, []byte(big))
	require.NotNil(t, req)
	require.Equal(t, "r-big", req.RunID)
	require.Nil(t, bus.PeekRunRequest(nil, []byte(`not json`)))
	require.Nil(t, bus.PeekRunRequest(nil, []byte(`{"input":"hi"}`)))
}

// TestRunRequestValidation: what submit and the workers refuse, each with
// the field named.
func TestRunRequestValidation(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, body, field, text string
	}{
		{"missing input", `{"agent":"demo"}`, "input", "is required"},
		{"empty input", `{"input":""}`, "input", "is empty"},
		{"empty input with a run id", `{"run_id":"r1","input":""}`, "input", "is empty"},
		{"empty list input", `{"input":[]}`, "input", "is required"},
		{"blank input", `{"input":"  \n\t "}`, "input", "is empty"},
		{"a message without text", `{"input":[{"role":"user","content":"hi"},{"role":"user","content":"  "}]}`, "input[1].content", "is empty"},
		{"no input on a restart", `{"run_id":"r1","if_run_exists":"restart"}`, "input", "is required"},
		{"unknown field", `{"inptu":"hi"}`, "inptu", "unknown field inptu; known fields: agent, budget, encoding, extra_instructions, if_run_exists, input, max_turns, metadata, on_busy, output_schema, run_id, session_id"},
		{"unknown fields", `{"input":"hi","zz":1,"aa":2}`, "aa", "unknown fields aa, zz;"},
		{"a schema that is a string", `{"input":"hi","output_schema":"notaschema"}`, "output_schema", "must be a JSON Schema object"},
		{"a schema that is a list", `{"input":"hi","output_schema":[1]}`, "output_schema", "not an array"},
		{"a schema with an unknown type", `{"input":"hi","output_schema":{"type":"objekt"}}`, "output_schema.type", "objekt is not one of"},
		{"a schema with a bad property", `{"input":"hi","output_schema":{"type":"object","properties":{"n":"int"}}}`, "output_schema.properties.n", "must be a JSON Schema object"},
		{"a schema with a bad required", `{"input":"hi","output_schema":{"type":"object","required":"n"}}`, "output_schema.required", "list of property names"},
		{"negative max_turns", `{"input":"hi","max_turns":-2}`, "max_turns", "negative"},
		{"negative budget", `{"input":"hi","budget":{"max_tool_calls":-1}}`, "budget.max_tool_calls", "negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := bus.DecodeRunRequest(nil, []byte(tc.body))
			require.ErrorIs(t, err, bus.ErrInvalidRequest)
			var fe *bus.FieldError
			require.ErrorAs(t, err, &fe)
			require.Equal(t, tc.field, fe.Field)
			require.Contains(t, err.Error(), tc.text)
			info := bus.ErrorFor(err)
			require.Equal(t, bus.TypeInvalidRequest, info.Type)
			require.NotEmpty(t, info.Hint)
		})
	}
	for _, ok := range []string{
		`{"input":"hi"}`,
		`{"run_id":"r1"}`, // a resubmission resumes the run
		`{"run_id":"r1","if_run_exists":"resume_only"}`,
		`{"input":"hi","output_schema":{"type":"object","properties":{"n":{"type":["integer","null"]},"tags":{"type":"array","items":{"type":"string"}}},"required":["n"],"additionalProperties":false}}`,
	} {
		_, _, err := bus.DecodeRunRequest(nil, []byte(ok))
		require.NoError(t, err, ok)
	}
}

// TestEveryErrorReplyHasAHint: whatever the error, the reply body says
// what to do next.
func TestEveryErrorReplyHasAHint(t *testing.T) {
	t.Parallel()
	for _, err := range []error{
		&bus.FieldError{Field: "input", Reason: "is required"},
		&bus.DecodeError{What: "run request", Err: bus.ErrMalformed},
		bus.ErrUnknownEncoding,
		&bus.APIError{Type: bus.TypeNotFound, Message: "run r1 not found"},
		&bus.APIError{Type: bus.TypeUnknownAgent, Message: `unknown agent "x"`},
		&bus.APIError{Type: bus.TypeInternal, Message: "boom"},
		nats.ErrNoResponders,
		context.DeadlineExceeded,
		errors.New("nats: API error: code=500 err_code=10077 description=whatever"),
	} {
		info := bus.ErrorFor(err)
		require.NotEmpty(t, info.Type, "%v", err)
		require.NotEmpty(t, info.Hint, "%v has no hint", err)
	}
	require.Contains(t, bus.ErrorFor(nats.ErrNoResponders).Hint, "try again in a few seconds", "an outage says to retry")
	kept := bus.ErrorFor(&bus.APIError{Type: bus.TypeNotFound, Message: "m", Hint: "own hint"})
	require.Equal(t, "own hint", kept.Hint, "an error's own hint is kept")
}
