package catalog_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/internal/fleettest"
	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/loop/scripted"
	"github.com/lovia-fleet/lovia/pkg/worker"
)

// countingPolicy counts the views a worker's default policy compacted.
type countingPolicy struct{ n atomic.Int32 }

func (p *countingPolicy) Compact(_ context.Context, req *loop.CompactRequest) (*loop.CompactResult, error) {
	p.n.Add(1)
	return &loop.CompactResult{Entries: req.Entries}, nil
}

// TestAgentSectionsThroughTheFleet: on a worker, an agent's settings
// reach its model, its tool timeout cuts a slow tool, its compaction: off
// keeps the worker's default policy away, and its as_tools entry runs
// another agent of the file inside the run.
func TestAgentSectionsThroughTheFleet(t *testing.T) {
	t.Parallel()
	const agents = `
agents:
  - name: lead
    model: scripted
    tools: [sleep]
    settings: {temperature: 0.1, max_tokens: 256}
    tool_defaults: {timeout: 100ms}
    compaction: off
    as_tools: [researcher]
    script:
      - call: {name: sleep, args: {ms: 60000}, id: s1}
      - call: {name: ask_researcher, args: {input: find it}, id: r1}
      - text: lead is done
  - name: researcher
    model: scripted
    script: [{text: found it}]
`
	policy := &countingPolicy{}
	f := fleettest.Start(t, fleettest.Options{AgentsYAML: agents, Worker: func(c *worker.Config) { c.ContextPolicy = policy }})
	rep, err := f.Client.Submit(context.Background(), &bus.RunRequest{Agent: "lead", Input: bus.TextInput("go")})
	require.NoError(t, err)
	envs := f.Events(rep.RunID, 30*time.Second)
	last := envs[len(envs)-1]
	require.Equal(t, loop.EventRunCompleted, last.Type, "%v: %s", fleettest.Types(envs), last.Data)
	var done struct {
		Output string `json:"output"`
	}
	require.NoError(t, json.Unmarshal(last.Data, &done))
	require.Equal(t, "lead is done", done.Output)

	type result struct {
		Call struct {
			ID string `json:"id"`
		} `json:"call"`
		Output  string `json:"output"`
		IsError bool   `json:"is_error"`
	}
	results := map[string]result{}
	for _, e := range fleettest.OfType(envs, loop.EventToolCallCompleted) {
		var r result
		require.NoError(t, json.Unmarshal(e.Data, &r))
		results[r.Call.ID] = r
	}
	require.True(t, results["s1"].IsError, "%+v", results)
	require.Contains(t, results["s1"].Output, "timed out after 100ms")
	require.Contains(t, results["r1"].Output, "found it", "ask_researcher ran the researcher on the worker")

	lead, _ := f.Catalog.Get("lead")
	reqs := lead.Provider.(*scripted.Provider).Requests()
	require.Len(t, reqs, 3)
	for _, r := range reqs {
		require.NotNil(t, r.Settings.Temperature)
		require.InDelta(t, 0.1, *r.Settings.Temperature, 1e-9)
		require.Equal(t, 256, r.Settings.MaxTokens)
	}
	require.EqualValues(t, 1, policy.n.Load(), "the worker's policy compacted the researcher's one turn, none of lead's three")
}
