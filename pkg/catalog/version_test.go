package catalog

import (
	"context"
	"encoding/json"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/loop"
)

type namedPlugin string

func (p namedPlugin) Name() string { return string(p) }

// versionBase is an agent with every hashed field set, built afresh on
// each call (so a change to one copy leaves the next untouched).
func versionBase() *Agent {
	temp, par, retries := 0.2, true, 2
	billing := &loop.Agent{Name: "billing"}
	return &Agent{
		Agent: &loop.Agent{
			Name: "support", Instructions: "Help.", Model: "openai:gpt-4.1-mini",
			Settings: loop.ModelSettings{Temperature: &temp, MaxTokens: 100, Stop: []string{"END"}, ParallelToolCalls: &par,
				ProviderOptions: map[string]map[string]any{"openai": {"seed": 1, "user": "x"}}},
			Tools: []*loop.Tool{
				{Name: "echo", Description: "Echo.", Parameters: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}}}`)},
				{Name: "add", Description: "Add.", Parameters: json.RawMessage(`{"type":"object"}`), Retries: &retries},
			},
			Handoffs:           []loop.Handoff{loop.HandoffTo(billing)},
			Plugins:            []loop.Plugin{namedPlugin("memory")},
			Output:             &loop.OutputSpec{Name: "out", Schema: json.RawMessage(`{"type":"object"}`)},
			Retry:              &loop.RetryPolicy{MaxAttempts: 3, BaseDelay: time.Second, MaxDelay: 5 * time.Second},
			DefaultToolRetries: 1, DefaultToolTimeout: time.Minute, MaxToolOutputChars: 1000,
		},
		MaxTurns: 10, ApprovalTimeout: time.Minute,
	}
}

func TestDigestIsStable(t *testing.T) {
	a := versionBase()
	d := a.Digest()
	require.Regexp(t, regexp.MustCompile(`^[0-9a-f]{12}$`), d)
	require.Equal(t, d, versionBase().Digest(), "the same definition built twice")

	// The order of tools, handoffs and plugins and a schema's key order
	// and spacing are not part of the definition.
	b := versionBase()
	b.Tools[0], b.Tools[1] = b.Tools[1], b.Tools[0]
	b.Tools[1].Parameters = json.RawMessage("{ \"properties\": {\"text\": {\"type\": \"string\"}},\n \"type\": \"object\" }")
	require.Equal(t, d, b.Digest(), "tools reordered, schema keys reordered")

	// A Go function's identity is not: closures differ, the definition
	// does not.
	c := versionBase()
	c.Tools[0].Func = func(context.Context, *loop.RunContext, json.RawMessage) (any, error) { return nil, nil }
	require.Equal(t, d, c.Digest())

	require.Equal(t, d, VersionOf(a, ""))
	require.Equal(t, d+"+v2", VersionOf(a, "v2"))
}

func TestDigestChangesWithEachHashedField(t *testing.T) {
	base := versionBase().Digest()
	changes := map[string]func(a *Agent){
		"name":         func(a *Agent) { a.Name = "support2" },
		"instructions": func(a *Agent) { a.Instructions = "Help more." },
		"dynamic instructions": func(a *Agent) {
			a.InstructionsFunc = func(context.Context, *loop.RunContext) (string, error) { return "", nil }
		},
		"model":            func(a *Agent) { a.Model = "anthropic:claude" },
		"temperature":      func(a *Agent) { v := 0.3; a.Settings.Temperature = &v },
		"max tokens":       func(a *Agent) { a.Settings.MaxTokens = 200 },
		"stop":             func(a *Agent) { a.Settings.Stop = nil },
		"provider options": func(a *Agent) { a.Settings.ProviderOptions["openai"]["seed"] = 2 },
		"tool added":       func(a *Agent) { a.Tools = append(a.Tools, &loop.Tool{Name: "time_now"}) },
		"tool removed":     func(a *Agent) { a.Tools = a.Tools[:1] },
		"tool schema":      func(a *Agent) { a.Tools[0].Parameters = json.RawMessage(`{"type":"object","required":["text"]}`) },
		"tool description": func(a *Agent) { a.Tools[0].Description = "Echoes." },
		"tool retries":     func(a *Agent) { n := 5; a.Tools[1].Retries = &n },
		"tool approval":    func(a *Agent) { a.Tools[0].NeedsApproval = true },
		"handoff target":   func(a *Agent) { a.Handoffs = []loop.Handoff{loop.HandoffTo(&loop.Agent{Name: "sales"})} },
		"handoff removed":  func(a *Agent) { a.Handoffs = nil },
		"plugin":           func(a *Agent) { a.Plugins = append(a.Plugins, namedPlugin("todo")) },
		"output schema":    func(a *Agent) { a.Output.Schema = json.RawMessage(`{"type":"string"}`) },
		"output removed":   func(a *Agent) { a.Output = nil },
		"retry policy":     func(a *Agent) { a.Retry.MaxAttempts = 4 },
		"tool defaults":    func(a *Agent) { a.DefaultToolTimeout = time.Hour },
		"tool output cap":  func(a *Agent) { a.MaxToolOutputChars = 5 },
		"max turns":        func(a *Agent) { a.MaxTurns = 11 },
		"approval timeout": func(a *Agent) { a.ApprovalTimeout = time.Hour },
	}
	seen := map[string]string{}
	for name, change := range changes {
		a := versionBase()
		change(a)
		d := a.Digest()
		require.NotEqual(t, base, d, "changing the %s must change the digest", name)
		if other, dup := seen[d]; dup {
			t.Fatalf("changing the %s and the %s give the same digest", name, other)
		}
		seen[d] = name
	}
}

func TestDigestOfFileAgents(t *testing.T) {
	const v1 = "agents:\n  - name: a\n    instructions: Be brief.\n    model: scripted\n    script: [{text: x}]\n    tools: [echo]\n"
	c1, err := Parse([]byte(v1), opts(t))
	require.NoError(t, err)
	c1b, err := Parse([]byte(v1), opts(t))
	require.NoError(t, err)
	a1, _ := c1.Get("a")
	a1b, _ := c1b.Get("a")
	require.Equal(t, a1.Digest(), a1b.Digest(), "one file built twice")
	for _, other := range []string{
		"agents:\n  - name: a\n    instructions: Be very brief.\n    model: scripted\n    script: [{text: x}]\n    tools: [echo]\n",
		"agents:\n  - name: a\n    instructions: Be brief.\n    model: scripted\n    script: [{text: x}]\n    tools: [echo, time_now]\n",
		"agents:\n  - name: a\n    instructions: Be brief.\n    model: scripted\n    script: [{text: x}]\n    tools: [echo]\n    max_turns: 3\n",
		"agents:\n  - name: a\n    instructions: Be brief.\n    model: scripted\n    script: [{text: x}]\n    tools: [echo]\n    output_schema: {type: object}\n",
	} {
		c2, err := Parse([]byte(other), opts(t))
		require.NoError(t, err)
		a2, _ := c2.Get("a")
		require.NotEqual(t, a1.Digest(), a2.Digest(), "file %q", other)
	}
}

func BenchmarkDigest(b *testing.B) {
	a := versionBase()
	b.ReportAllocs()
	for b.Loop() {
		_ = a.Digest()
	}
}

func BenchmarkDigestPinned(b *testing.B) {
	c, err := Parse([]byte("agents:\n  - name: a\n    model: scripted\n    instructions: Help.\n    script: [{text: x}]\n"), Options{Registry: &loop.Registry{}})
	require.NoError(b, err)
	a, _ := c.Get("a")
	b.ReportAllocs()
	for b.Loop() {
		_ = VersionOf(a, "v1")
	}
}
