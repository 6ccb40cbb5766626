package worker_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/internal/fleettest"
	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/lifecycle"
	"github.com/lovia-fleet/lovia/pkg/loop"
)

// TestRequeuedCopyWinnerAnswersHeld (issue 16): a first submission's
// request carries no recorded stream sequence, so a client's retry past
// half the deduplication window publishes a second copy under a requeue
// id and records its sequence (what the API's requeue does, replayed here
// exactly). A worker that starts then fetches both copies and handles them
// at once: the first is stale and terminated, the second is the run. The
// execution of the copy that wins the claim must be the one this worker
// answers for — a holder ping naming the run and that copy's sequence is
// "held" (otherwise a redelivery elsewhere takes the run over while it
// runs here: two executions), and control notifications reach it (a
// cancel is applied at once, not at the next heartbeat).
func TestRequeuedCopyWinnerAnswersHeld(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t, fleettest.Options{AgentsYAML: fleetAgents, Workers: -1})
	ctx := context.Background()
	names, err := bus.NewNames("")
	require.NoError(t, err)
	const n = 6
	ids := make([]string, n)
	second := map[string]uint64{}
	for i := range n {
		rep, err := f.Client.Submit(ctx, &bus.RunRequest{RunID: fmt.Sprintf("copied-%d", i), Agent: "gated", Input: bus.TextInput("deploy")})
		require.NoError(t, err)
		ids[i] = rep.RunID
		// The API's requeue past half the window: count the requeue,
		// publish under the new id, record the new copy's sequence.
		e, err := f.Store.Runs().Get(ctx, rep.RunID)
		require.NoError(t, err)
		require.Zero(t, e.Record.RequestSeq)
		e.Record, err = lifecycle.Requeue(e.Record)
		require.NoError(t, err)
		require.NoError(t, f.Store.Runs().Update(ctx, e))
		body, err := bus.Marshal(bus.JSON, &bus.RunRequest{RunID: rep.RunID, Agent: "gated", Input: bus.TextInput("deploy"), Encoding: bus.JSON})
		require.NoError(t, err)
		seq, err := bus.PublishRequest(ctx, f.JS, names, "gated", body,
			bus.RequestMeta{RunID: rep.RunID, ContentType: bus.JSON.ContentType(), Submission: 1, Suffix: ".requeue1"})
		require.NoError(t, err)
		e.Record, err = lifecycle.RecordRequest(e.Record, seq)
		require.NoError(t, err)
		require.NoError(t, f.Store.Runs().Update(ctx, e))
		second[rep.RunID] = seq
	}

	f.StartWorker(workerConfig(t, f, "w1"))
	for _, id := range ids {
		waitEvent(t, f, id, loop.EventApprovalRequired, 15*time.Second)
		e, err := f.Store.Runs().Get(ctx, id)
		require.NoError(t, err)
		require.Equal(t, second[id], e.Record.RequestSeq, "run %s was claimed under its stale copy", id)
		rep, err := f.Conn.Request(names.WorkerPing("w1"), fmt.Appendf(nil, "%s %d", id, second[id]), 5*time.Second)
		require.NoError(t, err)
		require.Equal(t, "held", string(rep.Data), "the worker executing run %s under request %d answers that it does not", id, second[id])
	}
	// A cancel reaches the winner through its notification, well before
	// the heartbeat's cancel read (every 10 s by default).
	t0 := time.Now()
	_, err = f.Client.Cancel(ctx, ids[0], "never mind")
	require.NoError(t, err)
	envs := f.Events(ids[0], 15*time.Second)
	require.Less(t, time.Since(t0), 8*time.Second, "the cancel of run %s waited for the heartbeat: its notification missed the execution", ids[0])
	checkOneSubmission(t, ids[0], envs)
	require.Equal(t, "RunCancelled", fleettest.Event[*loop.RunFailed](t, envs[len(envs)-1]).Error.Type)
	ids = ids[1:]
	for _, id := range ids {
		_, err := f.Client.Approve(ctx, id, "c1", loop.Approve, "go")
		require.NoError(t, err)
	}
	for _, id := range ids {
		envs := f.Events(id, 15*time.Second)
		checkOneSubmission(t, id, envs)
		require.Equal(t, loop.EventRunCompleted, envs[len(envs)-1].Type)
		require.Len(t, fleettest.OfType(envs, loop.EventRunStarted), 1, "run %s started twice: %v", id, fleettest.Types(envs))
	}
}
