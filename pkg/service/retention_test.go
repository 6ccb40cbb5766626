package service_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/internal/fleettest"
	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/worker"
)

// TestStatusOfAnExpiredRun: a completed run of workers with a short
// retention expires (record and checkpoint: the API's reaper removes the
// rest), and its status then answers NotFound with a hint that names
// retention; its one terminal event stays for the events' own max age.
func TestStatusOfAnExpiredRun(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t, fleettest.Options{AgentsYAML: cancelAgents, Worker: func(c *worker.Config) { c.Store.Retention = time.Second }})
	ctx := context.Background()
	rep, err := f.Client.Submit(ctx, &bus.RunRequest{Agent: "quick", Input: bus.TextInput("hi")})
	require.NoError(t, err)
	eventually(t, "the run to complete", func() bool {
		st, err := f.Client.Status(ctx, rep.RunID)
		return err == nil && st.Status == bus.StateCompleted
	})
	var apiErr *bus.APIError
	eventually(t, "the completed run's record to expire", func() bool {
		_, err := f.Client.Status(ctx, rep.RunID)
		return errors.As(err, &apiErr)
	})
	require.Equal(t, bus.TypeNotFound, apiErr.Type)
	require.True(t, strings.Contains(apiErr.Hint, "--retention"), "the hint names retention: %q", apiErr.Hint)
	eventually(t, "the reaper to remove the expired run's checkpoint", func() bool {
		_, err := f.Store.Checkpointer().Load(ctx, rep.RunID)
		return errors.Is(err, loop.ErrNoSnapshot)
	})
	envs := f.Events(rep.RunID, 10*time.Second)
	terminals := 0
	for _, e := range envs {
		if e.IsTerminal() {
			terminals++
		}
	}
	require.Equal(t, 1, terminals, "one terminal event: %v", fleettest.Types(envs))
}
