package service_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/internal/fleettest"
	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/worker"
)

// The workers listing counts a worker's runs in flight from the run
// records, not from its last announcement: the run that starts, and the
// run that ends, between two refreshes are counted as they are. (The
// workers here announce once an hour.)
func TestWorkersInFlightFollowsTheRuns(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t, fleettest.Options{AgentsYAML: `
agents:
  - name: slow
    model: scripted
    tools: [sleep]
    script:
      - call: {name: sleep, args: {ms: 600000}, id: c1}
      - text: woke
`, Worker: func(c *worker.Config) { c.AnnounceInterval = time.Hour }})
	ctx := context.Background()
	inFlight := func() int {
		rep, err := f.API.Workers(ctx)
		require.NoError(t, err)
		require.Len(t, rep.Workers, 1)
		return rep.Workers[0].InFlight
	}
	require.Equal(t, 0, inFlight())
	rep, err := f.Client.Submit(ctx, &bus.RunRequest{Agent: "slow", Input: bus.TextInput("sleep")})
	require.NoError(t, err)
	eventually(t, "the sleeping run to count as in flight", func() bool { return inFlight() == 1 })
	_, err = f.Client.Cancel(ctx, rep.RunID, "done")
	require.NoError(t, err)
	eventually(t, "the cancelled run to end", func() bool {
		st, err := f.Client.Status(ctx, rep.RunID)
		require.NoError(t, err)
		return st.Status == bus.StateFailed
	})
	eventually(t, "the ended run to count no more", func() bool { return inFlight() == 0 })
}
