package catalog

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/loop/compaction"
	"github.com/lovia-fleet/lovia/pkg/loop/scripted"
)

// run runs agent name of c on input and returns its result.
func run(t *testing.T, c *Catalog, name string, ropts ...loop.RunOption) *loop.RunResult {
	t.Helper()
	a, ok := c.Get(name)
	require.True(t, ok, name)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := loop.NewRunner(loop.RunnerConfig{}).Run(ctx, a.Agent, []loop.Entry{loop.UserText("go")}, ropts...)
	require.NoError(t, err)
	return res
}

// toolResults are the outputs of the run's tool results, by call id.
func toolResults(res *loop.RunResult) map[string]loop.Entry {
	out := map[string]loop.Entry{}
	for _, e := range res.Entries {
		if e.Kind == loop.KindToolResult {
			out[e.CallID] = e
		}
	}
	return out
}

func TestSettingsReachTheModel(t *testing.T) {
	c, err := Parse([]byte(`
agents:
  - name: a
    model: scripted
    settings:
      temperature: 0.3
      top_p: 0.9
      max_tokens: 512
      stop: ["END"]
      parallel_tool_calls: false
      provider_options: {reasoning_effort: low, stream_options: null}
    script: [{text: ok}]
`), opts(t))
	require.NoError(t, err)
	run(t, c, "a")
	a, _ := c.Get("a")
	reqs := a.Provider.(*scripted.Provider).Requests()
	require.Len(t, reqs, 1)
	s := reqs[0].Settings
	require.NotNil(t, s.Temperature)
	require.InDelta(t, 0.3, *s.Temperature, 1e-9)
	require.NotNil(t, s.TopP)
	require.InDelta(t, 0.9, *s.TopP, 1e-9)
	require.Equal(t, 512, s.MaxTokens)
	require.Equal(t, []string{"END"}, s.Stop)
	require.NotNil(t, s.ParallelToolCalls)
	require.False(t, *s.ParallelToolCalls)
	// Provider options go to the agent's own adapter, verbatim.
	require.Equal(t, map[string]map[string]any{"scripted": {"reasoning_effort": "low", "stream_options": nil}}, s.ProviderOptions)
}

func TestRetryReachesTheLoop(t *testing.T) {
	build := func(retry string) *Agent {
		c, err := Parse([]byte("agents:\n  - name: a\n    model: scripted\n    script: [{text: x}]\n"+retry), opts(t))
		require.NoError(t, err)
		a, _ := c.Get("a")
		// A model that fails twice with a retryable error, then answers.
		a.Provider = scripted.New([]scripted.Step{{Text: "answered", FailTimes: 2}})
		return a
	}
	runIt := func(a *Agent) (*loop.RunResult, error) {
		return loop.NewRunner(loop.RunnerConfig{}).Run(context.Background(), a.Agent, []loop.Entry{loop.UserText("go")})
	}
	_, err := runIt(build("    retry: {attempts: 2, base_delay: 1ms, max_delay: 2ms}\n"))
	require.Error(t, err, "2 attempts do not outlast 2 failures")
	res, err := runIt(build("    retry: {attempts: 3, base_delay: 1ms, max_delay: 2ms}\n"))
	require.NoError(t, err, "3 attempts do")
	require.Equal(t, "answered", res.Output)
	a := build("    retry: off\n")
	_, err = runIt(a)
	require.Error(t, err)
	require.Equal(t, 1, a.Provider.(*scripted.Provider).Calls(), "retry: off makes one attempt")
	require.True(t, build("    retry: {restart_on_partial: false}\n").Retry.NoRestartOnPartial)
	require.Equal(t, loop.DefaultRetryPolicy().MaxAttempts, build("    retry: {base_delay: 2s}\n").Retry.MaxAttempts, "unset fields keep the default")
}

