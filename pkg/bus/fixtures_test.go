package bus_test

import (
	"errors"

	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/loop"
)

func ptr[T any](v T) *T { return &v }

func hdr(agent string, turn int) loop.EventHeader { return loop.EventHeader{Agent: agent, Turn: turn} }

// sampleEvents returns one event of every type of docs/protocol.md, with every
// field set to something other than its zero value where it can be.
// Values inside `any` fields are the types a JSON decoder produces
// (float64, string, bool, []any, map[string]any), so round trips compare
// equal.
func sampleEvents() []loop.Event {
	call := loop.ToolCall{ID: "c1", Name: "calculator", Arguments: `{"expression":"2+2"}`}
	return []loop.Event{
		&bus.RunStarted{
			RunStarted: loop.RunStarted{EventHeader: hdr("support", 0), Input: []loop.Entry{
				loop.SystemText("be brief"), loop.UserText("hi <there> & \"you\""),
			}, FromCheckpoint: true},
			Worker: "w-1",
		},
		&bus.RunResumed{EventHeader: hdr("support", 2), Worker: "w-2", Attempt: 2, FromTurn: 2},
		&loop.TurnStarted{EventHeader: hdr("support", 1), TurnNo: 1},
		&loop.TurnEnded{EventHeader: hdr("support", 1), TurnNo: 1},
		&loop.TextDelta{EventHeader: hdr("support", 1), Delta: "Hel"},
		&loop.ReasoningDelta{EventHeader: hdr("support", 1), Delta: "thinking…"},
		&loop.OutputDiscarded{EventHeader: hdr("support", 1)},
		&loop.MessageCompleted{EventHeader: hdr("support", 1), Entries: []loop.Entry{
			{Kind: loop.KindReasoning, Text: "r", Provider: "anthropic", Signature: "sig"},
			loop.AssistantText("Hello"),
			loop.ToolCallEntry("c1", "calculator", `{"expression":"2+2"}`),
		}},
		&loop.UserMessageInjected{EventHeader: hdr("support", 2), Content: "also check x", TurnNo: 2,
			Parts: []loop.Part{{Type: loop.PartText, Text: "also check x"}}},
		&loop.ToolCallStarted{EventHeader: hdr("support", 1), Call: call},
		&loop.ToolCallCompleted{EventHeader: hdr("support", 1), Call: call,
			Result: map[string]any{"value": 4.0, "exact": true, "steps": []any{"2+2", 4.5}}, Output: "4", IsError: false},
		&loop.ToolCallFailed{EventHeader: hdr("support", 1), Call: call,
			Error: loop.ErrorInfo{Type: "ToolError", Message: "boom", Hint: "retry", Retryable: true}},
		&loop.ApprovalRequired{EventHeader: hdr("support", 1), Call: call},
		&loop.ApprovalResolved{EventHeader: hdr("support", 1), CallID: "c1", Decision: loop.Reject, Reason: "no"},
		&loop.HandoffOccurred{EventHeader: hdr("billing", 3), FromAgent: "support", ToAgent: "billing"},
		&loop.ContextCompacted{EventHeader: hdr("billing", 3), Notice: loop.CompactionNotice{
			Reason: "budget", Reactive: true, Summary: ptr("earlier: greetings"), TokensBefore: 9000, TokensAfter: 1200,
			Detail: []string{"dropped 3 tool results"},
		}, EntriesBefore: 40, EntriesAfter: 12},
		&loop.RunCompleted{EventHeader: hdr("billing", 4), Output: "done", Usage: loop.Usage{
			InputTokens: 100, OutputTokens: 20, CacheReadTokens: 50, CacheWriteTokens: 5, TotalTokens: 120,
		}, Turns: 4, FinishReason: ptr("stop"), FinalAgent: "billing"},
		&loop.RunFailed{EventHeader: hdr("billing", 4), Error: loop.ErrorInfo{
			Type: "MaxTurnsExceeded", Message: "Run exceeded max_turns=4", Hint: "raise max_turns", Retryable: true,
		}, Err: errors.New("not serialized")},
	}
}

// sampleRequests returns run requests covering every field and both input
// forms.
func sampleRequests() []*bus.RunRequest {
	return []*bus.RunRequest{
		{Agent: "demo", Input: bus.TextInput("hello")},
		{
			RunID: "01jabcdefghjkmnpqrstvwxyz0", Agent: "support",
			Input: bus.MessagesInput(
				bus.InputMessage{Role: "system", Content: "be brief"},
				bus.InputMessage{Role: "user", Content: "hi"},
				bus.InputMessage{Role: "assistant", Content: "hello"},
				bus.InputMessage{Role: "user", Content: "what's 2+2?"},
			),
			SessionID: "sess-1", MaxTurns: 7,
			Budget: &bus.Budget{MaxInputTokens: 1000, MaxOutputTokens: 200, MaxTotalTokens: 1200, MaxToolCalls: 5, MaxSeconds: 30.5},
			// Sorted keys, compact: what a trip through msgpack gives back.
			OutputSchema:      bus.RawJSON(`{"properties":{"n":{"minimum":0,"type":"integer"}},"required":["n"],"type":"object"}`),
			ExtraInstructions: "answer in French", IfRunExists: bus.IfExistsResumeOnly, Encoding: bus.Msgpack,
			Metadata: map[string]any{"tenant": "acme", "priority": 2.0, "tags": []any{"a", "b"}, "nested": map[string]any{"ok": true}},
		},
		// A resubmission that resumes r-2: the only request that may have an
		// empty input.
		{RunID: "r-2", Agent: "demo", Input: bus.MessagesInput(), IfRunExists: bus.IfExistsResume, Encoding: bus.JSON},
		{RunID: "r-3", IfRunExists: bus.IfExistsFail},
	}
}
