package catalog

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// The new sections' errors name the field, its line and, for an unknown
// key, the keys that exist.
func TestSectionErrors(t *testing.T) {
	const head = "agents:\n  - name: a\n    model: scripted\n    script: [{text: x}]\n"
	for name, tc := range map[string]struct{ yaml, want string }{
		"settings unknown key": {head + "    settings:\n      temprature: 1\n",
			`line 6: unknown key "temprature" in settings (known: temperature, top_p, max_tokens, stop, parallel_tool_calls, provider_options)`},
		"settings not a map":    {head + "    settings: hot\n", "line 5: settings must be a map of temperature, top_p"},
		"temperature range":     {head + "    settings:\n      max_tokens: 10\n      temperature: 3\n", "line 7: settings.temperature: 3 is outside 0 to 2"},
		"top_p range":           {head + "    settings: {top_p: 1.5}\n", "line 5: settings.top_p: 1.5 is outside 0 to 1"},
		"max_tokens negative":   {head + "    settings: {max_tokens: -1}\n", "settings.max_tokens: -1 is negative"},
		"temperature type":      {head + "    settings: {temperature: hot}\n", "line 5: cannot unmarshal !!str `hot` into float64"},
		"empty stop":            {head + "    settings: {stop: ['']}\n", "settings.stop: entry 0 is empty"},
		"provider option key":   {head + "    settings: {provider_options: {a.b: 1}}\n", `settings.provider_options: key "a.b"`},
		"retry unknown key":     {head + "    retry:\n      tries: 3\n", `line 6: unknown key "tries" in retry (known: attempts, base_delay, max_delay, restart_on_partial)`},
		"retry zero":            {head + "    retry:\n      attempts: 0\n", "line 6: retry.attempts: 0: attempts counts the calls, the first included; write retry: off"},
		"retry word":            {head + "    retry: never\n", "line 5: retry must be a map of attempts"},
		"retry delays":          {head + "    retry: {base_delay: 1m}\n", "retry.base_delay: 1m0s is above max_delay 30s"},
		"retry bad duration":    {head + "    retry: {max_delay: soon}\n", `line 5: "soon" is not a duration`},
		"tool_defaults unknown": {head + "    tool_defaults: {timout: 1s}\n", `unknown key "timout" in tool_defaults (known: timeout, retries, max_output_chars)`},
		"tool retries":          {head + "    tool_defaults:\n      retries: -2\n", "line 6: tool_defaults.retries: -2 is negative"},
		"tool cap":              {head + "    tool_defaults: {max_output_chars: -5}\n", "tool_defaults.max_output_chars: -5: give a positive cap, or -1 for none"},
		"compaction unknown":    {head + "    compaction: {window: 1}\n", `unknown key "window" in compaction (known: context_window, compact_at, compact_to, keep_recent_tokens, reserve_output_tokens, stages)`},
		"compaction word":       {head + "    compaction: none\n", "compaction must be a map of context_window"},
		"compaction watermark":  {head + "    compaction:\n      compact_at: lots\n", `line 6: compaction.compact_at: "lots": give a fraction`},
		"compaction order":      {head + "    compaction: {compact_at: 50%, compact_to: 70%}\n", "compaction: compact_to 70% must be below compact_at 50%"},
		"compaction stage":      {head + "    compaction: {stages: [offload, squash]}\n", `compaction.stages: unknown stage "squash" (known: offload, clear, summarize)`},
		"compaction no stages":  {head + "    compaction: {stages: []}\n", "compaction.stages: empty: name some of offload, clear, summarize, or write compaction: off"},
		"as_tools unknown key":  {head + "    as_tools:\n      - {agent: a, turns: 2}\n", `line 6: unknown key "turns" in an as_tools entry (known: agent, description, max_turns, budget)`},
		"as_tools budget key":   {head + "    as_tools:\n      - {agent: a, budget: {tokens: 2}}\n", `unknown key "tokens" in an as_tools budget (known: max_input_tokens, max_output_tokens, max_total_tokens, max_tool_calls, max_duration)`},
		"as_tools no agent":     {head + "    as_tools:\n      - {max_turns: 2}\n", "line 6: as_tools.agent: missing"},
		"as_tools unknown":      {head + "    as_tools:\n      - zed\n", `agent "a": as_tools[0] (line 6): unknown agent "zed" (known: a)`},
		"as_tools self":         {head + "    as_tools: [a]\n", `agent "a": as_tools make a cycle (a asks a)`},
		"as_tools cycle": {"agents:\n  - {name: a, model: scripted, as_tools: [b], script: [{text: x}]}\n  - {name: b, model: scripted, as_tools: [c], script: [{text: x}]}\n  - {name: c, model: scripted, as_tools: [a], script: [{text: x}]}\n",
			"as_tools make a cycle (a asks b asks c asks a)"},
		"as_tools twice":       {"agents:\n  - {name: a, model: scripted, as_tools: [b, b], script: [{text: x}]}\n  - {name: b, model: scripted, script: [{text: x}]}\n", "as_tools[1] (line 2): the tool name ask_b is taken"},
		"unread instructions":  {head + "    instructions_file: prompt.md\n", `instructions_file (line 5) "prompt.md" was not read`},
		"approval of as_tools": {"agents:\n  - {name: a, model: scripted, approval: [ask_c], as_tools: [b], script: [{text: x}]}\n  - {name: b, model: scripted, script: [{text: x}]}\n", `approval names "ask_c"`},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml), opts(t))
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestAsToolApproval(t *testing.T) {
	c, err := Parse([]byte("agents:\n  - {name: a, model: scripted, approval: [ask_b], as_tools: [b], script: [{text: x}]}\n  - {name: b, model: scripted, script: [{text: x}]}\n"), opts(t))
	require.NoError(t, err)
	a, _ := c.Get("a")
	require.Len(t, a.Tools, 1)
	require.Equal(t, "ask_b", a.Tools[0].Name)
	require.True(t, a.Tools[0].NeedsApproval)
}

func TestInstructionsFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(text), 0o644))
		return p
	}
	write("prompts/support.md", "You are a support agent.\nBe brief.\n")
	path := write("agents.yaml", "agents:\n  - name: support\n    model: scripted\n    instructions_file: prompts/support.md\n    script: [{text: x}]\n")

	f, err := ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, "You are a support agent.\nBe brief.\n", f.Agents[0].Instructions, "read relative to the agents file's folder")
	require.Empty(t, f.Agents[0].InstructionsFile, "the text travels in the spec, not the path")
	c, err := Build(f, opts(t))
	require.NoError(t, err)
	a, _ := c.Get("support")
	require.Equal(t, "You are a support agent.\nBe brief.\n", a.Instructions)

	for name, tc := range map[string]struct{ file, want string }{
		"missing": {"agents:\n  - name: a\n    model: scripted\n    instructions_file: nope.md\n    script: [{text: x}]\n",
			`agent "a": instructions_file (line 4): ` + filepath.Join(dir, "nope.md") + ` does not exist (the path is relative to the agents file's folder, ` + dir + `)`},
		"both": {"agents:\n  - name: a\n    model: scripted\n    instructions: hi\n    instructions_file: prompts/support.md\n    script: [{text: x}]\n",
			"instructions_file (line 5): give the instructions either inline (instructions) or in a file (instructions_file), not both"},
		"folder": {"agents:\n  - {name: a, model: scripted, instructions_file: prompts, script: [{text: x}]}\n", "is a folder, not a file"},
		"empty":  {"agents:\n  - {name: a, model: scripted, instructions_file: empty.md, script: [{text: x}]}\n", "empty.md is empty"},
	} {
		t.Run(name, func(t *testing.T) {
			write("empty.md", " \n")
			_, err := ReadFile(write(name+".yaml", tc.file))
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.want)
		})
	}
}
