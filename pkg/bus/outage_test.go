package bus_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/broker"
	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/loop"
)

// logSignal is a slog handler that signals each record whose message
// contains want, with its attributes rendered.
type logSignal struct {
	want string
	hit  chan string
}

func newLogSignal(want string) *logSignal {
	return &logSignal{want: want, hit: make(chan string, 1024)}
}

func (h *logSignal) Enabled(context.Context, slog.Level) bool { return true }
func (h *logSignal) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *logSignal) WithGroup(string) slog.Handler            { return h }
func (h *logSignal) Handle(_ context.Context, r slog.Record) error {
	if !strings.Contains(r.Message, h.want) {
		return nil
	}
	line := r.Message
	r.Attrs(func(a slog.Attr) bool { line += " " + a.String(); return true })
	select {
	case h.hit <- line:
	default:
	}
	return nil
}

// startCluster starts a 3-node in-process cluster, stopped in t.Cleanup.
func startCluster(t *testing.T, name string) *broker.Cluster {
	t.Helper()
	c, err := broker.StartCluster(broker.ClusterConfig{StoreDir: t.TempDir(), Name: name})
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = c.Shutdown(ctx)
	})
	return c
}

func connectRetrying(t *testing.T, url string) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	return nc, js
}

// TestIsTransient: the errors a real server gives while it cannot answer
// are transient, errors about the request are not.
func TestIsTransient(t *testing.T) {
	t.Parallel()
	b := provisioned(t)
	ctx := ctxT(t)
	nowhere, err := jetstream.NewWithDomain(b.nc, "nowhere")
	require.NoError(t, err)
	_, noResponders := nowhere.Stream(ctx, b.names.RunsStream())
	expired, cancel := context.WithDeadline(ctx, time.Now().Add(-time.Second))
	defer cancel()
	_, timeout := b.js.Stream(expired, "LOVIA_RUNS")
	_, notFound := b.js.Stream(ctx, "NO_SUCH_STREAM")
	closed, err := b.emb.Connect()
	require.NoError(t, err)
	closed.Close()
	cjs, err := jetstream.New(closed)
	require.NoError(t, err)
	_, closedErr := cjs.Stream(ctx, "LOVIA_RUNS")

	for _, tc := range []struct {
		name      string
		err       error
		transient bool
	}{
		{"no responders", noResponders, true},
		{"timeout", timeout, true},
		{"no response from stream", jetstream.ErrNoStreamResponse, true},
		{"JetStream system temporarily unavailable", &jetstream.APIError{Code: 503, ErrorCode: 10008}, true},
		{"cluster can not handle request", &jetstream.APIError{Code: 500, ErrorCode: 10009}, true},
		{"duplicate message id is in process", &jetstream.APIError{Code: 409, ErrorCode: 10158}, true},
		{"marked by the bus", fmt.Errorf("x: %w", bus.ErrUnavailable), true},
		{"stream not found", notFound, false},
		{"closed connection", closedErr, false},
		{"cancelled", context.Canceled, false},
		{"invalid request", bus.ErrInvalidRequest, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Error(t, tc.err)
			require.Equal(t, tc.transient, bus.IsTransient(tc.err), "%v", tc.err)
		})
	}
	pe := &bus.PublishError{RunID: "r1", Seq: 3, Err: timeout}
	require.ErrorIs(t, pe, bus.ErrPublish)
	require.ErrorIs(t, pe, loop.ErrUnavailable, "a publish that failed in an outage is an outage")
	require.NotErrorIs(t, &bus.PublishError{RunID: "r1", Seq: 3, Err: notFound}, loop.ErrUnavailable)
}

