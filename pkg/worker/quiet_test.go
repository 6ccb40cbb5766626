package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/internal/fleettest"
	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/loop"
)

// TestQuietClaimSeesQueuedControl (issue 16): a run's first submission is
// indexed quiet, so its first claim reads neither its cancel request nor
// its mailbox (TestOpsPerFreshRun); an inject stored while the run is
// queued clears the flag first, and the claim reads it: the message
// reaches the run (a cancel likewise: TestCancelBeforeClaimAndDuringApproval).
func TestQuietClaimSeesQueuedControl(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t, fleettest.Options{AgentsYAML: fleetAgents, Workers: -1})
	ctx := context.Background()
	steered, err := f.Client.Submit(ctx, &bus.RunRequest{Agent: "calc", Input: bus.TextInput("What is 12*7?")})
	require.NoError(t, err)
	plain, err := f.Client.Submit(ctx, &bus.RunRequest{Agent: "calc", Input: bus.TextInput("What is 12*7?")})
	require.NoError(t, err)
	e, err := f.Store.Runs().Get(ctx, steered.RunID)
	require.NoError(t, err)
	require.True(t, e.Record.Quiet, "a first submission's record is not quiet")
	_, err = f.Client.Inject(ctx, steered.RunID, "answer in words")
	require.NoError(t, err)
	e, err = f.Store.Runs().Get(ctx, steered.RunID)
	require.NoError(t, err)
	require.False(t, e.Record.Quiet, "an inject into a queued run left its record quiet")

	f.StartWorker(workerConfig(t, f, "w1"))
	envs := f.Events(steered.RunID, 15*time.Second)
	checkOneSubmission(t, steered.RunID, envs)
	inj := fleettest.OfType(envs, loop.EventUserMessageInjected)
	require.Len(t, inj, 1, "the message injected while the run was queued: types %v", fleettest.Types(envs))
	require.Equal(t, "answer in words", fleettest.Event[*loop.UserMessageInjected](t, inj[0]).Content)
	require.Equal(t, loop.EventRunCompleted, envs[len(envs)-1].Type)

	envs = f.Events(plain.RunID, 15*time.Second)
	require.Empty(t, fleettest.OfType(envs, loop.EventUserMessageInjected))
	require.Equal(t, loop.EventRunCompleted, envs[len(envs)-1].Type)
	e, err = f.Store.Runs().Get(ctx, plain.RunID)
	require.NoError(t, err)
	require.False(t, e.Record.Quiet, "the claim left the record quiet")
}
