package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// authLog is a nats-server logger that counts the logins it refused.
type authLog struct{ refused atomic.Int64 }

func (l *authLog) count(format string, v ...any) {
	if strings.Contains(fmt.Sprintf(format, v...), "authentication error") {
		l.refused.Add(1)
	}
}
func (l *authLog) Noticef(string, ...any)    {}
func (l *authLog) Warnf(f string, v ...any)  { l.count(f, v...) }
func (l *authLog) Fatalf(string, ...any)     {}
func (l *authLog) Errorf(f string, v ...any) { l.count(f, v...) }
func (l *authLog) Debugf(string, ...any)     {}
func (l *authLog) Tracef(string, ...any)     {}

// passwordServer is a JetStream server whose one user, fleet, has a
// password that setPassword changes as a config reload does.
type passwordServer struct {
	mu   sync.Mutex
	srv  *server.Server
	opts *server.Options
	log  *authLog
}

func startPasswordServer(t *testing.T, password string) *passwordServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	require.NoError(t, ln.Close())
	opts := &server.Options{Host: "127.0.0.1", Port: port, JetStream: true, StoreDir: t.TempDir(), NoSigs: true,
		Users: []*server.User{{Username: "fleet", Password: password}}}
	s, err := server.NewServer(opts)
	require.NoError(t, err)
	ps := &passwordServer{srv: s, opts: opts, log: &authLog{}}
	s.SetLogger(ps.log, false, false)
	s.Start()
	require.True(t, s.ReadyForConnections(10*time.Second), "nats-server not ready for connections")
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	return ps
}

// url is the server's URL with the fleet user's password in it.
func (p *passwordServer) url(password string) string {
	return (&url.URL{Scheme: "nats", User: url.UserPassword("fleet", password), Host: p.srv.Addr().String()}).String()
}

// setPassword changes the fleet user's password and reloads the server's
// configuration (as editing its file and sending SIGHUP does): connections
// that logged in with the old one are closed and cannot log in again.
func (p *passwordServer) setPassword(t *testing.T, password string) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	next := p.opts.Clone()
	next.Users = []*server.User{{Username: "fleet", Password: password}}
	require.NoError(t, p.srv.ReloadOptions(next))
	p.opts = next
}

// runningGateway is a `lovia gateway` running in this process.
type runningGateway struct {
	base   string
	stderr *syncBuf
}

func startGatewayCommand(t *testing.T, args ...string) *runningGateway {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	g := &runningGateway{stderr: &syncBuf{}}
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, append([]string{"gateway", "--http", "127.0.0.1:0"}, args...), strings.NewReader(""), io.Discard, g.stderr, getenv(nil))
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Errorf("the gateway did not stop within 30s:\n%s", g.stderr)
		}
	})
	re := regexp.MustCompile(`lovia gateway on (http://\S+)`)
	require.Eventually(t, func() bool {
		m := re.FindStringSubmatch(g.stderr.String())
		if m != nil {
			g.base = m[1]
		}
		return m != nil
	}, 30*time.Second, 10*time.Millisecond, "the gateway never said where it listens:\n%s", g.stderr)
	return g
}

// do sends a request to the gateway and returns the status and the body
// decoded as a JSON object.
func (g *runningGateway) do(t *testing.T, method, path, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, g.base+path, strings.NewReader(body))
	require.NoError(t, err)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err, "%s %s", method, path)
	defer resp.Body.Close()
	var v map[string]any
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	_ = json.Unmarshal(data, &v)
	return resp.StatusCode, v
}

// A credential rotation needs no restart: the server refuses the
// processes' logins for a while (more than the two in a row after which
// the NATS library gives up by default), and once the password is back
// both reconnect by themselves. Meanwhile their health tells the truth:
// live and not ready, and the gateway answers 503, not "unknown agent".
func TestCredentialRotationNeedsNoRestart(t *testing.T) {
	t.Parallel()
	srv := startPasswordServer(t, "p1")
	w := startProbedWorker(t, srv.url("p1"))
	w.waitProbe(t, "/readyz", http.StatusOK, "ready", "")
	gw := startGatewayCommand(t, "--nats", srv.url("p1"))

	srv.log.refused.Store(0)
	srv.setPassword(t, "p2")
	// Wait for the logins the server refused: three for each of the two
	// processes (the library alone gives up after two in a row), while
	// neither connection closes.
	deadline := time.Now().Add(60 * time.Second)
	for srv.log.refused.Load() < 6 {
		_, st := w.probe(t, "/healthz")
		require.NotEqual(t, "closed", st.NATS, "the worker's connection closed on refused logins:\n%s", w.stderr)
		code, v := gw.do(t, http.MethodGet, "/healthz", "")
		require.Equal(t, http.StatusOK, code, "the gateway is not live while its logins are refused: %v\n%s", v, gw.stderr)
		require.True(t, time.Now().Before(deadline), "waited 60s for the server to refuse 6 logins: it refused %d", srv.log.refused.Load())
		time.Sleep(50 * time.Millisecond)
	}

	st := w.waitProbe(t, "/readyz", http.StatusServiceUnavailable, "unavailable", "keeps retrying")
	require.Equal(t, "reconnecting", st.NATS)
	code, st := w.probe(t, "/healthz")
	require.Equal(t, http.StatusOK, code, "a reconnecting worker is live: %+v", st)
	code, v := gw.do(t, http.MethodGet, "/readyz", "")
	require.Equal(t, http.StatusServiceUnavailable, code, "a reconnecting gateway is not ready: %v", v)
	code, v = gw.do(t, http.MethodPost, "/v1/runs", `{"agent": "demo", "input": "hi"}`)
	require.Equal(t, http.StatusServiceUnavailable, code, "a submit while NATS refuses the gateway: %v", v)
	require.Equal(t, "Unavailable", v["error"].(map[string]any)["type"], "%v", v)

	srv.setPassword(t, "p1")
	w.waitProbe(t, "/readyz", http.StatusOK, "ready", "")
	var runID string
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		code, v := gw.do(t, http.MethodPost, "/v1/runs", `{"agent": "demo", "input": "What is 12*7?"}`)
		if assert.Equal(c, http.StatusAccepted, code, "submit: %v", v) {
			runID = fmt.Sprint(v["run_id"])
		}
	}, 30*time.Second, 50*time.Millisecond, "waited for the gateway to accept a submit after the password came back:\n%s", gw.stderr)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		code, v := gw.do(t, http.MethodGet, "/v1/runs/"+runID, "")
		assert.Equal(c, http.StatusOK, code, "status: %v", v)
		assert.Equal(c, "completed", v["status"], "status: %v", v)
	}, 30*time.Second, 50*time.Millisecond, "waited for run %s to complete on the reconnected worker:\n%s", runID, w.stderr)
}
