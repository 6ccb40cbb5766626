package worker_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lovia-fleet/lovia/internal/fleettest"
	"github.com/lovia-fleet/lovia/pkg/bus"
)

// BenchmarkFleetRuns is the fleet's throughput: b.N scripted runs (two
// model turns and an echo tool call each: 14 events, two checkpoints, a
// session-less run index record) submitted through the NATS API by 16
// concurrent clients to two workers in one process on an embedded server,
// timed until the runs stream is drained and no delivery is pending.
func BenchmarkFleetRuns(b *testing.B) {
	f := fleettest.Start(b, fleettest.Options{AgentsYAML: fleetAgents, Workers: 2})
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	sys := reportSyscalls(b)
	var next atomic.Int64
	var wg sync.WaitGroup
	var last atomic.Value
	for range 16 {
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) {
				rep, err := f.Client.Submit(ctx, &bus.RunRequest{Agent: "calc", Input: bus.TextInput("What is 12*7?")})
				if err != nil {
					b.Error(err)
					return
				}
				last.Store(rep.RunID)
			}
		})
	}
	wg.Wait()
	waitIdle(b, f, 10*time.Minute)
	b.StopTimer()
	sys()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "runs/s")
	st, err := f.Client.Status(ctx, last.Load().(string))
	if err != nil || st.Status != bus.StateCompleted {
		b.Fatalf("last run: %+v, %v", st, err)
	}
}
