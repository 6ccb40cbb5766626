package cli

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// --max-ack-pending applies to the agent consumers a worker creates on a
// fresh fleet (its agents file's at start, a registry agent applied later),
// not only to the ones it finds.
func TestWorkerClaimLimitOnAFreshFleet(t *testing.T) {
	t.Parallel()
	srv := startJetStream(t)
	url := srv.ClientURL()
	w := startProbedWorker(t, url, "--registry", "--agents", writeFile(t, greeter("hi")),
		"--concurrency", "20000", "--max-ack-pending", "40000")
	w.waitProbe(t, "/readyz", 200, "ready", "")

	nc, err := nats.Connect(url)
	require.NoError(t, err)
	defer nc.Close()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	limit := func(consumer string) int {
		c, err := js.Consumer(t.Context(), "LOVIA_RUNS", consumer)
		require.NoError(t, err, "consumer %s; worker stderr:\n%s", consumer, w.stderr)
		return c.CachedInfo().Config.MaxAckPending
	}
	require.Equal(t, 40000, limit("agent-greeter"), "the consumer created at start")
	require.NotContains(t, w.stderr.String(), "may claim fewer runs")

	code, out, errs := runCLI(t, getenv(map[string]string{"NATS_URL": url}), "agents", "apply",
		writeFile(t, "agents:\n  - name: waiter\n    model: scripted\n    script:\n      - text: ok\n"))
	require.Equal(t, ExitOK, code, out+errs)
	require.Eventually(t, func() bool {
		_, err := js.Consumer(t.Context(), "LOVIA_RUNS", "agent-waiter")
		return err == nil
	}, 20*time.Second, 20*time.Millisecond, "waited for the worker to create agent-waiter's consumer; stderr:\n%s", w.stderr)
	require.Equal(t, 40000, limit("agent-waiter"), "the consumer of an agent applied later")
}

// A --serve glob that does not parse is refused at start-up, naming it
// (it matched no agent, silently: the worker served nothing).
func TestWorkerRefusesABadServeGlob(t *testing.T) {
	t.Parallel()
	srv := startJetStream(t)
	code, out, errs := runCLI(t, getenv(map[string]string{"NATS_URL": srv.ClientURL()}), "worker", "--registry",
		"--serve", "support,billing-[", "--workspace", t.TempDir(), "--log-level", "warn")
	require.Equal(t, ExitFailure, code, out+errs)
	require.Contains(t, errs, `--serve "billing-[": syntax error in pattern`)
	require.Contains(t, errs, "e.g. 'support,billing-*'")
}
