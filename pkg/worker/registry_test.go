package worker_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/internal/fleettest"
	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/catalog"
	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/loop/scripted"
	"github.com/lovia-fleet/lovia/pkg/registry"
	"github.com/lovia-fleet/lovia/pkg/tools"
	"github.com/lovia-fleet/lovia/pkg/worker"
)

// registryFleet starts a fleet for tests of registry workers, with its own
// worker stopped. It returns the agents registry, the catalog options to
// apply specs with, and source, which starts a worker's view of the
// registry (stopped at cleanup).
func registryFleet(t *testing.T) (f *fleettest.Fleet, reg *registry.Registry, opts catalog.Options, source func() *registry.Source) {
	t.Helper()
	f = fleettest.Start(t, fleettest.Options{AgentsYAML: fleetAgents})
	ctx := context.Background()
	require.NoError(t, f.Workers[0].Stop(ctx))
	ts, err := tools.Builtin(tools.Config{Workspace: t.TempDir()})
	require.NoError(t, err)
	opts = catalog.Options{Tools: ts}
	reg, err = registry.Ensure(ctx, f.JS, bus.Names{}, 1)
	require.NoError(t, err)
	source = func() *registry.Source {
		s := registry.NewSource(reg, opts, nil, nil)
		require.NoError(t, s.Start(ctx))
		t.Cleanup(func() { _ = s.Stop(ctx) })
		return s
	}
	return f, reg, opts, source
}

func helperSpec(version string) catalog.Spec {
	return catalog.Spec{
		Name: "helper", Model: "scripted", Instructions: "You are helper " + version + ".", Tools: []string{"sleep"},
		Script: []catalog.ScriptStep{
			{Call: &catalog.ScriptCall{Name: "sleep", Args: map[string]any{"ms": 1500}, ID: "s1"}},
			{Text: "done " + version},
		},
	}
}

// sawInstructions reports whether any request the catalog's helper agent
// received carried the given text.
func sawInstructions(t *testing.T, cat *catalog.Catalog, text string) bool {
	t.Helper()
	ag, ok := cat.Get("helper")
	require.True(t, ok)
	for _, req := range ag.Provider.(*scripted.Provider).Requests() {
		b, _ := json.Marshal(req.Entries)
		if strings.Contains(string(b), text) {
			return true
		}
	}
	return false
}

// TestRegistryUpdatePinsRunningRuns (agents registry): workers serve the
// agents of the registry and follow its changes without a restart. A run
// pins the revision it started with: the agent is updated while the run is
// mid-tool on worker A, A dies, and worker B resumes the run with the old
// instructions (as the scripted model's recorded requests show), while the
// next run gets the new ones; a newly applied agent is served at once.
func TestRegistryUpdatePinsRunningRuns(t *testing.T) {
	t.Parallel()
	f, reg, opts, source := registryFleet(t)
	ctx := context.Background()
	rep, err := reg.Apply(ctx, []catalog.Spec{helperSpec("v1")}, false, opts)
	require.NoError(t, err)
	require.Equal(t, []string{"helper"}, rep.Created)
	rev1 := rep.Revision

	srcA := source()
	connA := f.Connect()
	f.StartWorker(worker.Config{Conn: connA, Agents: srcA, ID: "wA", SkipProvision: true})

	r1, err := f.Client.Submit(ctx, &bus.RunRequest{Agent: "helper", Input: bus.TextInput("one")})
	require.NoError(t, err)
	waitEvent(t, f, r1.RunID, loop.EventToolCallStarted, 10*time.Second)

	rep, err = reg.Apply(ctx, []catalog.Spec{helperSpec("v2")}, false, opts)
	require.NoError(t, err)
	require.Equal(t, []string{"helper"}, rep.Updated)
	rev2 := rep.Revision
	require.Greater(t, rev2, rev1)
	connA.Close() // A dies mid-tool

	srcB := source()
	f.StartWorker(worker.Config{Conn: f.Connect(), Agents: srcB, ID: "wB", SkipProvision: true})
	envs := f.Events(r1.RunID, 20*time.Second)
	checkOneSubmissionFrom(t, envs)
	require.Len(t, fleettest.OfType(envs, bus.EventRunResumed), 1, "%v", fleettest.Types(envs))
	require.Equal(t, "done v1", fleettest.Event[*loop.RunCompleted](t, envs[len(envs)-1]).Output, "the resumed run finished with the definition it started with")
	pinned, err := srcB.At(ctx, rev1)
	require.NoError(t, err)
	require.True(t, sawInstructions(t, pinned, "You are helper v1."), "B resumed the run with the pinned (v1) instructions")
	cur, curRev := srcB.Current()
	require.Equal(t, rev2, curRev)
	require.False(t, sawInstructions(t, cur, "You are helper v1."))
	st, err := f.Client.Status(ctx, r1.RunID)
	require.NoError(t, err)
	require.Equal(t, rev1, st.RegistryRevision)

	r2, err := f.Client.Submit(ctx, &bus.RunRequest{Agent: "helper", Input: bus.TextInput("two")})
	require.NoError(t, err)
	envs = f.Events(r2.RunID, 20*time.Second)
	require.Equal(t, "done v2", fleettest.Event[*loop.RunCompleted](t, envs[len(envs)-1]).Output)
	require.True(t, sawInstructions(t, cur, "You are helper v2."), "the next run got the new instructions")
	st, err = f.Client.Status(ctx, r2.RunID)
	require.NoError(t, err)
	require.Equal(t, rev2, st.RegistryRevision)

	// A new agent, applied while B runs, is served without a restart.
	extra := catalog.Spec{Name: "greeter", Model: "scripted", Script: []catalog.ScriptStep{{Text: "hello"}}}
	_, err = reg.Apply(ctx, []catalog.Spec{extra}, false, opts)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		rep, err := f.Client.Agents(ctx)
		return err == nil && slices.ContainsFunc(rep.Agents, func(a bus.AgentInfo) bool { return a.Name == "greeter" })
	}, 10*time.Second, 20*time.Millisecond, "the fleet never announced the new agent")
	r3, err := f.Client.Submit(ctx, &bus.RunRequest{Agent: "greeter", Input: bus.TextInput("hi")})
	require.NoError(t, err)
	envs = f.Events(r3.RunID, 10*time.Second)
	require.Equal(t, "hello", fleettest.Event[*loop.RunCompleted](t, envs[len(envs)-1]).Output)
}
