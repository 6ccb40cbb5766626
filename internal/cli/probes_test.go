package cli

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// startJetStream starts a JetStream server on a random port with its store
// in a temporary directory.
func startJetStream(t *testing.T) *server.Server {
	t.Helper()
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, JetStream: true,
		StoreDir: t.TempDir(), NoLog: true, NoSigs: true})
	require.NoError(t, err)
	s.Start()
	require.True(t, s.ReadyForConnections(10*time.Second), "nats-server not ready for connections")
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	return s
}

// probedWorker is a `lovia worker` running in this process.
type probedWorker struct {
	base   string // http://host:port of its --metrics listener
	stderr *syncBuf
	cancel context.CancelFunc
	done   chan struct{} // closed when Main returned
	code   int           // Main's exit status, once done
}

// wait waits for the worker to exit and returns its exit status.
func (w *probedWorker) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-w.done:
		return w.code
	case <-time.After(WorkerStopTimeout + 10*time.Second):
		t.Fatalf("the worker did not stop within %s:\n%s", WorkerStopTimeout, w.stderr.String())
		return -1
	}
}

// startProbedWorker runs `lovia worker --metrics 127.0.0.1:0` against url
// and returns once its metrics listener is up.
func startProbedWorker(t *testing.T, url string, extra ...string) *probedWorker {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := &probedWorker{stderr: &syncBuf{}, cancel: cancel, done: make(chan struct{})}
	args := append([]string{"worker", "--nats", url, "--metrics", "127.0.0.1:0", "--workspace", t.TempDir()}, extra...)
	go func() {
		defer close(w.done)
		w.code = Main(ctx, args, strings.NewReader(""), &syncBuf{}, w.stderr, getenv(nil))
	}()
	t.Cleanup(func() { cancel(); w.wait(t) })
	re := regexp.MustCompile(`msg=metrics addr=(http://\S+)/metrics`)
	require.Eventually(t, func() bool {
		m := re.FindStringSubmatch(w.stderr.String())
		if m != nil {
			w.base = m[1]
		}
		return m != nil
	}, 20*time.Second, 10*time.Millisecond, "the worker never logged its metrics address:\n%s", w.stderr)
	return w
}

// probe GETs path and decodes the JSON status.
func (w *probedWorker) probe(t *testing.T, path string) (int, probeStatus) {
	t.Helper()
	resp, err := http.Get(w.base + path)
	require.NoError(t, err, "GET %s", path)
	defer resp.Body.Close()
	var st probeStatus
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&st), "GET %s: body", path)
	return resp.StatusCode, st
}

// waitProbe waits until path answers code with the given status and an
// error that contains reason.
func (w *probedWorker) waitProbe(t *testing.T, path string, code int, status, reason string) probeStatus {
	t.Helper()
	var last probeStatus
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var got int
		got, last = w.probe(t, path)
		assert.Equal(c, code, got, "GET %s: %+v", path, last)
		assert.Equal(c, status, last.Status, "GET %s: %+v", path, last)
		assert.Contains(c, last.Error, reason, "GET %s", path)
	}, 20*time.Second, 20*time.Millisecond, "waited for %s to answer %d %q (%q); worker stderr:\n%s", path, code, status, reason, w.stderr)
	return last
}

