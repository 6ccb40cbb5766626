package bus_test

import (
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/loop"
)

// sampleControls returns one filled value of every control body, paired
// with a constructor of an empty one to decode into.
func sampleControls() []struct {
	msg   bus.Control
	empty func() bus.Control
} {
	type pair = struct {
		msg   bus.Control
		empty func() bus.Control
	}
	result := &bus.StoredResult{Output: map[string]any{"n": 4.0}, Usage: loop.Usage{InputTokens: 3, OutputTokens: 2, TotalTokens: 5},
		Turns: 2, FinishReason: ptr("stop"), FinalAgent: "demo"}
	return []pair{
		{&bus.SubmitReply{RunID: "r1", EventsSubject: "lovia.events.r1", Agent: "demo", Status: bus.StateQueued}, func() bus.Control { return &bus.SubmitReply{} }},
		{&bus.SubmitReply{RunID: "r1", EventsSubject: "lovia.events.r1", Agent: "demo", Status: bus.StateCompleted, Replayed: true, Result: result}, func() bus.Control { return &bus.SubmitReply{} }},
		{&bus.StatusReply{RunID: "r1", Agent: "demo", SessionID: "s1", Status: bus.StateFailed, Worker: "w1", Attempt: 2, Turns: 3,
			Error: &loop.ErrorInfo{Type: "ProviderError", Message: "503", Retryable: true}}, func() bus.Control { return &bus.StatusReply{} }},
		{&bus.StatusReply{RunID: "r1", Agent: "demo", Status: bus.StateCompleted, Result: result, Replayed: true}, func() bus.Control { return &bus.StatusReply{} }},
		{&bus.ApproveRequest{CallID: "c1", Decision: loop.Approve, Reason: "ok"}, func() bus.Control { return &bus.ApproveRequest{} }},
		{&bus.CancelRequest{Reason: "user asked"}, func() bus.Control { return &bus.CancelRequest{} }},
		{&bus.InjectRequest{Content: "also do y"}, func() bus.Control { return &bus.InjectRequest{} }},
		{&bus.InjectReply{Token: "t-1"}, func() bus.Control { return &bus.InjectReply{} }},
		{&bus.UninjectRequest{Token: "t-1"}, func() bus.Control { return &bus.UninjectRequest{} }},
		{&bus.UninjectReply{Removed: true}, func() bus.Control { return &bus.UninjectReply{} }},
		{&bus.SessionReply{SessionID: "s1", Segments: []loop.Segment{
			{RunID: "r1", Entries: []loop.Entry{loop.UserText("hi"), loop.AssistantText("hello"),
				loop.ToolCallEntry("c1", "echo", `{"text":"a"}`), loop.ToolResultEntry("c1", "echo", "a", false)},
				Meta: map[string]any{"context_state": map[string]any{"k": "v"}}},
			{RunID: "r2", Entries: []loop.Entry{loop.UserText("again")}},
		}}, func() bus.Control { return &bus.SessionReply{} }},
		{&bus.RewindRequest{KeepEntries: 4}, func() bus.Control { return &bus.RewindRequest{} }},
		{&bus.RewindReply{Removed: 2}, func() bus.Control { return &bus.RewindReply{} }},
		{&bus.AgentsReply{Agents: []bus.AgentInfo{{Name: "demo", Model: "demo", Tools: []string{"echo"}, Handoffs: []string{"billing"}}}}, func() bus.Control { return &bus.AgentsReply{} }},
		{&bus.ErrorReply{Error: bus.APIError{Type: "UnknownAgent", Message: "no agent x", Hint: "lovia agents lists them"}}, func() bus.Control { return &bus.ErrorReply{} }},
	}
}

func TestControlRoundTrip(t *testing.T) {
	t.Parallel()
	for i, c := range sampleControls() {
		for _, enc := range encodings {
			t.Run(string(enc)+"/"+string(rune('a'+i)), func(t *testing.T) {
				t.Parallel()
				body, err := bus.Marshal(enc, c.msg)
				require.NoError(t, err)
				got := c.empty()
				gotEnc, err := bus.DecodeControl(nil, body, got)
				require.NoError(t, err)
				require.Equal(t, enc, gotEnc)
				require.Equal(t, c.msg, got)

				ob, err := bus.Marshal(other(enc), got)
				require.NoError(t, err)
				got2 := c.empty()
				_, err = bus.DecodeControl(nats.Header{bus.HeaderContentType: {other(enc).ContentType()}}, ob, got2)
				require.NoError(t, err)
				require.Equal(t, c.msg, got2)
			})
		}
	}
}

