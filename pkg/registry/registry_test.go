package registry_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/internal/leaktest"
	"github.com/lovia-fleet/lovia/pkg/broker"
	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/catalog"
	"github.com/lovia-fleet/lovia/pkg/registry"
	"github.com/lovia-fleet/lovia/pkg/tools"
)

func TestMain(m *testing.M) { leaktest.VerifyTestMain(m) }

func setup(t *testing.T) (*registry.Registry, catalog.Options) {
	t.Helper()
	srv, err := broker.StartEmbedded(broker.EmbeddedConfig{StoreDir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	nc, err := srv.Connect()
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	reg, err := registry.Ensure(context.Background(), js, bus.Names{}, 1)
	require.NoError(t, err)
	ts, err := tools.Builtin(tools.Config{Workspace: t.TempDir()})
	require.NoError(t, err)
	return reg, catalog.Options{Tools: ts}
}

func spec(name, text string, handoffs ...string) catalog.Spec {
	return catalog.Spec{Name: name, Model: "scripted", Handoffs: handoffs, Script: []catalog.ScriptStep{{Text: text}}}
}

func TestRegistry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("apply creates, updates, leaves alone and prunes", func(t *testing.T) {
		t.Parallel()
		reg, opts := setup(t)
		rep, err := reg.Apply(ctx, []catalog.Spec{spec("a", "1"), spec("b", "1")}, false, opts)
		require.NoError(t, err)
		require.ElementsMatch(t, []string{"a", "b"}, rep.Created)
		rep, err = reg.Apply(ctx, []catalog.Spec{spec("a", "2"), spec("b", "1")}, false, opts)
		require.NoError(t, err)
		require.Equal(t, []string{"a"}, rep.Updated)
		require.Equal(t, []string{"b"}, rep.Unchanged)
		rep, err = reg.Apply(ctx, []catalog.Spec{spec("a", "2")}, true, opts)
		require.NoError(t, err)
		require.Equal(t, []string{"b"}, rep.Deleted)
		es, err := reg.List(ctx)
		require.NoError(t, err)
		require.Len(t, es, 1)
		require.Equal(t, "a", es[0].Spec.Name)
	})

	t.Run("revisions and history", func(t *testing.T) {
		t.Parallel()
		reg, opts := setup(t)
		r1, err := reg.Apply(ctx, []catalog.Spec{spec("a", "one")}, false, opts)
		require.NoError(t, err)
		_, err = reg.Apply(ctx, []catalog.Spec{spec("a", "two")}, false, opts)
		require.NoError(t, err)
		old, err := reg.GetRevision(ctx, "a", r1.Revision)
		require.NoError(t, err)
		require.Equal(t, "one", old.Spec.Script[0].Text)
		cur, err := reg.Get(ctx, "a")
		require.NoError(t, err)
		require.Equal(t, "two", cur.Spec.Script[0].Text)
		h, err := reg.History(ctx, "a")
		require.NoError(t, err)
		require.Len(t, h, 2)
		at, err := reg.At(ctx, r1.Revision)
		require.NoError(t, err)
		require.Len(t, at, 1)
		require.Equal(t, "one", at[0].Spec.Script[0].Text, "the registry as it was at the first revision")
		require.NoError(t, reg.Remove(ctx, "a"))
		_, err = reg.Get(ctx, "a")
		require.ErrorIs(t, err, registry.ErrNotFound)
		require.ErrorIs(t, reg.Remove(ctx, "a"), registry.ErrNotFound)
	})

	t.Run("invalid definitions are refused with the agents file's errors, and nothing is written", func(t *testing.T) {
		t.Parallel()
		reg, opts := setup(t)
		_, err := reg.Apply(ctx, []catalog.Spec{spec("a", "x", "nobody")}, false, opts)
		require.ErrorContains(t, err, `handoff to unknown agent "nobody"`)
		_, err = reg.Apply(ctx, []catalog.Spec{{Name: "b", Model: "scripted", Tools: []string{"teleport"}, Script: []catalog.ScriptStep{{Text: "x"}}}}, false, opts)
		require.ErrorContains(t, err, "teleport")
		_, err = reg.Apply(ctx, []catalog.Spec{{Name: "c", Model: "scripted", Script: []catalog.ScriptStep{{Text: "x"}},
			MCPServers: map[string]catalog.MCPServer{"fs": {Command: "npx"}}}}, false, opts)
		require.ErrorContains(t, err, "mcp_servers cannot be declared in the registry")
		es, err := reg.List(ctx)
		require.NoError(t, err)
		require.Empty(t, es)
	})

	t.Run("a source serves the agents matching its patterns and follows changes", func(t *testing.T) {
		t.Parallel()
		reg, opts := setup(t)
		_, err := reg.Apply(ctx, []catalog.Spec{spec("support", "s"), spec("billing-eu", "b"), spec("ops", "o")}, false, opts)
		require.NoError(t, err)
		src := registry.NewSource(reg, opts, []string{"support", "billing-*"}, nil)
		require.NoError(t, src.Start(ctx))
		defer func() { _ = src.Stop(ctx) }()
		require.Equal(t, []string{"billing-eu", "support"}, src.Served())
		_, err = reg.Apply(ctx, []catalog.Spec{spec("billing-us", "b")}, false, opts)
		require.NoError(t, err)
		select {
		case <-src.Changes():
		case <-ctx.Done():
		}
		require.Eventually(t, func() bool { return len(src.Served()) == 3 }, 10*time.Second, 10*time.Millisecond, "the new billing agent was never served: %v", src.Served())
		for _, name := range []string{"support", "billing-eu", "billing-us", "ops"} {
			require.NoError(t, reg.Remove(ctx, name))
		}
		require.Eventually(t, func() bool { return len(src.Served()) == 0 }, 10*time.Second, 10*time.Millisecond,
			"agents removed from the registry are still served: %v", src.Served())
	})
}

// A run's registry_revision is the whole registry's: the agent as of that
// revision is its latest definition at or before it, whatever other agents
// changed in between.
func TestGetRevisionOfTheRegistry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	reg, opts := setup(t)
	apply := func(specs ...catalog.Spec) uint64 {
		t.Helper()
		rep, err := reg.Apply(ctx, specs, false, opts)
		require.NoError(t, err)
		return rep.Revision
	}
	apply(spec("other", "x"))
	first := apply(spec("a", "one"))
	otherChanged := apply(spec("other", "y"))
	second := apply(spec("a", "two"))
	apply(spec("other", "z"))

	for _, tc := range []struct {
		rev  uint64
		want string
	}{{first, "one"}, {otherChanged, "one"}, {second, "two"}, {second + 1, "two"}} {
		e, err := reg.GetRevision(ctx, "a", tc.rev)
		require.NoError(t, err, "agent a as of registry revision %d", tc.rev)
		require.Equal(t, tc.want, e.Spec.Script[0].Text, "agent a as of registry revision %d", tc.rev)
		require.LessOrEqual(t, e.Revision, tc.rev, "the agent's own revision")
	}

	_, err := reg.GetRevision(ctx, "a", first-1)
	require.ErrorIs(t, err, registry.ErrNotFound)
	require.ErrorContains(t, err, "first applied at revision")
	_, err = reg.GetRevision(ctx, "a", second+100)
	require.ErrorIs(t, err, registry.ErrNotFound)
	require.ErrorContains(t, err, "the registry is at revision")
	require.NoError(t, reg.Remove(ctx, "a"))
	removed, err := reg.Revision(ctx)
	require.NoError(t, err)
	_, err = reg.GetRevision(ctx, "a", removed)
	require.ErrorIs(t, err, registry.ErrNotFound)
	require.ErrorContains(t, err, "removed at revision")
	e, err := reg.GetRevision(ctx, "a", otherChanged)
	require.NoError(t, err, "a revision before the removal still shows it")
	require.Equal(t, "one", e.Spec.Script[0].Text)
	_, err = reg.GetRevision(ctx, "nobody", second)
	require.ErrorIs(t, err, registry.ErrNotFound)
}

