package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/internal/fleettest"
	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/worker"
)

// A run released more often than MaxDeliver allows is not left "running"
// forever: a surviving worker fails it with MaxDeliveriesExceeded and
// removes its request from the work queue.
func TestMaxDeliveriesFailsTheRun(t *testing.T) {
	t.Parallel()
	const sleeper = `
agents:
  - name: sleeper
    model: scripted
    tools: [sleep]
    script:
      - call: {name: sleep, args: {ms: 60000}, id: s1}
      - text: never
`
	f := fleettest.Start(t, fleettest.Options{AgentsYAML: sleeper, Workers: 2, Worker: func(c *worker.Config) {
		c.SkipProvision = false
		c.Provision.Workers.MaxDeliver = 1
	}})
	ctx := context.Background()
	rep, err := f.Client.Submit(ctx, &bus.RunRequest{Agent: "sleeper", Input: bus.TextInput("go")})
	require.NoError(t, err)
	var owner string
	require.Eventually(t, func() bool {
		st, err := f.Client.Status(ctx, rep.RunID)
		if err == nil && st.Status == bus.StateRunning && st.Worker != "" {
			owner = st.Worker
			return true
		}
		return false
	}, 10*time.Second, 20*time.Millisecond)
	// Its owner shuts down and releases it; with MaxDeliver 1 the server
	// will not deliver it again.
	for _, w := range f.Workers {
		if w.ID() == owner {
			stopNow, cancel := context.WithCancel(ctx)
			cancel()
			require.NoError(t, w.Stop(stopNow))
		}
	}
	envs := f.Events(rep.RunID, 15*time.Second)
	require.Equal(t, "sleeper", envs[len(envs)-1].Agent, "the dead letter's run_failed names the run's agent")
	last, err := envs[len(envs)-1].Event()
	require.NoError(t, err)
	rf, ok := last.(*loop.RunFailed)
	require.True(t, ok, "terminal event %T", last)
	require.Equal(t, worker.TypeMaxDeliveries, rf.Error.Type)
	require.Contains(t, rf.Error.Hint, "resubmit")
	require.Eventually(t, func() bool {
		st, err := f.Client.Status(ctx, rep.RunID)
		return err == nil && st.Status == bus.StateFailed
	}, 5*time.Second, 20*time.Millisecond)
	// The request is gone from the work queue.
	runs, err := f.JS.Stream(ctx, "LOVIA_RUNS")
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		info, err := runs.Info(ctx)
		return err == nil && info.State.Msgs == 0
	}, 5*time.Second, 20*time.Millisecond)
}

// The advisory is kept in the dead-letter stream whatever the timing: when
// the only worker stops right as the run reaches MaxDeliver, either it or
// the next worker to start fails the run — it is never left running.
func TestMaxDeliveriesSurvivesShutdown(t *testing.T) {
	t.Parallel()
	const sleeper = `
agents:
  - name: sleeper
    model: scripted
    tools: [sleep]
    script:
      - call: {name: sleep, args: {ms: 60000}, id: s1}
      - text: never
`
	maxDeliver := func(c *worker.Config) {
		c.SkipProvision = false
		c.Provision.Workers.MaxDeliver = 1
	}
	f := fleettest.Start(t, fleettest.Options{AgentsYAML: sleeper, Worker: maxDeliver})
	ctx := context.Background()
	rep, err := f.Client.Submit(ctx, &bus.RunRequest{Agent: "sleeper", Input: bus.TextInput("go")})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		st, err := f.Client.Status(ctx, rep.RunID)
		return err == nil && st.Status == bus.StateRunning
	}, 10*time.Second, 20*time.Millisecond)
	stopNow, cancel := context.WithCancel(ctx)
	cancel()
	require.NoError(t, f.Workers[0].Stop(stopNow))

	cfg := worker.Config{Conn: f.Connect(), Catalog: f.Catalog, ID: "late"}
	maxDeliver(&cfg)
	f.StartWorker(cfg)
	envs := f.Events(rep.RunID, 15*time.Second)
	last, err := envs[len(envs)-1].Event()
	require.NoError(t, err)
	require.Equal(t, worker.TypeMaxDeliveries, last.(*loop.RunFailed).Error.Type)
}
