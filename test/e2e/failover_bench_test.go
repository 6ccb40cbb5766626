package e2e

import (
	"context"
	"fmt"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/client"
	"github.com/lovia-fleet/lovia/pkg/fleet"
	"github.com/lovia-fleet/lovia/pkg/loop"
)

const holdAgents = `
agents:
  - name: hold
    model: scripted
    tools: [sleep]
    script:
      - call: {name: sleep, args: {ms: 600000}, id: s1}
      - text: never
`

// BenchmarkFailover measures kill -9 → run_resumed: the worker holding a
// run (mid-tool) is killed with SIGKILL while another `lovia worker`
// process is up; the time until the survivor publishes run_resumed is one
// sample. Each iteration starts the next survivor first, then kills the
// current holder, so every sample is a takeover between two live
// processes. Reports p50, p90 and max in seconds.
//
//	go test -run '^$' -bench Failover -benchtime 10x ./test/e2e/
func BenchmarkFailover(b *testing.B) {
	srv, nc, js := startNATS(b)
	ctx := context.Background()
	agents := writeAgents(b, holdAgents)
	workspace := b.TempDir()
	c, err := client.New(nc, client.Options{})
	require.NoError(b, err)
	reg, err := fleet.Ensure(ctx, js, bus.Names{}, 1)
	require.NoError(b, err)

	holder := startWorker(b, srv.ClientURL(), agents, workspace, "holder-0")
	waitMember(b, reg, "holder-0")

	var samples []float64
	b.ResetTimer()
	for i := 1; i <= b.N; i++ {
		b.StopTimer()
		// A run held by the current holder (the only worker up), mid-tool.
		rep, err := c.Submit(ctx, &bus.RunRequest{Agent: "hold", Input: bus.TextInput("hold")})
		require.NoError(b, err)
		tail, err := c.Tail(ctx, rep.RunID, bus.FromStart())
		require.NoError(b, err)
		next := func(want string) *bus.Envelope {
			b.Helper()
			tctx, cancel := context.WithTimeout(ctx, 60*time.Second)
			defer cancel()
			for env, err := range tail.All(tctx) {
				require.NoError(b, err, "waiting for %s", want)
				if string(env.Type) == want {
					return env
				}
			}
			b.Fatalf("the run ended before %s", want)
			return nil
		}
		next("tool_call_started")
		id := fmt.Sprintf("holder-%d", i)
		survivor := startWorker(b, srv.ClientURL(), agents, workspace, id)
		waitMember(b, reg, id)
		b.StartTimer()
		killed := time.Now()
		require.NoError(b, holder.cmd.Process.Signal(syscall.SIGKILL))
		_, _ = holder.cmd.Process.Wait()
		resumed := next(string(bus.EventRunResumed))
		samples = append(samples, resumed.Time.Sub(killed).Seconds())
		b.StopTimer()
		_, err = c.Cancel(ctx, rep.RunID, "measured")
		require.NoError(b, err)
		next(string(loop.EventRunFailed))
		_ = tail.Close(ctx)
		holder = survivor
	}
	slices.Sort(samples)
	q := func(p float64) float64 { return samples[min(len(samples)-1, int(p*float64(len(samples))))] }
	b.ReportMetric(q(0.5), "p50-s")
	b.ReportMetric(q(0.9), "p90-s")
	b.ReportMetric(samples[len(samples)-1], "max-s")
	b.Logf("kill -9 → run_resumed (s), sorted: %.2f", samples)
}

// waitMember waits until worker has announced itself to the fleet.
func waitMember(b testing.TB, reg *fleet.Registry, worker string) {
	b.Helper()
	ok := waitUntil(30*time.Second, func() bool {
		ms, err := reg.Members(context.Background())
		return err == nil && slices.ContainsFunc(ms, func(m fleet.Member) bool { return m.Worker == worker })
	})
	require.True(b, ok, "worker %s never joined the fleet", worker)
}
