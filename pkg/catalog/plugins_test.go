package catalog

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/plugins/skills"
	"github.com/lovia-fleet/lovia/pkg/plugins/todo"
)

func TestPluginsSection(t *testing.T) {
	t.Parallel()
	const head = "agents:\n  - name: a\n    model: scripted\n    script: [{text: hi}]\n"

	t.Run("todo", func(t *testing.T) {
		t.Parallel()
		c, err := Parse([]byte(head+"    plugins:\n      todo: {}\n"), Options{})
		require.NoError(t, err)
		a, _ := c.Get("a")
		require.Len(t, a.Plugins, 1)
		require.IsType(t, &todo.Plugin{}, a.Plugins[0])
		var names []string
		for _, s := range c.ToolSchemas("a") {
			names = append(names, s.Name)
		}
		require.Equal(t, []string{todo.ToolName}, names)
	})

	t.Run("skills_from_a_folder", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		require.NoError(t, os.MkdirAll(filepath.Join(dir, "s"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "s", "SKILL.md"), []byte("---\nname: s\ndescription: Does s.\n---\nbody"), 0o644))
		c, err := Parse([]byte(head+"    plugins:\n      skills: {dir: "+dir+"}\n"), Options{})
		require.NoError(t, err)
		a, _ := c.Get("a")
		require.Len(t, a.Plugins, 1)
		require.Contains(t, a.Plugins[0].(loop.PluginInstructions).Instructions(context.Background(), nil), "- s: Does s.")
		var names []string
		for _, s := range c.ToolSchemas("a") {
			names = append(names, s.Name)
		}
		require.Equal(t, []string{skills.LoadTool, skills.ReadTool}, names)
	})

	t.Run("memory_without_stores_says_so", func(t *testing.T) {
		t.Parallel()
		c, err := Parse([]byte(head+"    plugins:\n      memory: {scope: user}\n"), Options{})
		require.NoError(t, err)
		a, _ := c.Get("a")
		require.Len(t, a.Plugins, 1)
		_, err = a.Plugins[0].(loop.PluginTools).Tools()[0].Func(context.Background(), &loop.RunContext{Metadata: map[string]any{"user_id": "u"}}, []byte(`{"text":"x"}`))
		require.ErrorContains(t, err, "the memory bucket is not reachable from this process")
	})

	t.Run("none", func(t *testing.T) {
		t.Parallel()
		c, err := Parse([]byte(head), Options{})
		require.NoError(t, err)
		a, _ := c.Get("a")
		require.Empty(t, a.Plugins)
	})

	for _, tc := range []struct{ name, yaml, want string }{
		{"unknown_plugin", "    plugins:\n      todos: {}\n", `line 6: unknown plugin "todos" (known: memory, skills, subagents, todo)`},
		{"unknown_skills_setting", "    plugins:\n      skills: {folder: x}\n", `unknown setting "folder" of plugin "skills" (known: dir, max_chars)`},
		{"memory_scope", "    plugins:\n      memory: {scope: team}\n", `plugins.memory.scope "team": use session or user`},
		{"memory_unknown_setting", "    plugins:\n      memory: {ttl: 1h}\n", `unknown setting "ttl" of plugin "memory" (known: scope, user_key, max_notes, dream_every)`},
		{"memory_negative_dream_every", "    plugins:\n      memory: {dream_every: -2}\n", `plugins.memory.dream_every -2 is negative (0, the default, never dreams)`},
		{"subagents_without_agents", "    plugins:\n      subagents: {}\n", "plugins.subagents.agents must name the agents a subagent may run"},
		{"subagents_unknown_setting", "    plugins:\n      subagents: {agent: [a]}\n", `unknown setting "agent" of plugin "subagents" (known: agents, max_wait)`},
		{"negative_max_chars", "    plugins:\n      skills: {max_chars: -1}\n", `plugins.skills.max_chars -1 is negative`},
		{"unknown_setting", "    plugins:\n      todo: {size: 3}\n", `line 6: unknown setting "size" of plugin "todo" (known: none)`},
		{"null_settings", "    plugins:\n      todo:\n", "plugin \"todo\" has no settings: write `todo: {}` for the defaults"},
		{"not_a_map", "    plugins: [todo]\n", "plugins must be a map of plugin name to its settings"},
		{"scalar_settings", "    plugins:\n      todo: yes\n", `plugin "todo": its settings must be a map`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse([]byte(head+tc.yaml), Options{})
			require.ErrorContains(t, err, tc.want)
		})
	}

	t.Run("unknown_agent_key_lists_plugins", func(t *testing.T) {
		t.Parallel()
		_, err := Parse([]byte(head+"    plugin: {}\n"), Options{})
		require.ErrorContains(t, err, "plugins")
	})
}

var _ loop.Plugin = (*todo.Plugin)(nil)
