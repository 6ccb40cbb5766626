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

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/internal/fleettest"
	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/loop"
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
			errs, ws := make([]error, 3), make([]*worker.Worker, 3)
			for i := range errs {
				wg.Go(func() { ws[i], errs[i] = start(id) })
			}
			wg.Wait()
			started := 0
			for i, err := range errs {
				if err == nil {
					started++
					require.NoError(t, ws[i].Stop(ctx))
				} else {
					require.ErrorIs(t, err, worker.ErrDuplicateID, "round %d", round)
				}
			}
			require.Equal(t, 1, started, "round %d: %v", round, errs)
		}
	})

	// Restarted with its id, it takes over its dead predecessor's runs at
	// once: no other worker's reaper releases them while the id answers.
	t.Run("restarted after a kill -9 or a stop", func(t *testing.T) {
		require.NoError(t, f.Workers[0].Stop(ctx)) // the run goes to phoenix
		cfg := workerConfig(t, f, "phoenix")
		w, err := worker.New(cfg)
		require.NoError(t, err)
		require.NoError(t, w.Start(ctx))
		rep, err := f.Client.Submit(ctx, &bus.RunRequest{Agent: "napper", Input: bus.TextInput("nap")})
		require.NoError(t, err)
		waitEvent(t, f, rep.RunID, loop.EventToolCallStarted, 20*time.Second)
		cfg.Conn.Close() // killed: no goodbye, its lease and holdings stay
		t.Cleanup(func() { _ = w.Stop(ctx) })
		// A subscriber that never answers (nats sub '>') does not pass for
		// the dead holder.
		spy := f.Connect()
		_, err = spy.Subscribe("lovia.worker.>", func(*nats.Msg) {})
		require.NoError(t, err)
		require.NoError(t, spy.Flush())
		again, err := start("phoenix")
		require.NoError(t, err, "restarted with its own id after its process died")
		// Well before the ack wait (30s), which redelivers it otherwise.
		envs := f.Events(rep.RunID, 20*time.Second)
		checkOneSubmission(t, rep.RunID, envs)
		require.Len(t, fleettest.OfType(envs, bus.EventRunResumed), 1, "%v", fleettest.Types(envs))
		require.Equal(t, loop.EventRunCompleted, envs[len(envs)-1].Type)
		require.NoError(t, again.Stop(ctx))
		_, err = start("phoenix")
		require.NoError(t, err, "restarted with its own id after a stop")
	})
}