// TestProvisionWaitsForTheCluster: Provision on a cluster without a
// quorum (one node of three back after a full stop) waits, logging each
// attempt with its error and next wait, and finishes once the cluster
// answers, instead of failing on the first timeout.
func TestProvisionWaitsForTheCluster(t *testing.T) {
	t.Parallel()
	c := startCluster(t, "provwait")
	for i := range 3 {
		kctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		require.NoError(t, c.Kill(kctx, i))
		cancel()
	}
	require.NoError(t, c.Restart(0))
	_, js := connectRetrying(t, c.URLs()[0])
	logs := newLogSignal("waiting for the cluster")
	done := make(chan error, 1)
	go func() {
		_, err := bus.Provision(t.Context(), js, bus.ProvisionConfig{Replicas: 3, Timeout: 500 * time.Millisecond, Logger: slog.New(logs)})
		done <- err
	}()
	select {
	case line := <-logs.hit:
		require.Contains(t, line, "attempt=1")
		require.Contains(t, line, "next_wait=")
	case err := <-done:
		t.Fatalf("Provision returned before the cluster had a quorum: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("Provision did not report that it waits within 30s")
	}
	require.NoError(t, c.Restart(1))
	require.NoError(t, c.Restart(2))
	select {
	case err := <-done:
		require.NoError(t, err, "Provision finished once the cluster answered")
	case <-time.After(90 * time.Second):
		t.Fatal("Provision did not finish within 90s of the cluster's return")
	}
}

// TestPublisherRidesThroughALeaderElection: when the events stream loses
// its leader and its quorum in the middle of a run's events (two nodes of
// three killed, one of them the leader, and brought back only once the
// publisher has met the outage), the run publisher waits it out within its
// outage budget: no error, every event stored once.
func TestPublisherRidesThroughALeaderElection(t *testing.T) {
	t.Parallel()
	c := startCluster(t, "pubelect")
	ctx := t.Context()
	_, js := connectRetrying(t, c.URL())
	names, err := bus.NewNames(bus.DefaultPrefix)
	require.NoError(t, err)
	_, err = bus.Provision(ctx, js, bus.ProvisionConfig{Replicas: 3})
	require.NoError(t, err)
	logs := newLogSignal("republish failed")
	pub, err := bus.NewPublisher(js, bus.PublisherConfig{AckTimeout: 500 * time.Millisecond, Logger: slog.New(logs)})
	require.NoError(t, err)
	rp, err := pub.Open(ctx, "run-elect", bus.JSON)
	require.NoError(t, err)
	var leader int
	require.Eventually(t, func() bool { leader = c.StreamLeader(names.EventsStream()); return leader >= 0 }, 20*time.Second, 20*time.Millisecond,
		"waited for the events stream to have a leader")
	other := (leader + 1) % 3
	const events = 60
	for i := 1; i <= events; i++ {
		if i == 20 {
			for _, n := range []int{leader, other} {
				kctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				require.NoError(t, c.Kill(kctx, n))
				cancel()
			}
			go func() {
				select {
				case <-logs.hit: // the publisher met the outage
				case <-time.After(30 * time.Second):
				}
				_ = c.Restart(other)
			}()
		}
		_, err := rp.Publish(ctx, delta(fmt.Sprint("d", i)))
		require.NoError(t, err, "publish %d", i)
		if i%10 == 0 {
			require.NoError(t, rp.Flush(ctx), "flush after %d", i)
		}
	}
	require.NoError(t, rp.Close(ctx))
	last, err := pub.LastSeq(ctx, "run-elect")
	require.NoError(t, err)
	require.Equal(t, uint64(events), last)
	s, err := js.Stream(ctx, names.EventsStream())
	require.NoError(t, err)
	info, err := s.Info(ctx)
	require.NoError(t, err)
	require.Equal(t, uint64(events), info.State.Msgs, "every event stored once")
}

// TestPublisherOutageBudget: with the server gone for longer than the
// budget, the run publisher gives up with an error that is an outage
// (ErrPublish and loop.ErrUnavailable), not sooner than the budget.
func TestPublisherOutageBudget(t *testing.T) {
	t.Parallel()
	b := provisioned(t)
	nc, err := nats.Connect(b.emb.ClientURL(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	const budget = 1500 * time.Millisecond
	pub, err := bus.NewPublisher(js, bus.PublisherConfig{AckTimeout: 200 * time.Millisecond, OutageBudget: budget})
	require.NoError(t, err)
	rp, err := pub.Open(ctxT(t), "run-out", bus.JSON)
	require.NoError(t, err)
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, b.emb.Shutdown(sctx))

	_, err = rp.Publish(ctxT(t), delta("x"))
	require.NoError(t, err)
	start := time.Now()
	err = rp.Flush(ctxT(t))
	require.ErrorIs(t, err, bus.ErrPublish)
	require.True(t, errors.Is(err, loop.ErrUnavailable), "an outage, not a failure of the run: %v", err)
	require.GreaterOrEqual(t, time.Since(start), budget-300*time.Millisecond, "it retried for the budget")
}

// startPlainNATS starts an in-process NATS server without JetStream.
func startPlainNATS(t *testing.T) *nats.Conn {
	t.Helper()
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
	require.NoError(t, err)
	go s.Start()
	require.True(t, s.ReadyForConnections(10*time.Second))
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	nc, err := nats.Connect(s.ClientURL())
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	return nc
}

// TestProvisionWithoutJetStreamFailsAtOnce: a server that has JetStream
// off is a configuration to fix, not a cluster forming: Provision says so
// at once (with what to do) instead of waiting.
func TestProvisionWithoutJetStreamFailsAtOnce(t *testing.T) {
	t.Parallel()
	js, err := jetstream.New(startPlainNATS(t))
	require.NoError(t, err)
	start := time.Now()
	_, err = bus.Provision(t.Context(), js, bus.ProvisionConfig{})
	require.ErrorIs(t, err, bus.ErrJetStreamDisabled)
	require.Contains(t, err.Error(), "hint: start nats-server with -js")
	require.Less(t, time.Since(start), 5*time.Second, "no wait for a server that will never have JetStream")
}
