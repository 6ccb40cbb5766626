package runindex_test

import (
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/lovia-fleet/lovia/pkg/runindex"
	"github.com/lovia-fleet/lovia/pkg/store"
)

// BenchmarkRunsIndexMemory loads 1,000,000 run records (a steady fleet:
// 99% ended, 1% running; 20 agents, 10 workers, a session per 10 runs)
// into an index with the default cap and into one without, and reports
// the heap the index keeps after a GC (MB) and the load time per record.
// RUNINDEX_N changes the count.
func BenchmarkRunsIndexMemory(b *testing.B) {
	n := 1_000_000
	if s := getenv("RUNINDEX_N"); s != "" {
		_, _ = fmt.Sscan(s, &n)
	}
	for _, c := range []struct {
		name string
		max  int
	}{{"bounded", runindex.DefaultMaxRuns}, {"unbounded", 0}} {
		b.Run(fmt.Sprintf("%s/runs=%d", c.name, n), func(b *testing.B) {
			for range b.N {
				runtime.GC()
				var before runtime.MemStats
				runtime.ReadMemStats(&before)
				start := time.Now()
				x := runindex.NewBounded(c.max)
				for i := range n {
					st := store.RunCompleted
					if i%100 == 0 {
						st = store.RunRunning
					} else if i%100 < 8 {
						st = store.RunFailed
					}
					x.Apply(rec(fmt.Sprintf("run-%07d", i), t0.Add(time.Duration(i)*10*time.Millisecond), st, func(r *store.RunRecord) {
						r.Agent = fmt.Sprintf("agent-%02d", i%20)
						r.SessionID = fmt.Sprintf("session-%06d", i/10)
						r.Worker = fmt.Sprintf("worker-%d", i%10)
					}))
				}
				took := time.Since(start)
				runtime.GC()
				var after runtime.MemStats
				runtime.ReadMemStats(&after)
				b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/(1<<20), "heap-MB")
				b.ReportMetric(float64(x.Len()), "runs-held")
				b.ReportMetric(took.Seconds(), "load-s")
				runtime.KeepAlive(x)
			}
		})
	}
}

func getenv(k string) string { return os.Getenv(k) }
