package worker_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/internal/fleettest"
	"github.com/lovia-fleet/lovia/pkg/worker"
)

// TestWorkerIDIsHeldOnce: two workers with one id would answer each
// other's presence pings (a dead one's runs then wait for the ack wait),
// so a second worker started with a live worker's id is refused, naming
// the holder; of workers racing to start with one id exactly one starts;
// and a worker restarted with its id after a kill -9 (its connection gone,
// its lease left behind) or a Stop starts.
func TestWorkerIDIsHeldOnce(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t, fleettest.Options{AgentsYAML: fleetAgents, Workers: 1})
	ctx := context.Background()
	start := func(id string) (*worker.Worker, error) {
		w, err := worker.New(workerConfig(t, f, id))
		require.NoError(t, err)
		err = w.Start(ctx)
		t.Cleanup(func() {
			sctx, cancel := context.WithTimeout(ctx, 15*time.Second)
			defer cancel()
			_ = w.Stop(sctx)
		})
		return w, err
	}

	t.Run("a live worker's id is refused", func(t *testing.T) {
		_, err := start("w1") // fleettest's worker
		require.ErrorIs(t, err, worker.ErrDuplicateID)
		var dup *worker.DuplicateIDError
		require.True(t, errors.As(err, &dup))
		host, _ := os.Hostname()
		require.Equal(t, host, dup.Holder.Host)
		require.Equal(t, os.Getpid(), dup.Holder.PID)
		require.ErrorContains(t, err, `worker id "w1" is in use by the live worker on host `+host+", pid "+strconv.Itoa(os.Getpid()))
		require.ErrorContains(t, err, "--id")
	})

	t.Run("of workers racing to start with one id, one starts", func(t *testing.T) {
		for round := range 3 {
			id := fmt.Sprintf("racer-%d", round)
			var wg sync.WaitGroup
			errs := make([]error, 3)
			for i := range errs {
				wg.Go(func() { _, errs[i] = start(id) })
			}
			wg.Wait()
			started := 0
			for _, err := range errs {
				if err == nil {
					started++
				} else {
					require.ErrorIs(t, err, worker.ErrDuplicateID, "round %d", round)
				}
			}
			require.Equal(t, 1, started, "round %d: %v", round, errs)
		}
	})

	t.Run("restarted after a kill -9 or a stop", func(t *testing.T) {
		cfg := workerConfig(t, f, "phoenix")
		w, err := worker.New(cfg)
		require.NoError(t, err)
		require.NoError(t, w.Start(ctx))
		cfg.Conn.Close() // killed: no goodbye, its lease stays
		t.Cleanup(func() { _ = w.Stop(ctx) })
		began := time.Now()
		again, err := start("phoenix")
		require.NoError(t, err, "restarted with its own id after its process died")
		// Far sooner than the ack wait (30s) that a duplicate id costs.
		require.Less(t, time.Since(began), 15*time.Second)
		require.NoError(t, again.Stop(ctx))
		_, err = start("phoenix")
		require.NoError(t, err, "restarted with its own id after a stop")
	})
}
