package scripted_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/loop/scripted"
)

// A call scripted without arguments — nil, or the nil map an agents file's
// call without `args` decodes to — sends the empty object a model would,
// never "null" (which a tool's argument decoder refuses).
func TestCallWithoutArgsSendsEmptyObject(t *testing.T) {
	var none map[string]any
	model := scripted.New([]scripted.Step{scripted.Batch(
		scripted.Call{ID: "a", Name: "t"},
		scripted.Call{ID: "b", Name: "t", Args: none},
		scripted.Call{ID: "c", Name: "t", Args: map[string]any{"x": 1}},
	)})
	var got []string
	err := model.Stream(context.Background(), &loop.ModelRequest{}, func(d loop.Delta) error {
		if d.Kind == loop.DeltaToolCall {
			got = append(got, d.Arguments)
		}
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, []string{"{}", "{}", `{"x":1}`}, got)
}

// TestRecordedRequestsAreBounded: a provider keeps the requests it
// received, in order, but only the last 1,024 of them — a scripted agent
// in a long-lived worker does not keep every request of every run.
func TestRecordedRequestsAreBounded(t *testing.T) {
	model := scripted.New([]scripted.Step{scripted.Text("ok")}, scripted.Sequential())
	call := func(n int) {
		// Each request names its number; the script's one step answers
		// the first, the others fail (exhausted) after being recorded.
		req := &loop.ModelRequest{Entries: []loop.Entry{loop.UserText(strconv.Itoa(n))}}
		_ = model.Stream(context.Background(), req, func(loop.Delta) error { return nil })
	}
	numbers := func() []string {
		var out []string
		for _, r := range model.Requests() {
			out = append(out, r.Entries[0].Content)
		}
		return out
	}
	for n := range 3 {
		call(n)
	}
	require.Equal(t, []string{"0", "1", "2"}, numbers())
	for n := 3; n < 1024+500; n++ {
		call(n)
	}
	got := numbers()
	require.Len(t, got, 1024, "kept every request")
	for i, n := range got {
		require.Equal(t, strconv.Itoa(500+i), n, "the %dth kept request", i)
	}
}

// TestAgentTurns: each agent of a run plays its own script. The turns
// after a handoff are its target's; the turns before the first are the
// first agent's (the one that has the tools they called); after a handoff
// away, a new user input (the session's next run) starts the turns of the
// agent called now.
func TestAgentTurns(t *testing.T) {
	t.Parallel()
	call := func(id, name string) loop.Entry {
		return loop.Entry{Kind: loop.KindToolCall, CallID: id, Name: name, Arguments: "{}"}
	}
	result := func(id, out string) loop.Entry { return loop.Entry{Kind: loop.KindToolResult, CallID: id, Output: out} }
	text := func(s string) loop.Entry { return loop.Entry{Kind: loop.KindAssistantText, Text: s} }
	triageTools := []loop.ToolSchema{{Name: "echo"}, {Name: "transfer_to_specialist"}}
	specialistTools := []loop.ToolSchema{{Name: "sleep"}, {Name: "transfer_to_triage"}}

	start := []loop.Entry{loop.SystemText("sys"), loop.UserText("help")}
	handedOff := append(append([]loop.Entry(nil), start...),
		call("e1", "echo"), result("e1", "hi"),
		call("h1", "transfer_to_specialist"), result("h1", "Transferred to specialist (billing question)"))
	midSpecialist := append(append([]loop.Entry(nil), handedOff...), call("s1", "sleep"), result("s1", "slept"))
	handedBack := append(append([]loop.Entry(nil), midSpecialist...), call("h2", "transfer_to_triage"), result("h2", "Transferred to triage"))
	nextRun := append(append([]loop.Entry(nil), handedOff...), text("specialist done"), loop.UserText("again"))
	refused := append(append([]loop.Entry(nil), start...), call("h1", "transfer_to_specialist"),
		loop.Entry{Kind: loop.KindToolResult, CallID: "h1", Output: "Transferred to specialist", IsError: true})

	for name, tc := range map[string]struct {
		entries []loop.Entry
		agent   string
		tools   []loop.ToolSchema
		want    int
	}{
		"the first agent's first turn":               {start, "triage", triageTools, 0},
		"the target starts at its own first step":    {handedOff, "specialist", specialistTools, 0},
		"the target resumed mid-script":              {midSpecialist, "specialist", specialistTools, 1},
		"handed back, the first agent continues":     {handedBack, "triage", triageTools, 2},
		"the target handed back to again":            {append(handedBack, text("t")), "specialist", specialistTools, 2},
		"a new run of the session with the first":    {append(nextRun, text("triage again")), "triage", triageTools, 3},
		"a handoff that failed hands nothing":        {refused, "triage", triageTools, 1},
		"without handoffs every turn is the agent's": {append(append([]loop.Entry(nil), start...), text("a"), loop.UserText("b"), text("c")), "solo", nil, 2},
	} {
		require.Equal(t, tc.want, scripted.AgentTurns(tc.entries, tc.agent, tc.tools), name)
	}

	// The provider plays the step AgentTurns names.
	p := scripted.New([]scripted.Step{scripted.Text("first"), scripted.Text("second")}, scripted.ForAgent("specialist"))
	var got string
	require.NoError(t, p.Stream(context.Background(), &loop.ModelRequest{Entries: handedOff, Tools: specialistTools}, func(d loop.Delta) error {
		if d.Kind == loop.DeltaText {
			got += d.Text
		}
		return nil
	}))
	require.Equal(t, "first", got)
}