// The agents file's sections round-trip through the registry, and an
// instructions_file reaches it as the file's text.
func TestRegistryRoundTripsAgentSections(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	reg, opts := setup(t)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "lead.md"), []byte("You lead.\n"), 0o644))
	path := filepath.Join(dir, "agents.yaml")
	require.NoError(t, os.WriteFile(path, []byte(`
agents:
  - name: lead
    model: scripted
    instructions_file: lead.md
    tools: [echo]
    settings: {temperature: 0.2, top_p: 0.5, max_tokens: 99, stop: [END], parallel_tool_calls: false, provider_options: {effort: 3, gone: null}}
    retry: {attempts: 2, base_delay: 10ms, max_delay: 1s, restart_on_partial: false}
    tool_defaults: {timeout: 5s, retries: 1, max_output_chars: -1}
    compaction: {context_window: 64000, compact_at: 80%, compact_to: 0.5, reserve_output_tokens: 0, stages: [clear]}
    as_tools: [{agent: helper, max_turns: 3, description: Helps., budget: {max_total_tokens: 500, max_duration: 1m}}]
    script: [{text: x}]
  - name: helper
    model: scripted
    retry: off
    compaction: off
    script: [{text: y}]
`), 0o644))
	f, err := catalog.ReadFile(path)
	require.NoError(t, err)
	rep, err := reg.Apply(ctx, f.Agents, false, opts)
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"lead", "helper"}, rep.Created)

	var stored []catalog.Spec
	for i, s := range f.Agents {
		e, err := reg.Get(ctx, s.Name)
		require.NoError(t, err)
		want, _ := json.Marshal(f.Agents[i])
		got, _ := json.Marshal(e.Spec)
		require.JSONEq(t, string(want), string(got), "agent %s reads back as applied", s.Name)
		stored = append(stored, e.Spec)
	}
	require.Equal(t, "You lead.\n", stored[0].Instructions, "the file's text, not its path")
	require.Empty(t, stored[0].InstructionsFile)
	require.True(t, stored[1].Retry.Off)
	require.True(t, stored[1].Compaction.Off)

	rep, err = reg.Apply(ctx, f.Agents, false, opts)
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"lead", "helper"}, rep.Unchanged, "the same file applied again changes nothing")

	// What a registry worker builds from the stored specs.
	cat, err := catalog.Build(catalog.File{Agents: stored}, opts)
	require.NoError(t, err)
	lead, _ := cat.Get("lead")
	require.InDelta(t, 0.2, *lead.Settings.Temperature, 1e-9)
	require.Equal(t, map[string]map[string]any{"scripted": {"effort": 3.0, "gone": nil}}, lead.Settings.ProviderOptions)
	require.Equal(t, 2, lead.Retry.MaxAttempts)
	require.True(t, lead.Retry.NoRestartOnPartial)
	require.Equal(t, 5*time.Second, lead.DefaultToolTimeout)
	require.Equal(t, -1, lead.MaxToolOutputChars)
	require.Equal(t, "You lead.\n", lead.Instructions)
	require.Equal(t, []string{"echo", "ask_helper"}, []string{lead.Tools[0].Name, lead.Tools[1].Name})
	helper, _ := cat.Get("helper")
	require.Equal(t, 1, helper.Retry.MaxAttempts)
}

