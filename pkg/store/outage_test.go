package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/broker"
	"github.com/lovia-fleet/lovia/pkg/loop"
)

// signalHandler is a slog handler that records messages and signals each
// one whose text contains want.
type signalHandler struct {
	want string
	hit  chan string
	mu   sync.Mutex
	msgs []string
}

func newSignalHandler(want string) *signalHandler {
	return &signalHandler{want: want, hit: make(chan string, 1024)}
}

func (h *signalHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *signalHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *signalHandler) WithGroup(string) slog.Handler            { return h }
func (h *signalHandler) Handle(_ context.Context, r slog.Record) error {
	line := r.Message
	r.Attrs(func(a slog.Attr) bool { line += " " + a.String(); return true })
	h.mu.Lock()
	h.msgs = append(h.msgs, line)
	h.mu.Unlock()
	if strings.Contains(r.Message, h.want) {
		select {
		case h.hit <- line:
		default:
		}
	}
	return nil
}

// awaitLog waits for a record containing the handler's text.
func (h *signalHandler) awaitLog(t *testing.T, what string) string {
	t.Helper()
	select {
	case line := <-h.hit:
		return line
	case <-time.After(30 * time.Second):
		t.Fatalf("no log %q within 30s (waited for %s)", h.want, what)
		return ""
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// restartable is one embedded server on a fixed port and store directory,
// so that it can be stopped and started again as a restarted broker.
type restartable struct {
	t   *testing.T
	cfg broker.EmbeddedConfig
	emb *broker.Embedded
}

func startRestartable(t *testing.T) *restartable {
	t.Helper()
	r := &restartable{t: t, cfg: broker.EmbeddedConfig{StoreDir: t.TempDir(), Port: freePort(t)}}
	r.start()
	t.Cleanup(r.stop)
	return r
}

func (r *restartable) start() {
	emb, err := broker.StartEmbedded(r.cfg)
	require.NoError(r.t, err)
	r.emb = emb
}

func (r *restartable) stop() {
	if r.emb == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(r.t, r.emb.Shutdown(ctx))
	r.emb = nil
}

func (r *restartable) url() string { return fmt.Sprintf("nats://127.0.0.1:%d", r.cfg.Port) }

// connectRetrying connects with endless reconnects, as a worker does.
func connectRetrying(t *testing.T, url string) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	return js
}

// TestTransientClassification: the errors a real server gives while it
// cannot answer are transient and match loop.ErrUnavailable once the store
// wrapped them (with the NATS error still in the chain); errors about the
// request are not.
func TestTransientClassification(t *testing.T) {
	t.Parallel()
	srv, st := newStore(t, Config{})
	nc, err := srv.emb.Connect()
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	ctx := t.Context()

	// Real errors from a real server.
	nowhere, err := jetstream.NewWithDomain(nc, "nowhere")
	require.NoError(t, err)
	_, noResponders := nowhere.KeyValue(ctx, srv.cfg.WithDefaults().RunBucket)
	require.Error(t, noResponders)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	kv, err := js.KeyValue(ctx, srv.cfg.WithDefaults().RunBucket)
	require.NoError(t, err)
	expired, cancel := context.WithDeadline(ctx, time.Now().Add(-time.Second))
	defer cancel()
	_, timeout := kv.Get(expired, "k")
	require.Error(t, timeout)
	_, notFound := kv.Get(ctx, "missing")
	_, err = kv.Create(ctx, "k", []byte("1"))
	require.NoError(t, err)
	_, exists := kv.Create(ctx, "k", []byte("2"))
	_, noBucket := js.KeyValue(ctx, "no_such_bucket")
	_, tooLarge := st.Checkpointer().Append(ctx, "r1", loop.CheckpointWrite{Entries: []loop.Entry{loop.UserText(strings.Repeat("x", 70<<20))}})

	for _, tc := range []struct {
		name      string
		err       error
		transient bool
	}{
		{"no responders", noResponders, true},
		{"timeout", timeout, true},
		{"no response from stream", jetstream.ErrNoStreamResponse, true},
		{"JetStream system temporarily unavailable", &jetstream.APIError{Code: 503, ErrorCode: 10008, Description: "JetStream system temporarily unavailable"}, true},
		{"cluster can not handle request (leader change)", &jetstream.APIError{Code: 500, ErrorCode: 10009}, true},
		{"a compare-and-set while another is being proposed (10164)", &jetstream.APIError{Code: 400, ErrorCode: 10164, Description: "wrong last sequence"}, true},
		{"key not found", notFound, false},
		{"key exists", exists, false},
		{"bucket not found", noBucket, false},
		{"too large", tooLarge, false},
		{"cancelled", context.Canceled, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Error(t, tc.err)
			require.Equal(t, tc.transient, IsTransient(tc.err), "%v", tc.err)
			wrapped := wrapErr("test op", "id-1", tc.err)
			require.Equal(t, tc.transient, errors.Is(wrapped, loop.ErrUnavailable), "%v", wrapped)
			require.ErrorIs(t, wrapped, tc.err, "the NATS error stays in the chain")
		})
	}
}

