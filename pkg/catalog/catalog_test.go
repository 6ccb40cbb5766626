package catalog

import (
	"context"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/tools"
)

func opts(t *testing.T) Options {
	ts, err := tools.Builtin(tools.Config{Workspace: t.TempDir()})
	require.NoError(t, err)
	return Options{Tools: ts, Registry: &loop.Registry{}}
}

const file = `
agents:
  - name: support
    instructions: You are a support agent.
    model: scripted
    tools: [echo, append_file]
    handoffs: [billing]
    approval: [append_file]
    max_turns: 20
    approval_timeout: 2s
    script:
      - call: {name: echo, args: {text: a}, id: c1}
      - calls: [{name: echo, args: {text: a}}, {name: echo, args: {text: b}}]
      - raw_call: {name: echo, arguments: '{not json', id: c9}
      - text: done
        reasoning: first I think
        delay_ms: 1
        finish: stop
  - name: billing
    model: scripted
    output_schema: {type: object}
    script:
      - text: '{"ok": true}'
`

func TestParse(t *testing.T) {
	c, err := Parse([]byte(file), opts(t))
	require.NoError(t, err)
	require.Equal(t, []string{"billing", "support"}, c.Names())
	s, ok := c.Get("support")
	require.True(t, ok)
	require.Equal(t, 20, s.MaxTurns)
	require.Equal(t, "2s", s.ApprovalTimeout.String())
	require.Len(t, s.Tools, 2)
	require.False(t, s.Tools[0].NeedsApproval)
	require.True(t, s.Tools[1].NeedsApproval)
	require.Len(t, s.Handoffs, 1)
	b, _ := c.Get("billing")
	require.Same(t, b.Agent, s.Handoffs[0].Agent)
	require.JSONEq(t, `{"type":"object"}`, string(b.Output.Schema))
	require.Equal(t, []Info{
		{Name: "billing", Model: "scripted", Tools: []string{}, Handoffs: []string{}},
		{Name: "support", Model: "scripted", Tools: []string{"echo", "append_file"}, Handoffs: []string{"billing"}},
	}, c.Infos())

	// The scripted agent runs end to end.
	res, err := loop.NewRunner(loop.RunnerConfig{}).Run(context.Background(), b.Agent, []loop.Entry{loop.UserText("x")})
	require.NoError(t, err)
	require.Equal(t, map[string]any{"ok": true}, res.Output)
}

func TestParseErrors(t *testing.T) {
	for name, tc := range map[string]struct{ yaml, want string }{
		"empty":           {`agents: []`, "no agents"},
		"typo field":      {"agents:\n  - name: a\n    modle: demo\n", `unknown key "modle" in an agent (known: name, instructions, instructions_file, model,`},
		"bad name":        {"agents:\n  - name: 'a.b'\n    model: scripted\n    script: [{text: x}]\n", "name must be"},
		"duplicate":       {"agents:\n  - {name: a, model: scripted, script: [{text: x}]}\n  - {name: a, model: scripted, script: [{text: x}]}\n", "defined twice"},
		"unknown tool":    {"agents:\n  - {name: a, model: scripted, tools: [nope], script: [{text: x}]}\n", `unknown tool "nope"`},
		"unknown handoff": {"agents:\n  - {name: a, model: scripted, handoffs: [zed], script: [{text: x}]}\n", `unknown agent "zed"`},
		"approval":        {"agents:\n  - {name: a, model: scripted, approval: [echo], script: [{text: x}]}\n", "not among the agent's tools"},
		"no model":        {"agents:\n  - {name: a}\n", "model is required"},
		"no script":       {"agents:\n  - {name: a, model: scripted}\n", "needs a `script:`"},
		"unknown model":   {"agents:\n  - {name: a, model: 'zzz:q'}\n", "unknown model"},
		"timeout":         {"agents:\n  - {name: a, model: scripted, approval_timeout: soon, script: [{text: x}]}\n", "not a duration"},
		"two calls":       {"agents:\n  - name: a\n    model: scripted\n    script: [{call: {name: echo}, raw_call: {name: echo, arguments: x}}]\n", "only one of"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml), opts(t))
			require.ErrorContains(t, err, tc.want)
		})
	}
}

// TestAgentInfos: the agents list names each agent's instructions (capped,
// on a rune boundary, the cut marked) and its tools' schemas.
func TestAgentInfos(t *testing.T) {
	c, err := Parse([]byte(file), opts(t))
	require.NoError(t, err)
	infos := c.AgentInfos()
	require.Len(t, infos, 2)
	require.Equal(t, "billing", infos[0].Name)
	require.Empty(t, infos[0].Instructions)
	require.Equal(t, "You are a support agent.", infos[1].Instructions)
	require.Len(t, infos[1].Schemas, 2)
	require.Equal(t, "echo", infos[1].Schemas[0].Name)

	long := strings.Repeat("é", bus.MaxAgentInstructions) // 2 bytes each
	got := capText(long, bus.MaxAgentInstructions)
	require.LessOrEqual(t, len(got), bus.MaxAgentInstructions)
	require.True(t, utf8.ValidString(got), "the cut splits no rune")
	require.True(t, strings.HasSuffix(got, "…(cut)"))
	require.Equal(t, "short", capText("short", bus.MaxAgentInstructions))
}

// TestScriptCallsOnlyItsTools: a scripted step calling a tool the agent
// does not have is refused at start-up, naming the step, the tool and the
// agent's tools; its own tools, plugin tools, handoffs and MCP patterns
// are fine, and a raw_call (a model sending what it should not) is not
// checked.
func TestScriptCallsOnlyItsTools(t *testing.T) {
	t.Parallel()
	_, err := Parse([]byte(`
agents:
  - name: billing
    model: scripted
    script:
      - call: {name: echo, args: {text: hi}, id: c1}
      - text: done
`), opts(t))
	require.ErrorContains(t, err, `agent "billing": script[0] calls tool "echo", which the agent does not have (its tools: none): add it to `+"`tools:`")
	_, err = Parse([]byte(`
agents:
  - name: a
    model: scripted
    tools: [time_now]
    script:
      - calls: [{name: time_now}, {name: calculator, args: {expression: "1+1"}}]
`), opts(t))
	require.ErrorContains(t, err, `script[0] calls tool "calculator", which the agent does not have (its tools: time_now)`)

	_, err = Parse([]byte(`
agents:
  - name: a
    model: scripted
    tools: [echo]
    handoffs: [b]
    plugins: {todo: {}}
    script:
      - call: {name: echo, args: {text: hi}}
      - call: {name: todo_write, args: {todos: []}}
      - raw_call: {name: no_such_tool, arguments: "{"}
      - call: {name: transfer_to_b}
  - name: b
    model: scripted
    script: [{text: b}]
`), opts(t))
	require.NoError(t, err)
}