// The registry refuses what the agents file refuses, naming the field.
func TestRegistryRefusesBadSections(t *testing.T) {
	t.Parallel()
	reg, opts := setup(t)
	temp := 5.0
	for _, tc := range []struct {
		spec catalog.Spec
		want string
	}{
		{catalog.Spec{Name: "a", Model: "scripted", Script: []catalog.ScriptStep{{Text: "x"}}, Settings: &catalog.SettingsSpec{Temperature: &temp}}, `agent "a": settings.temperature: 5 is outside 0 to 2`},
		{catalog.Spec{Name: "a", Model: "scripted", Script: []catalog.ScriptStep{{Text: "x"}}, InstructionsFile: "a.md"}, `instructions_file "a.md" was not read`},
		{catalog.Spec{Name: "a", Model: "scripted", Script: []catalog.ScriptStep{{Text: "x"}}, AsTools: []catalog.AsToolSpec{{Agent: "zed"}}}, `unknown agent "zed"`},
		{catalog.Spec{Name: "a", Model: "scripted", Script: []catalog.ScriptStep{{Text: "x"}}, Compaction: &catalog.CompactionSpec{CompactAt: "lots"}}, `compaction.compact_at: "lots"`},
	} {
		_, err := reg.Apply(context.Background(), []catalog.Spec{tc.spec}, false, opts)
		require.ErrorContains(t, err, tc.want)
	}
	es, err := reg.List(context.Background())
	require.NoError(t, err)
	require.Empty(t, es, "nothing was written")
}
