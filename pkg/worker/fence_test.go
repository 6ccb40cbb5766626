package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/internal/fleettest"
	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/fleet"
	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/store"
	"github.com/lovia-fleet/lovia/pkg/worker"
)

const dozeAgents = `
agents:
  - name: doze
    model: scripted
    tools: [sleep]
    script:
      - call: {name: sleep, args: {ms: 2500}, id: s1}
      - text: rested
`

// TestRedeliveryWhileTheHolderLivesDoesNotDouble (broker faults, claims
// that cannot double): the server loses its consumer state — here the
// agent's consumer is deleted and made again, as a NATS restart without a
// synced consumer store or a leader change can do — and delivers a
// claimed request again, as a first delivery, to another worker while its
// holder is alive and mid-tool. The second worker asks the holder, leaves
// the delivery alone, and the run ends once: one run_started, no
// run_resumed, the tool run once, one terminal event, status completed.
func TestRedeliveryWhileTheHolderLivesDoesNotDouble(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t, fleettest.Options{AgentsYAML: dozeAgents, Worker: func(c *worker.Config) {
		c.Concurrency = 1 // busy with the run: the redelivery goes to w2
	}})
	ctx := context.Background()
	rep, err := f.Client.Submit(ctx, &bus.RunRequest{Agent: "doze", Input: bus.TextInput("nap")})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		envs := runEvents(t, f, rep.RunID)
		return len(fleettest.OfType(envs, loop.EventToolCallStarted)) == 1
	}, 10*time.Second, 10*time.Millisecond, "the run never reached its tool on w1")
	f.StartWorker(workerConfig(t, f, "w2"))

	// The server forgets who holds the request.
	require.NoError(t, f.JS.DeleteConsumer(ctx, "LOVIA_RUNS", "agent-doze"))
	require.NoError(t, bus.ProvisionAgents(ctx, f.JS, bus.ProvisionConfig{}, []string{"doze"}, false))
	require.Eventually(t, func() bool {
		info, err := agentConsumerInfo(ctx, f, "doze")
		return err == nil && info.Delivered.Consumer >= 1
	}, 10*time.Second, 10*time.Millisecond, "the request was never delivered again")

	envs := f.Events(rep.RunID, 15*time.Second)
	checkOneSubmission(t, rep.RunID, envs)
	require.Len(t, fleettest.OfType(envs, loop.EventRunStarted), 1, "%v", fleettest.Types(envs))
	require.Empty(t, fleettest.OfType(envs, bus.EventRunResumed), "a second worker took over a run whose holder lives: %v", fleettest.Types(envs))
	require.Len(t, fleettest.OfType(envs, loop.EventToolCallStarted), 1, "the tool ran twice: %v", fleettest.Types(envs))
	require.Equal(t, loop.EventRunCompleted, envs[len(envs)-1].Type)
	waitIdle(t, f, 10*time.Second)
	st, err := f.Client.Status(ctx, rep.RunID)
	require.NoError(t, err)
	require.Equal(t, bus.StateCompleted, st.Status)
	require.Equal(t, "w1", st.Worker)
}

// TestRedeliveryWhileTheHolderReconnects: a request of a run held by a
// worker that has no responders but is still announced in the fleet (as
// every worker is for a moment after a NATS restart, until its reconnect)
// is not taken over: the claimer asks again later. Once the holder leaves
// the fleet, the run is taken over and completes once.
func TestRedeliveryWhileTheHolderReconnects(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t, fleettest.Options{AgentsYAML: dozeAgents, Worker: func(c *worker.Config) {
		c.ReconnectGrace = 300 * time.Millisecond // how soon the claimer asks again
	}})
	ctx := context.Background()
	require.NoError(t, f.Workers[0].Stop(ctx))
	reg, err := fleet.Ensure(ctx, f.JS, bus.Names{}, 1)
	require.NoError(t, err)
	require.NoError(t, reg.Announce(ctx, fleet.Member{Worker: "ghost", Agents: []bus.AgentInfo{{Name: "doze"}}}))

	// The run, held by ghost under its request.
	seq := publishRaw(t, f, "doze", []byte(`{"run_id":"held-by-ghost","input":"nap"}`), nil)
	_, err = f.Store.Runs().Create(ctx, store.RunRecord{RunID: "held-by-ghost", Agent: "doze", Status: store.RunRunning,
		Worker: "ghost", Attempt: 1, RequestSeq: seq, Submissions: 1})
	require.NoError(t, err)
	f.StartWorker(withConfig(workerConfig(t, f, "w2"), func(c *worker.Config) {
		c.ReconnectGrace = 300 * time.Millisecond
		// The ping of ghost is answered "no responders" at once; a ping
		// that times out counts as a stalled, gone holder, which a loaded
		// machine (several -race packages at once) made of a slow answer
		// once, taking the run over.
		c.PingTimeout = 20 * time.Second
	}))

	// While ghost is announced (kept fresh here, as its refreshes would),
	// every delivery is left to it.
	ghost := fleet.Member{Worker: "ghost", Agents: []bus.AgentInfo{{Name: "doze"}}}
	require.Eventually(t, func() bool {
		if reg.Announce(ctx, ghost) != nil {
			return false
		}
		info, err := agentConsumerInfo(ctx, f, "doze")
		return err == nil && info.NumRedelivered > 0 && info.Delivered.Consumer >= 3
	}, 30*time.Second, 20*time.Millisecond, "the request was not delivered (and asked about) again and again")
	st, err := f.Client.Status(ctx, "held-by-ghost")
	require.NoError(t, err)
	require.Equal(t, "ghost", st.Worker, "a worker took over a run whose holder is only reconnecting")
	require.Empty(t, runEvents(t, f, "held-by-ghost"))

	// ghost leaves the fleet: the run is taken over and ends once.
	require.NoError(t, reg.Withdraw(ctx, "ghost"))
	envs := f.Events("held-by-ghost", 20*time.Second)
	checkOneSubmission(t, "held-by-ghost", envs)
	require.Equal(t, loop.EventRunCompleted, envs[len(envs)-1].Type)
}
