package loop_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/loop/scripted"
)

// An agent used as a tool runs its own loop with the parent's tracer and
// folds its usage into the parent's.
func TestAgentAsToolInheritsTracerAndUsage(t *testing.T) {
	helper := &loop.Agent{Name: "helper", Provider: scripted.New([]scripted.Step{scripted.Text("42")}, scripted.Sequential())}
	p := scripted.New([]scripted.Step{scripted.CallTool("ask_helper", map[string]string{"input": "answer?"}, "c1"), scripted.Text("it said 42")}, scripted.Sequential())
	parent := &loop.Agent{Name: "parent", Provider: p, Tools: []*loop.Tool{helper.AsTool("", "")}}
	tr := &loop.InMemoryTracer{}
	res, err := newRunner().Run(context.Background(), parent, []loop.Entry{loop.UserText("go")}, loop.WithTracer(tr))
	require.NoError(t, err)
	require.Equal(t, "it said 42", res.Output)
	require.Equal(t, "42", res.Entries[2].Output)
	require.EqualValues(t, 3, res.Usage.InputTokens, "two parent turns and the sub-run's one")
	runs := 0
	for _, s := range tr.Spans() {
		if s.Name == "run" {
			runs++
		}
	}
	require.Equal(t, 2, runs, "the sub-run's span went to the parent's tracer")
}

// An agent-as-tool's sub-run has its own max_turns (SubRunLimits), as
// lovia's as_tool(max_turns=) does: a child that would loop past it fails
// as a MaxTurnsExceeded error result the parent's model sees (the message,
// not the hint), and the parent run goes on to complete.
func TestAgentAsToolOwnMaxTurns(t *testing.T) {
	t.Parallel()
	echo := loop.NewTool("echo", "Echo.", func(_ context.Context, _ *loop.RunContext, in struct{ Text string }) (string, error) {
		return in.Text, nil
	})
	looping := scripted.New([]scripted.Step{
		scripted.CallTool("echo", map[string]string{"Text": "a"}, "e1"),
		scripted.CallTool("echo", map[string]string{"Text": "b"}, "e2"),
		scripted.CallTool("echo", map[string]string{"Text": "c"}, "e3"),
		scripted.Text("finally"),
	}, scripted.Sequential())
	child := &loop.Agent{Name: "child", Provider: looping, Tools: []*loop.Tool{echo}}
	p := scripted.New([]scripted.Step{scripted.CallTool("ask_child", map[string]string{"input": "go"}, "c1"), scripted.Text("the child gave up")}, scripted.Sequential())
	parent := &loop.Agent{Name: "parent", Provider: p, Tools: []*loop.Tool{child.AsTool("", "", loop.SubRunLimits(2, nil))}}
	res, err := newRunner().Run(context.Background(), parent, []loop.Entry{loop.UserText("go")})
	require.NoError(t, err, "the child's limit is not the parent's")
	require.Equal(t, "the child gave up", res.Output)
	var result *loop.Entry
	for i := range res.Entries {
		if res.Entries[i].Kind == loop.KindToolResult && res.Entries[i].CallID == "c1" {
			result = &res.Entries[i]
		}
	}
	require.NotNil(t, result)
	require.Contains(t, result.Output, "max_turns=2")
	require.NotContains(t, result.Output, "hint")
}