// TestStoreRidesThroughARestartWithinTheBudget: calls made while the
// server is down retry with backoff and succeed once it is back (within
// the outage budget), storing each write once; a budget that runs out
// returns an error matching loop.ErrUnavailable; cancelling stops at once.
func TestStoreRidesThroughARestartWithinTheBudget(t *testing.T) {
	t.Parallel()
	srv := startRestartable(t)
	boot := connectRetrying(t, srv.url())
	require.NoError(t, EnsureBuckets(t.Context(), boot, Config{}))
	logs := newSignalHandler("transient failure, retrying")
	st, err := Open(t.Context(), connectRetrying(t, srv.url()), Config{Timeout: 500 * time.Millisecond, Logger: slog.New(logs)})
	require.NoError(t, err)
	short, err := Open(t.Context(), connectRetrying(t, srv.url()), Config{Timeout: 200 * time.Millisecond, OutageBudget: 600 * time.Millisecond})
	require.NoError(t, err)
	ctx := t.Context()
	cp := st.Checkpointer()
	rev, err := cp.Append(ctx, "r1", loop.CheckpointWrite{Entries: turnEntries(1), Head: runHead(1)})
	require.NoError(t, err)

	srv.stop()

	// The budget runs out: an outage, not a failure of the run.
	start := time.Now()
	_, err = short.Checkpointer().Load(ctx, "r1")
	require.ErrorIs(t, err, loop.ErrUnavailable, "past the budget the error is an outage: %v", err)
	require.Less(t, time.Since(start), 10*time.Second, "the budget bounds the retries")

	// Cancellation stops the retries at once.
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := cp.Load(cctx, "r1")
		done <- err
	}()
	logs.awaitLog(t, "the load's first retry")
	cancel()
	select {
	case err := <-done:
		require.ErrorIs(t, err, context.Canceled)
	case <-time.After(5 * time.Second):
		t.Fatal("a cancelled call kept retrying")
	}

	// Within the budget: the append waits for the server and lands once.
	appended := make(chan error, 1)
	var rev2 uint64
	go func() {
		var err error
		rev2, err = cp.Append(ctx, "r1", loop.CheckpointWrite{Base: 3, Entries: turnEntries(2), Head: runHead(2), Revision: rev})
		appended <- err
	}()
	logs.awaitLog(t, "the append's first retry while the server is down")
	srv.start()
	select {
	case err := <-appended:
		require.NoError(t, err, "the append rode through the restart")
	case <-time.After(60 * time.Second):
		t.Fatal("the append did not finish within 60s of the restart")
	}
	got, err := Open(ctx, connectRetrying(t, srv.url()), Config{})
	require.NoError(t, err)
	snap, err := got.Checkpointer().Load(ctx, "r1")
	require.NoError(t, err)
	require.Equal(t, append(turnEntries(1), turnEntries(2)...), snap.Entries, "every entry once")
	require.Equal(t, rev2, snap.Revision)
}