func TestWorkerProbes(t *testing.T) {
	t.Parallel()
	srv := startJetStream(t)
	agents := t.TempDir() + "/agents.yaml"
	require.NoError(t, os.WriteFile(agents, []byte(`
agents:
  - name: slow
    model: scripted
    tools: [sleep]
    script:
      - call: {name: sleep, args: {ms: 600000}, id: c1}
      - text: done
`), 0o644))
	w := startProbedWorker(t, srv.ClientURL(), "--agents", agents)

	t.Run("ready once claiming", func(t *testing.T) {
		st := w.waitProbe(t, "/readyz", http.StatusOK, "ready", "")
		require.Equal(t, "connected", st.NATS)
		code, st := w.probe(t, "/healthz")
		require.Equal(t, http.StatusOK, code)
		require.Equal(t, "ok", st.Status)
	})

	// A run asleep in a tool holds the ordered shutdown for the worker's
	// shutdown grace: readiness fails from its first moment, liveness
	// does not.
	t.Run("not ready while stopping", func(t *testing.T) {
		env := getenv(map[string]string{"NATS_URL": srv.ClientURL()})
		var out, errb syncBuf
		require.Equal(t, ExitOK, Main(context.Background(), []string{"submit", "--agent", "slow", "sleep"}, nil, &out, &errb, env), errb.String())
		runID := strings.TrimSpace(out.String())
		require.Eventually(t, func() bool {
			var out syncBuf
			return Main(context.Background(), []string{"status", "--json", runID}, nil, &out, &errb, env) == ExitOK &&
				strings.Contains(out.String(), `"status": "running"`)
		}, 20*time.Second, 20*time.Millisecond, "waited for run %s to be running on the worker", runID)

		w.cancel()
		w.waitProbe(t, "/readyz", http.StatusServiceUnavailable, "stopping", "shutting down")
		code, _ := w.probe(t, "/healthz")
		require.Equal(t, http.StatusOK, code, "liveness fails during the ordered shutdown")
		require.Equal(t, ExitOK, w.wait(t), w.stderr.String())
	})
}

// Readiness follows the real state: its agent's consumer gone (streams not
// provisioned) or NATS unreachable make the worker unready; liveness stays.
func TestWorkerReadinessFollowsNATS(t *testing.T) {
	t.Parallel()
	srv := startJetStream(t)
	w := startProbedWorker(t, srv.ClientURL())
	w.waitProbe(t, "/readyz", http.StatusOK, "ready", "")

	nc, err := nats.Connect(srv.ClientURL())
	require.NoError(t, err)
	defer nc.Close()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	require.NoError(t, js.DeleteConsumer(t.Context(), "LOVIA_RUNS", "agent-demo"))
	w.waitProbe(t, "/readyz", http.StatusServiceUnavailable, "unavailable", "consumer agent-demo on stream LOVIA_RUNS")

	srv.Shutdown()
	srv.WaitForShutdown()
	st := w.waitProbe(t, "/readyz", http.StatusServiceUnavailable, "unavailable", "not connected to NATS")
	require.NotEqual(t, "connected", st.NATS)
	code, _ := w.probe(t, "/healthz")
	require.Equal(t, http.StatusOK, code, "liveness fails while NATS is away")
}

// Before Start returns, the worker is starting, not ready.
func TestWorkerProbesStarting(t *testing.T) {
	t.Parallel()
	srv := startJetStream(t)
	nc, err := nats.Connect(srv.ClientURL())
	require.NoError(t, err)
	defer nc.Close()
	p, err := newWorkerProbes(nc, "lovia", []string{"demo"})
	require.NoError(t, err)

	rec := httptest.NewRecorder()
	p.readyz(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	require.Equal(t, http.StatusServiceUnavailable, rec.Code)
	var st probeStatus
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &st))
	require.Equal(t, "starting", st.Status)

	rec = httptest.NewRecorder()
	p.healthz(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	require.Equal(t, http.StatusOK, rec.Code)
}

// A worker whose NATS connection is closed for good (it never reconnects)
// is not live: liveness fails so the process is restarted, and readiness
// does not pretend the connection keeps retrying.
func TestWorkerProbesClosedConnection(t *testing.T) {
	t.Parallel()
	srv := startJetStream(t)
	nc, err := nats.Connect(srv.ClientURL())
	require.NoError(t, err)
	p, err := newWorkerProbes(nc, "lovia", []string{"demo"})
	require.NoError(t, err)
	p.started()
	nc.Close()

	for path, h := range map[string]http.HandlerFunc{"/healthz": p.healthz, "/readyz": p.readyz} {
		rec := httptest.NewRecorder()
		h(rec, httptest.NewRequest(http.MethodGet, path, nil))
		require.Equal(t, http.StatusServiceUnavailable, rec.Code, path)
		var st probeStatus
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &st))
		require.Equal(t, probeStatus{Status: "unavailable", NATS: "closed", Error: errClosed.Error()}, st, path)
	}
}
