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