// TestStoreRidesThroughALeaderElection: on a 3-node cluster with R3
// buckets, killing the node that leads the checkpoints bucket's stream in
// the middle of a run's appends (and the mailbox's, in the middle of its
// pushes and peeks) costs no call an error: each one waits out the
// election within the budget.
func TestStoreRidesThroughALeaderElection(t *testing.T) {
	t.Parallel()
	c, err := broker.StartCluster(broker.ClusterConfig{StoreDir: t.TempDir(), Name: "outage"})
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = c.Shutdown(ctx)
	})
	ctx := t.Context()
	cfg := Config{Replicas: 3}
	boot := connectRetrying(t, c.URL())
	require.NoError(t, EnsureBuckets(ctx, boot, cfg))
	st, err := Open(ctx, connectRetrying(t, c.URL()), cfg)
	require.NoError(t, err)
	d := cfg.WithDefaults()

	for _, bucketName := range []string{d.CheckpointBucket, d.MailboxBucket} {
		stream := "KV_" + bucketName
		var leader int
		require.Eventually(t, func() bool { leader = c.StreamLeader(stream); return leader >= 0 }, 20*time.Second, 20*time.Millisecond,
			"waited for %s to have a leader", stream)
		run := "run-" + strings.ReplaceAll(bucketName, "_", "-")
		mb, err := st.Mailbox(run)
		require.NoError(t, err)
		var rev uint64
		stored := 0
		killed := false
		for i := 1; i <= 12; i++ {
			if i == 4 {
				kctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				require.NoError(t, c.Kill(kctx, leader))
				cancel()
				killed = true
			}
			rev, err = st.Checkpointer().Append(ctx, run, loop.CheckpointWrite{Base: stored, Entries: turnEntries(i), Head: runHead(i), Revision: rev})
			require.NoError(t, err, "append %d (leader killed: %v)", i, killed)
			stored += len(turnEntries(i))
			_, err = mb.Push(ctx, loop.MailMessage{Content: fmt.Sprint("m", i)})
			require.NoError(t, err, "push %d (leader killed: %v)", i, killed)
			// Right after an election a peek may not show the newest push
			// yet (it comes at the next turn's drain); it must not fail,
			// and every push shows up, once.
			var msgs []loop.MailMessage
			require.Eventually(t, func() bool {
				msgs, err = mb.Peek(ctx)
				require.NoError(t, err, "peek %d (leader killed: %v)", i, killed)
				return len(msgs) >= i
			}, 20*time.Second, 20*time.Millisecond, "waited for peek %d to show every push", i)
			require.Len(t, msgs, i, "every push once")
		}
		snap, err := st.Checkpointer().Load(ctx, run)
		require.NoError(t, err)
		require.Len(t, snap.Entries, stored, "every entry once")
		require.NoError(t, c.Restart(leader))
		wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		require.NoError(t, c.WaitReady(wctx), "waited for the restarted node to catch up")
		cancel()
	}
}

// TestOpenWaitsForTheCluster: Open on a cluster that has no quorum yet
// (one node of three back after a full stop: no meta leader, no stream
// leaders) waits, logging each attempt, and binds once the cluster
// answers, instead of failing on the first timeout.
func TestOpenWaitsForTheCluster(t *testing.T) {
	t.Parallel()
	c, err := broker.StartCluster(broker.ClusterConfig{StoreDir: t.TempDir(), Name: "forming"})
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = c.Shutdown(ctx)
	})
	ctx := t.Context()
	cfg := Config{Replicas: 3, Timeout: 500 * time.Millisecond}
	require.NoError(t, EnsureBuckets(ctx, connectRetrying(t, c.URL()), cfg))
	for _, i := range []int{0, 1, 2} {
		kctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		require.NoError(t, c.Kill(kctx, i))
		cancel()
	}
	require.NoError(t, c.Restart(0))
	logs := newSignalHandler("waiting for the cluster")
	cfg.Logger = slog.New(logs)
	js := connectRetrying(t, c.URLs()[0])
	opened := make(chan error, 1)
	go func() {
		_, err := Open(ctx, js, cfg)
		opened <- err
	}()
	var line string
	select {
	case line = <-logs.hit:
	case err := <-opened:
		t.Fatalf("Open returned before the cluster answered again: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("Open did not report that it waits within 30s")
	}
	require.Contains(t, line, "attempt=1")
	require.Contains(t, line, "next_wait=")
	for _, i := range []int{1, 2} {
		require.NoError(t, c.Restart(i))
	}
	select {
	case err := <-opened:
		require.NoError(t, err, "Open bound the buckets once the cluster answered")
	case <-time.After(90 * time.Second):
		t.Fatal("Open did not return within 90s of the cluster's return")
	}
}

// TestOpenWithoutJetStreamFailsAtOnce: Open and EnsureBuckets on a server
// that has JetStream off fail at once with ErrJetStreamDisabled instead of
// waiting for a cluster that will never answer.
func TestOpenWithoutJetStreamFailsAtOnce(t *testing.T) {
	t.Parallel()
	s, err := natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
	require.NoError(t, err)
	go s.Start()
	require.True(t, s.ReadyForConnections(10*time.Second))
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	js := connectRetrying(t, s.ClientURL())
	start := time.Now()
	require.ErrorIs(t, EnsureBuckets(t.Context(), js, Config{}), ErrJetStreamDisabled)
	_, err = Open(t.Context(), js, Config{})
	require.ErrorIs(t, err, ErrJetStreamDisabled)
	require.Less(t, time.Since(start), 5*time.Second)
}
