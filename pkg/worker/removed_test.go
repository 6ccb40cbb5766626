package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/internal/fleettest"
	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/catalog"
	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/worker"
)

// TestRemovedAgentKeepsItsRunsInFlight (lovia agents rm): an agent removed
// from the registry while its runs are in flight keeps them — when the
// worker holding one dies, another registry worker resumes it from the
// definition of the revision it is pinned to, and it completes; a run of
// it that never started (a raw publish after the removal) ends with
// run_failed UnknownAgent instead of waiting for ever.
func TestRemovedAgentKeepsItsRunsInFlight(t *testing.T) {
	t.Parallel()
	f, reg, opts, source := registryFleet(t)
	ctx := context.Background()
	pinned := catalog.Spec{Name: "pinned", Model: "scripted", Tools: []string{"sleep"}, Script: []catalog.ScriptStep{
		{Call: &catalog.ScriptCall{Name: "sleep", Args: map[string]any{"ms": 5000}, ID: "s1"}},
		{Text: "done"},
	}}
	rep, err := reg.Apply(ctx, []catalog.Spec{pinned}, false, opts)
	require.NoError(t, err)
	pinnedRev := rep.Revision
	srcB, connB := source(), f.Connect()
	f.StartWorker(worker.Config{Conn: connB, Agents: srcB, ID: "wB", SkipProvision: true, SweepInterval: 200 * time.Millisecond})
	r1, err := f.Client.Submit(ctx, &bus.RunRequest{Agent: "pinned", Input: bus.TextInput("one")})
	require.NoError(t, err)
	waitEvent(t, f, r1.RunID, loop.EventToolCallStarted, 20*time.Second) // on B, the only worker
	srcA := source()
	f.StartWorker(worker.Config{Conn: f.Connect(), Agents: srcA, ID: "wA", SkipProvision: true, SweepInterval: 200 * time.Millisecond})
	r2, err := f.Client.Submit(ctx, &bus.RunRequest{Agent: "pinned", Input: bus.TextInput("two")})
	require.NoError(t, err)
	waitEvent(t, f, r2.RunID, loop.EventToolCallStarted, 20*time.Second)

	require.NoError(t, reg.Remove(ctx, "pinned"))
	removedRev, err := reg.Revision(ctx)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, a := srcA.Current()
		_, b := srcB.Current()
		return a == removedRev && b == removedRev
	}, 10*time.Second, 10*time.Millisecond, "waited for both workers to follow the removal (revision %d)", removedRev)
	publishRaw(t, f, "pinned", []byte(`{"run_id":"never-started","input":"three"}`), nil)
	connB.Close() // B dies holding r1 (and perhaps r2)

	for _, id := range []string{r1.RunID, r2.RunID} {
		envs := f.Events(id, 40*time.Second)
		checkOneSubmission(t, id, envs)
		last := envs[len(envs)-1]
		require.Equal(t, loop.EventRunCompleted, last.Type, "run %s: %v", id, fleettest.Types(envs))
		require.Equal(t, "done", fleettest.Event[*loop.RunCompleted](t, last).Output)
		st, err := f.Client.Status(ctx, id)
		require.NoError(t, err)
		require.Equal(t, pinnedRev, st.RegistryRevision, "run %s kept its pinned revision", id)
	}
	envs := f.Events("never-started", 20*time.Second)
	checkOneSubmission(t, "never-started", envs)
	failed := fleettest.Event[*loop.RunFailed](t, envs[len(envs)-1])
	require.Equal(t, bus.TypeUnknownAgent, failed.Error.Type)
	require.Contains(t, failed.Error.Message, "removed from the agents registry")
	require.Contains(t, failed.Error.Hint, "lovia agents apply")
	waitIdle(t, f, 20*time.Second)
}
