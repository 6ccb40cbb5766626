package worker_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/internal/fleettest"
	"github.com/lovia-fleet/lovia/pkg/worker"
)

// liveAgents: a run whose only tool blocks for ten minutes, so every run
// stays live through the measurement.
const liveAgents = `
agents:
  - name: blocker
    model: scripted
    tools: [sleep]
    script:
      - call: {name: sleep, args: {ms: 600000}, id: s1}
      - text: woke up
`

// BenchmarkLiveRuns holds n live runs on one worker (each blocked in its
// tool) and reports how long after their raw publish all were claimed
// (s-to-claimed), the process's RSS and Go heap (worker and embedded
// server together: one process), and the idle cost of a live run: the
// messages and bytes the server received and sent per run per minute
// while nothing but heartbeats and holdings upkeep happened (varz
// deltas over LOVIA_BENCH_IDLE, default 30s). n: LOVIA_BENCH_LIVE_RUNS
// (comma-separated, default 1000,10000).
func BenchmarkLiveRuns(b *testing.B) {
	sizes := []int{1000, 10000}
	if v := os.Getenv("LOVIA_BENCH_LIVE_RUNS"); v != "" {
		sizes = nil
		for _, s := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(s))
			require.NoError(b, err, "LOVIA_BENCH_LIVE_RUNS")
			sizes = append(sizes, n)
		}
	}
	idle := 30 * time.Second
	if v := os.Getenv("LOVIA_BENCH_IDLE"); v != "" {
		d, err := time.ParseDuration(v)
		require.NoError(b, err, "LOVIA_BENCH_IDLE")
		idle = d
	}
	for _, n := range sizes {
		b.Run(fmt.Sprintf("runs=%d", n), func(b *testing.B) {
			for range b.N {
				liveRuns(b, n, idle)
			}
		})
	}
}

func liveRuns(b *testing.B, n int, idle time.Duration) {
	f := fleettest.Start(b, fleettest.Options{AgentsYAML: liveAgents, Worker: func(c *worker.Config) {
		c.Concurrency = n + 16
		c.SkipProvision = false
		c.Provision.Workers.MaxAckPending = n + 16
	}})
	ctx := context.Background()
	t0 := time.Now()
	for i := range n {
		msg := &nats.Msg{Subject: "lovia.submit.blocker", Data: []byte(`{"input":"block"}`)}
		if _, err := f.JS.PublishMsgAsync(msg); err != nil {
			b.Fatalf("publish %d: %v", i, err)
		}
	}
	select {
	case <-f.JS.PublishAsyncComplete():
	case <-time.After(5 * time.Minute):
		b.Fatal("waited 5m for the publishes' acks")
	}
	published := time.Since(t0)
	var last string
	ok := waitFor(10*time.Minute, func() bool {
		info, err := agentConsumerInfo(ctx, f, "blocker")
		if err != nil {
			last = err.Error()
			return false
		}
		last = fmt.Sprintf("ack pending %d, pending %d", info.NumAckPending, info.NumPending)
		return info.NumAckPending == n && info.NumPending == 0
	})
	require.True(b, ok, "waiting for %d runs to be claimed: %s", n, last)
	claimed := time.Since(t0)
	// The claims' writes (events, checkpoints, holdings) settle.
	time.Sleep(5 * time.Second)

	before := varz(b, f)
	time.Sleep(idle)
	after := varz(b, f)
	perRunMin := func(d int64) float64 { return float64(d) / float64(n) / idle.Minutes() }
	b.ReportMetric(published.Seconds(), "s-published")
	b.ReportMetric(claimed.Seconds(), "s-to-claimed")
	b.ReportMetric(float64(rssKiB())/1024, "rss-MiB")
	b.ReportMetric(perRunMin(after.InMsgs-before.InMsgs), "in-msgs/run/min")
	b.ReportMetric(perRunMin(after.InBytes-before.InBytes), "in-B/run/min")
	b.ReportMetric(perRunMin(after.OutMsgs-before.OutMsgs), "out-msgs/run/min")
	b.ReportMetric(perRunMin(after.OutBytes-before.OutBytes), "out-B/run/min")
}

func varz(b *testing.B, f *fleettest.Fleet) *server.Varz {
	v, err := f.Server.Server().Varz(nil)
	require.NoError(b, err)
	return v
}

// rssKiB is this process's resident set size (Linux; 0 elsewhere).
func rssKiB() int64 {
	fh, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}