func TestControlValidate(t *testing.T) {
	t.Parallel()
	cases := []struct {
		body  string
		into  bus.Control
		field string
	}{
		{`{"decision":"approve"}`, &bus.ApproveRequest{}, "call_id"},
		{`{"call_id":"c1","decision":"maybe"}`, &bus.ApproveRequest{}, "decision"},
		{`{}`, &bus.InjectRequest{}, "content"},
		{`{}`, &bus.UninjectRequest{}, "token"},
		{`{"keep_entries":-1}`, &bus.RewindRequest{}, "keep_entries"},
		{`{"run_id":"r 1","status":"queued"}`, &bus.StatusReply{}, "run_id"},
		{`{"run_id":"r1","status":"lost"}`, &bus.StatusReply{}, "status"},
		{`{"session_id":"s1","segments":[{"run_id":"r1","entries":[{"kind":"bogus"}]}]}`, &bus.SessionReply{}, "segments[0].entries[0]"},
		{`{"agents":[{"name":"a.b"}]}`, &bus.AgentsReply{}, "agents[0].name"},
	}
	for _, tc := range cases {
		t.Run(tc.field, func(t *testing.T) {
			t.Parallel()
			_, err := bus.DecodeControl(nil, []byte(tc.body), tc.into)
			var fe *bus.FieldError
			require.ErrorAs(t, err, &fe)
			require.Equal(t, tc.field, fe.Field)
		})
	}
}

func TestDecodeReply(t *testing.T) {
	t.Parallel()
	apiErr := &bus.APIError{Type: bus.TypeUnknownAgent, Message: "no agent nope", Hint: "list agents"}
	for _, enc := range encodings {
		body, err := bus.Marshal(enc, bus.ErrorReply{Error: *apiErr})
		require.NoError(t, err)
		var st bus.StatusReply
		err = bus.DecodeReply(bus.ErrorHeaders(apiErr, enc), body, &st)
		var got *bus.APIError
		require.ErrorAs(t, err, &got)
		require.Equal(t, apiErr, got)
		require.Equal(t, "404", bus.ErrorHeaders(apiErr, enc).Get(bus.HeaderServiceErrorCode))

		// A failed run's status carries "error" but is no error reply.
		body, err = bus.Marshal(enc, &bus.StatusReply{RunID: "r1", Status: bus.StateFailed, Error: &loop.ErrorInfo{Type: "UserError", Message: "x"}})
		require.NoError(t, err)
		require.NoError(t, bus.DecodeReply(nats.Header{bus.HeaderContentType: {enc.ContentType()}}, body, &st))
		require.Equal(t, bus.StateFailed, st.Status)
	}
	// Error headers without a body.
	err := bus.DecodeReply(nats.Header{bus.HeaderServiceError: {"boom"}, bus.HeaderServiceErrorCode: {"500"}}, nil, &bus.StatusReply{})
	var got *bus.APIError
	require.ErrorAs(t, err, &got)
	require.Contains(t, got.Message, "boom")

	inv := bus.ErrorFor(bus.ValidateID("run_id", "a b"))
	require.Equal(t, bus.TypeInvalidRequest, inv.Type)
	require.ErrorIs(t, inv, bus.ErrInvalidRequest)
}

func TestEntriesRoundTrip(t *testing.T) {
	t.Parallel()
	entries := []loop.Entry{
		loop.SystemText("sys"), loop.UserText("hi"),
		{Kind: loop.KindInput, Role: loop.RoleUser, Parts: []loop.Part{{Type: loop.PartImage, Data: "aGVsbG8=", MimeType: "image/png", Detail: "low"}}},
		{Kind: loop.KindReasoning, Text: "think", ID: "rs_1", Provider: "openai", Redacted: "enc"},
		loop.ToolCallEntry("c1", "calc", `{"x":1}`),
		{Kind: loop.KindToolResult, CallID: "c1", Name: "calc", Output: "1", Raw: []byte(`{"x":1}`)},
		loop.ToolResultEntry("c2", "calc", "bad", true),
	}
	for _, enc := range encodings {
		body, err := bus.MarshalEntries(enc, entries)
		require.NoError(t, err)
		got, gotEnc, err := bus.DecodeEntries(nil, body)
		require.NoError(t, err)
		require.Equal(t, enc, gotEnc)
		require.Equal(t, entries, got)
		ob, err := bus.MarshalEntries(other(enc), got)
		require.NoError(t, err)
		got2, err := bus.UnmarshalEntries(other(enc), ob)
		require.NoError(t, err)
		require.Equal(t, entries, got2)
	}
	_, err := bus.UnmarshalEntries(bus.JSON, []byte(`[{"kind":"input","role":"user"},{"kind":"tool_call"}]`))
	var fe *bus.FieldError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, "entries[1]", fe.Field)
	body, err := bus.MarshalEntries(bus.JSON, nil)
	require.NoError(t, err)
	require.Equal(t, "[]", string(body))
}
