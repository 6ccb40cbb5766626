package worker_test

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/lovia-fleet/lovia/internal/fleettest"
	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/worker"
)

// BenchmarkFleetRuns is the fleet's throughput: b.N scripted runs (two
// model turns and an echo tool call each: 14 events, three checkpoints, a
// session-less run index record) submitted through the NATS API by 16
// concurrent clients to two workers in one process on an embedded server,
// timed until the runs stream is drained and no delivery is pending.
func BenchmarkFleetRuns(b *testing.B) {
	benchFleet(b, nil, func(ctx context.Context, f *fleettest.Fleet, _ int64) (string, error) {
		rep, err := f.Client.Submit(ctx, &bus.RunRequest{Agent: "calc", Input: bus.TextInput("What is 12*7?")})
		if err != nil {
			return "", err
		}
		return rep.RunID, nil
	})
}

// BenchmarkFleetRawSubmit is BenchmarkFleetRuns with the runs submitted
// as BenchmarkRawMix submits its requests: a JetStream publish straight
// into the runs stream (docs/protocol.md, "Submitting by raw publish"),
// without the API's hop and its record create — the claim indexes the
// run.
func BenchmarkFleetRawSubmit(b *testing.B) {
	benchFleet(b, nil, submitRaw)
}

// BenchmarkFleetSlots is BenchmarkFleetRawSubmit with fewer slots per
// worker than the default 1024 (the fleet's nine agents share them): how
// close a worker with a few slots comes to one with many.
func BenchmarkFleetSlots(b *testing.B) {
	for _, n := range []int{1, 8, 32} {
		b.Run("concurrency="+strconv.Itoa(n), func(b *testing.B) {
			benchFleet(b, func(c *worker.Config) { c.Concurrency = n }, submitRaw)
		})
	}
}

// submitRaw submits run n by a JetStream publish into the runs stream.
func submitRaw(ctx context.Context, f *fleettest.Fleet, n int64) (string, error) {
	id := "raw-" + strconv.FormatInt(n, 10)
	_, err := f.JS.Publish(ctx, "lovia.submit.calc", []byte(`{"input":"What is 12*7?"}`), jetstream.WithMsgID(id))
	return id, err
}

// benchFleet runs b.N runs, each submitted by submit (n: the run's number,
// from 1) from one of 16 concurrent clients, to two workers configured by
// set (if not nil), and reports runs/s.
func benchFleet(b *testing.B, set func(*worker.Config), submit func(ctx context.Context, f *fleettest.Fleet, n int64) (string, error)) {
	f := fleettest.Start(b, fleettest.Options{AgentsYAML: fleetAgents, Workers: 2, Worker: set})
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	sys := reportSyscalls(b)
	var next atomic.Int64
	var wg sync.WaitGroup
	var last atomic.Value
	for range 16 {
		wg.Go(func() {
			for {
				n := next.Add(1)
				if n > int64(b.N) {
					return
				}
				id, err := submit(ctx, f, n)
				if err != nil {
					b.Error(err)
					return
				}
				last.Store(id)
			}
		})
	}
	wg.Wait()
	waitIdle(b, f, 10*time.Minute)
	b.StopTimer()
	sys()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "runs/s")
	id, _ := last.Load().(string)
	st, err := f.Client.Status(ctx, id)
	if err != nil || st.Status != bus.StateCompleted {
		b.Fatalf("last run %s: %+v, %v", id, st, err)
	}
}
