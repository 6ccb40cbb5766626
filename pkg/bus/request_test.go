package bus_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/loop"
)

func TestRunRequestRoundTrip(t *testing.T) {
	t.Parallel()
	for i, req := range sampleRequests() {
		for _, enc := range encodings {
			t.Run(string(enc)+"/"+string(rune('a'+i)), func(t *testing.T) {
				t.Parallel()
				body, err := bus.Marshal(enc, req)
				require.NoError(t, err)
				got, gotEnc, err := bus.DecodeRunRequest(nats.Header{bus.HeaderContentType: {enc.ContentType()}}, body)
				require.NoError(t, err)
				require.Equal(t, enc, gotEnc)
				require.Equal(t, req, got)

				// Transcode: decode, encode in the other encoding, decode again.
				ob, err := bus.Marshal(other(enc), got)
				require.NoError(t, err)
				got2, gotEnc2, err := bus.DecodeRunRequest(nil, ob)
				require.NoError(t, err)
				require.Equal(t, other(enc), gotEnc2)
				require.Equal(t, req, got2)
			})
		}
	}
}

func TestRunRequestJSONShape(t *testing.T) {
	t.Parallel()
	body, err := bus.Marshal(bus.JSON, &bus.RunRequest{Agent: "demo", Input: bus.TextInput("hi")})
	require.NoError(t, err)
	require.JSONEq(t, `{"agent":"demo","input":"hi"}`, string(body), "zero fields are omitted")

	body, err = bus.Marshal(bus.JSON, sampleRequests()[1])
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(body, &m))
	for _, k := range []string{"run_id", "agent", "input", "session_id", "max_turns", "budget", "output_schema", "extra_instructions", "if_run_exists", "encoding", "metadata"} {
		require.Contains(t, m, k)
	}
	require.Equal(t, map[string]any{"role": "system", "content": "be brief"}, m["input"].([]any)[0])
	require.Equal(t, "object", m["output_schema"].(map[string]any)["type"], "the schema is inline JSON")

	// In msgpack the schema is a map too, not a string of JSON.
	mb, err := bus.Marshal(bus.Msgpack, sampleRequests()[1])
	require.NoError(t, err)
	var generic map[string]any
	require.NoError(t, bus.Unmarshal(bus.Msgpack, mb, &generic))
	require.IsType(t, map[string]any{}, generic["output_schema"])
	require.EqualValues(t, 0, generic["output_schema"].(map[string]any)["properties"].(map[string]any)["n"].(map[string]any)["minimum"])
}

func TestRunRequestFromOtherClients(t *testing.T) {
	t.Parallel()
	// What a nats CLI user types.
	req, enc, err := bus.DecodeRunRequest(nil, []byte(` {"input": [{"role": "user", "content": "hi"}], "budget": {"max_seconds": 3}, "metadata": {"n": 1}}`))
	require.NoError(t, err)
	require.Equal(t, bus.JSON, enc)
	require.True(t, req.Input.IsList())
	require.Equal(t, []loop.Entry{loop.UserText("hi")}, req.Input.Entries())
	require.InDelta(t, 3.0, req.Budget.MaxSeconds, 0)
	require.Equal(t, bus.JSON, req.EventEncoding(enc))

	req, _, err = bus.DecodeRunRequest(nil, []byte(`{"input": "hi", "encoding": "msgpack", "output_schema": null}`))
	require.NoError(t, err)
	require.Equal(t, []loop.Entry{loop.UserText("hi")}, req.Input.Entries())
	require.Nil(t, req.OutputSchema)
	require.Equal(t, bus.Msgpack, req.EventEncoding(bus.JSON))

	req, _, err = bus.DecodeRunRequest(nats.Header{"content-type": {"application/json; charset=utf-8"}}, []byte(`{"run_id":"r-1"}`))
	require.NoError(t, err, "a resubmission of a run id may omit the input")
	require.True(t, req.Input.IsZero())
}

func TestRunRequestValidate(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("a", 129)
	cases := []struct {
		body  string
		field string
	}{
		{`{"run_id":"a.b"}`, "run_id"},
		{`{"run_id":"` + long + `"}`, "run_id"},
		{`{"agent":"x y"}`, "agent"},
		{`{"agent":"*"}`, "agent"},
		{`{"session_id":"s>"}`, "session_id"},
		{`{"input":[{"role":"user","content":"a"},{"role":"robot","content":"b"}]}`, "input[1].role"},
		{`{"max_turns":-1}`, "max_turns"},
		{`{"budget":{"max_tool_calls":-2}}`, "budget.max_tool_calls"},
		{`{"budget":{"max_seconds":-0.5}}`, "budget.max_seconds"},
		{`{"if_run_exists":"maybe"}`, "if_run_exists"},
		{`{"encoding":"xml"}`, "encoding"},
	}
	for _, tc := range cases {
		t.Run(tc.field, func(t *testing.T) {
			t.Parallel()
			_, _, err := bus.DecodeRunRequest(nil, []byte(tc.body))
			require.ErrorIs(t, err, bus.ErrInvalidRequest)
			var fe *bus.FieldError
			require.ErrorAs(t, err, &fe)
			require.Equal(t, tc.field, fe.Field)
			api := bus.ErrorFor(err)
			require.Equal(t, "InvalidRequest", api.Type)
			require.Equal(t, 400, api.Code())
		})
	}
	for _, body := range []string{`{"input": 5}`, `{"input": {"role":"user"}}`, `{"max_turns": "3"}`, `{"metadata": [1]}`, `[1,2]`, `{"run_id":"x"`} {
		_, _, err := bus.DecodeRunRequest(nil, []byte(body))
		require.ErrorIs(t, err, bus.ErrMalformed, body)
		require.Equal(t, "InvalidRequest", bus.ErrorFor(err).Type, body)
	}
}

func TestRawSubmitRunID(t *testing.T) {
	t.Parallel()
	id, err := bus.RawSubmitRunID(&bus.RunRequest{RunID: "body-id"}, nats.Header{bus.HeaderMsgID: {"hdr-id"}}, 7)
	require.NoError(t, err)
	require.Equal(t, "body-id", id)
	id, err = bus.RawSubmitRunID(&bus.RunRequest{}, nats.Header{bus.HeaderMsgID: {"hdr-id"}}, 7)
	require.NoError(t, err)
	require.Equal(t, "hdr-id", id)
	id, err = bus.RawSubmitRunID(&bus.RunRequest{}, nil, 7)
	require.NoError(t, err)
	require.Equal(t, "run-7", id)
	_, err = bus.RawSubmitRunID(&bus.RunRequest{}, nats.Header{bus.HeaderMsgID: {"a.b"}}, 7)
	require.ErrorIs(t, err, bus.ErrInvalidToken)

	a, b := bus.NewRunID(), bus.NewRunID()
	require.NoError(t, bus.ValidateID("run_id", a))
	require.NotEqual(t, a, b)
	require.Len(t, a, 26)
}
