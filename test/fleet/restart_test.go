package fleet

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/internal/fleettest"
	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/worker"
)

// TestNATSRestartLosesNothing: the NATS server (single node, file store)
// goes down for a second while two workers run ten runs, and comes back on
// the same port and store. Every run completes exactly once — contiguous
// seqs, one terminal event, each tool result checkpointed once — and
// runs submitted after the restart complete too.
//
// LOVIA_RESTART_DOWN (a duration, default 1s) lengthens the outage: past
// the store's 5 s timeouts runs are released and resumed elsewhere.
func TestNATSRestartLosesNothing(t *testing.T) {
	down := time.Second
	if v := os.Getenv("LOVIA_RESTART_DOWN"); v != "" {
		d, err := time.ParseDuration(v)
		require.NoError(t, err)
		down = d
	}
	const agents = `
agents:
  - name: stepper
    model: scripted
    tools: [sleep, echo]
    script:
      - call: {name: sleep, args: {ms: 400}, id: s1}
      - call: {name: echo, args: {text: half}, id: e1}
      - call: {name: sleep, args: {ms: 400}, id: s2}
      - text: done
`
	f := fleettest.Start(t, fleettest.Options{AgentsYAML: agents, Workers: 2, Worker: func(c *worker.Config) {
		c.AckWait, c.Heartbeat, c.SkipProvision = 3*time.Second, time.Second, false
	}})
	ctx := context.Background()
	var ids []string
	submit := func(n int) {
		for range n {
			rep, err := f.Client.Submit(ctx, &bus.RunRequest{Agent: "stepper", Input: bus.TextInput("go")})
			require.NoError(t, err)
			ids = append(ids, rep.RunID)
		}
	}
	submit(10)
	// Live tails that span the restart see every event once, in order.
	live := make([]chan []*bus.Envelope, 3)
	for i := range live {
		live[i] = make(chan []*bus.Envelope, 1)
		go func() { live[i] <- tailAll(ids[i], 60*time.Second, f) }()
	}
	time.Sleep(300 * time.Millisecond)
	f.RestartServer(down)
	submit(4)

	resumed := 0
	for i, id := range ids {
		label := fmt.Sprintf("run %d (%s)", i, id)
		envs := f.Events(id, 60*time.Second)
		if slices.ContainsFunc(envs, func(e *bus.Envelope) bool { return e.Type == bus.EventRunResumed }) {
			resumed++
		}
		terminals := 0
		for j, env := range envs {
			require.EqualValues(t, j+1, env.Seq, "%s: contiguous seqs: %v", label, fleettest.Types(envs))
			if env.IsTerminal() {
				terminals++
			}
		}
		require.Equal(t, 1, terminals, label)
		require.Equal(t, loop.EventRunCompleted, envs[len(envs)-1].Type, "%s: %v", label, fleettest.Types(envs))
		snap, err := f.Store.Checkpointer().Load(ctx, id)
		require.NoError(t, err, label)
		var results []string
		for _, e := range snap.Entries {
			if e.Kind == loop.KindToolResult {
				results = append(results, e.CallID)
			}
		}
		require.Equal(t, "s1 e1 s2", strings.Join(results, " "), "%s: each tool result checkpointed once", label)
		if i < len(live) {
			seen := <-live[i]
			require.Equal(t, fleettest.Types(envs), fleettest.Types(seen), "%s: the live tail across the restart", label)
		}
	}
	t.Logf("NATS down %s: %d of %d runs were released and resumed (run_resumed)", down, resumed, len(ids))
}

// tailAll follows a run live to its terminal event; an error ends the tail
// (the caller compares what it saw).
func tailAll(runID string, timeout time.Duration, f *fleettest.Fleet) []*bus.Envelope {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	tail, err := f.Client.Tail(ctx, runID, bus.FromStart())
	if err != nil {
		return nil
	}
	defer func() { _ = tail.Close(context.Background()) }()
	var out []*bus.Envelope
	for env, err := range tail.All(ctx) {
		if err != nil {
			return out
		}
		out = append(out, env)
	}
	return out
}