func TestToolDefaultsReachTheLoop(t *testing.T) {
	o := opts(t)
	var calls atomic.Int32
	o.Tools["flaky"] = &loop.Tool{Name: "flaky", Func: func(context.Context, *loop.RunContext, json.RawMessage) (any, error) {
		if calls.Add(1) < 3 {
			return nil, errors.New("not yet")
		}
		return "third time", nil
	}}
	c, err := Parse([]byte(`
agents:
  - name: slow
    model: scripted
    tools: [sleep]
    tool_defaults: {timeout: 50ms}
    script:
      - call: {name: sleep, args: {ms: 20000}, id: s1}
      - text: done
  - name: retrying
    model: scripted
    tools: [flaky]
    tool_defaults: {retries: 2}
    script:
      - call: {name: flaky, id: f1}
      - text: done
  - name: capped
    model: scripted
    tools: [echo]
    tool_defaults: {max_output_chars: 10}
    script:
      - call: {name: echo, args: {text: 'abcdefghijklmnopqrstuvwxyz'}, id: e1}
      - text: done
`), o)
	require.NoError(t, err)

	start := time.Now()
	r := toolResults(run(t, c, "slow"))["s1"]
	require.True(t, r.IsError, "%+v", r)
	require.Contains(t, r.Output, "timed out after 50ms")
	require.Less(t, time.Since(start), 15*time.Second, "the 20s sleep was cut by the timeout")

	r = toolResults(run(t, c, "retrying"))["f1"]
	require.False(t, r.IsError, "%+v", r)
	require.Contains(t, r.Output, "third time")
	require.EqualValues(t, 3, calls.Load())

	r = toolResults(run(t, c, "capped"))["e1"]
	require.NotContains(t, r.Output, "abcdefghijklmnopqrstuvwxyz", "the output is capped at 10 characters")
	require.Contains(t, r.Output, "kept 10 of 26 chars")
}

// countingPolicy counts the views it was asked to compact.
type countingPolicy struct{ n atomic.Int32 }

func (p *countingPolicy) Compact(_ context.Context, req *loop.CompactRequest) (*loop.CompactResult, error) {
	p.n.Add(1)
	return &loop.CompactResult{Entries: req.Entries}, nil
}

func TestCompactionReachesTheLoop(t *testing.T) {
	o := opts(t)
	var got []string
	built := &countingPolicy{}
	o.Compaction = func(cfg compaction.Config) (loop.ContextPolicy, error) {
		got = append(got, cfg.CompactAt.String(), cfg.CompactTo.String())
		require.Equal(t, 64000, cfg.ContextWindow)
		require.Equal(t, 2000, cfg.KeepRecentTokens)
		require.Len(t, cfg.Stages, 2)
		require.Equal(t, "clear", cfg.Stages[0].Name())
		return built, nil
	}
	c, err := Parse([]byte(`
agents:
  - name: off
    model: scripted
    compaction: off
    script: [{text: x}]
  - name: tuned
    model: scripted
    compaction: {context_window: 64000, compact_at: 80%, compact_to: 30000, keep_recent_tokens: 2000, stages: [clear, summarize], reserve_output_tokens: 0}
    script: [{text: x}]
  - name: default
    model: scripted
    script: [{text: x}]
`), o)
	require.NoError(t, err)
	require.Equal(t, []string{"80%", "30000 tokens"}, got)

	// The process's policy (a worker's) applies to agents that set none.
	process := &countingPolicy{}
	runner := loop.NewRunner(loop.RunnerConfig{ContextPolicy: process})
	for _, n := range []string{"off", "tuned", "default"} {
		a, _ := c.Get(n)
		_, err := runner.Run(context.Background(), a.Agent, []loop.Entry{loop.UserText("go")})
		require.NoError(t, err, n)
	}
	require.EqualValues(t, 1, process.n.Load(), "only the agent without compaction: ran under the process's policy")
	require.EqualValues(t, 1, built.n.Load(), "the tuned agent ran under its own policy")
	off, _ := c.Get("off")
	require.Equal(t, loop.NoopContextPolicy{}, off.ContextPolicy)
}

func TestAsTools(t *testing.T) {
	c, err := Parse([]byte(`
agents:
  - name: lead
    model: scripted
    as_tools:
      - researcher
      - agent: Loop-Er
        max_turns: 2
        description: Loops forever.
    script:
      - call: {name: ask_researcher, args: {input: find it}, id: r1}
      - call: {name: ask_loop_er, args: {input: spin}, id: l1}
      - text: lead is done
  - name: researcher
    model: scripted
    script: [{text: found it}]
  - name: Loop-Er
    model: scripted
    tools: [echo]
    max_turns: 50
    script:
      - call: {name: echo, args: {text: a}, id: e1}
      - call: {name: echo, args: {text: b}, id: e2}
      - call: {name: echo, args: {text: c}, id: e3}
      - text: never reached within 2 turns
`), opts(t))
	require.NoError(t, err)
	res := run(t, c, "lead")
	require.Equal(t, "lead is done", res.Output)
	rs := toolResults(res)
	require.False(t, rs["r1"].IsError, "%+v", rs["r1"])
	require.Contains(t, rs["r1"].Output, "found it", "ask_researcher ran the researcher agent")
	require.True(t, rs["l1"].IsError, "the sub-run's own max_turns (2, not the agent's 50) stopped it: %+v", rs["l1"])
	require.Contains(t, strings.ToLower(rs["l1"].Output), "turn")
	var names []string
	for _, s := range c.ToolSchemas("lead") {
		names = append(names, s.Name)
	}
	require.Equal(t, []string{"ask_researcher", "ask_loop_er"}, names)
}
