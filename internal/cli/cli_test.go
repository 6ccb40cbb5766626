package cli

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/internal/leaktest"
)

// The server's wait for a stream source's consumer (the runs stream sources
// the schedules' fires) can outlive a test server by up to 30 s.
func TestMain(m *testing.M) {
	leaktest.VerifyTestMain(m)
}

// syncBuf is a goroutine-safe buffer.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func getenv(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// serveDev runs `lovia dev` on free ports, with the extra flags, until the
// test ends (it must then exit 0), and returns its stdout and stderr.
func serveDev(t *testing.T, extra ...string) (out, errb *syncBuf) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out, errb = &syncBuf{}, &syncBuf{}
	done := make(chan int, 1)
	args := append([]string{"dev", "--nats-port", "0", "--http", "127.0.0.1:0", "--data", t.TempDir(),
		"--workspace", t.TempDir(), "--log-level", "warn"}, extra...)
	go func() { done <- Main(ctx, args, strings.NewReader(""), out, errb, getenv(nil)) }()
	t.Cleanup(func() {
		cancel()
		select {
		case code := <-done:
			require.Equal(t, ExitOK, code, errb.String())
		case <-time.After(30 * time.Second):
			t.Error("lovia dev did not stop")
		}
	})
	return out, errb
}

// startDev runs `lovia dev` on free ports and returns its NATS URL.
func startDev(t *testing.T, extra ...string) string {
	t.Helper()
	out, errb := serveDev(t, extra...)
	re := regexp.MustCompile(`NATS\s+(nats://\S+)`)
	var url string
	require.Eventually(t, func() bool {
		if m := re.FindStringSubmatch(out.String()); m != nil {
			url = m[1]
			return true
		}
		return false
	}, 30*time.Second, 20*time.Millisecond, "dev output: %s %s", out.String(), errb.String())
	require.Contains(t, out.String(), "HTTP      http://")
	return url
}

func TestDevRunTailStatus(t *testing.T) {
	url := startDev(t)
	env := getenv(map[string]string{"NATS_URL": url})
	ctx := context.Background()

	// lovia run streams the demo agent's calculator flow.
	var out, errb bytes.Buffer
	code := Main(ctx, []string{"run", "What is 12*7?"}, strings.NewReader(""), &out, &errb, env)
	require.Equal(t, ExitOK, code, errb.String())
	require.Contains(t, out.String(), "→ calculator(")
	require.Contains(t, out.String(), "← calculator: 84")
	require.Contains(t, out.String(), "84")

	// submit prints a run id; tail --json prints one envelope per line.
	out.Reset()
	require.Equal(t, ExitOK, Main(ctx, []string{"submit", "--agent", "demo", "What time is it?"}, nil, &out, &errb, env))
	runID := strings.TrimSpace(out.String())
	require.NotEmpty(t, runID)
	out.Reset()
	require.Equal(t, ExitOK, Main(ctx, []string{"tail", "--json", runID}, nil, &out, &errb, env), errb.String())
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Contains(t, lines[0], `"type":"run_started"`)
	require.Contains(t, lines[len(lines)-1], `"type":"run_completed"`)
	require.Contains(t, out.String(), "time_now")

	out.Reset()
	require.Eventually(t, func() bool {
		out.Reset()
		return Main(ctx, []string{"status", "--json", runID}, nil, &out, &errb, env) == ExitOK && strings.Contains(out.String(), `"status": "completed"`)
	}, 10*time.Second, 50*time.Millisecond, out.String())

	// Submitted again under its run id, the completed run is replayed, and
	// submit says so; with another input, that the input was not run
	// (issue 25, item 10).
	for _, tc := range []struct{ input, says string }{
		{"What time is it?", "had already completed: nothing new runs"},
		{"What is 2+2?", "had already completed with another input: that input was NOT run"},
	} {
		out.Reset()
		errb.Reset()
		require.Equal(t, ExitOK, Main(ctx, []string{"submit", "--run-id", runID, tc.input}, nil, &out, &errb, env), errb.String())
		require.Equal(t, runID, strings.TrimSpace(out.String()))
		require.Contains(t, errb.String(), tc.says)
	}

	// A cancel of the ended run says there was nothing to cancel.
	out.Reset()
	errb.Reset()
	require.Equal(t, ExitOK, Main(ctx, []string{"cancel", runID}, nil, &out, &errb, env), errb.String())
	require.Contains(t, out.String(), "run "+runID+" had already ended (completed): nothing to cancel")
	out.Reset()
	require.Equal(t, ExitOK, Main(ctx, []string{"cancel", "--json", runID}, nil, &out, &errb, env), errb.String())
	require.Contains(t, out.String(), `"cancelled": false`)
}

func TestUsageAndErrors(t *testing.T) {
	var out, errb bytes.Buffer
	ctx := context.Background()
	require.Equal(t, ExitUsage, Main(ctx, []string{"nope"}, nil, &out, &errb, os.Getenv))
	require.Contains(t, errb.String(), `unknown command "nope"`)
	errb.Reset()
	require.Equal(t, ExitUsage, Main(ctx, []string{"approve", "r1"}, nil, &out, &errb, os.Getenv))
	require.Contains(t, errb.String(), "RUN_ID and CALL_ID are required")
	errb.Reset()
	require.Equal(t, ExitUsage, Main(ctx, []string{"run"}, nil, &out, &errb, os.Getenv))
	errb.Reset()
	// A blank input is no input: refused before connecting (a run id
	// alone would resubmit a run, issue 25 item 4).
	for _, cmd := range []string{"run", "submit"} {
		require.Equal(t, ExitUsage, Main(ctx, []string{cmd, "--nats", "nats://127.0.0.1:1", " "}, nil, &out, &errb, os.Getenv), cmd)
		require.Contains(t, errb.String(), "the input is empty", cmd)
		errb.Reset()
	}
	// No NATS: a clear failure, exit 1.
	code := Main(ctx, []string{"status", "--nats", "nats://127.0.0.1:1", "r1"}, nil, &out, &errb, os.Getenv)
	require.Equal(t, ExitFailure, code)
	require.Contains(t, errb.String(), "cannot connect to NATS")
}

func TestRunFailureExitsOne(t *testing.T) {
	url := startDev(t)
	env := getenv(map[string]string{"NATS_URL": url})
	var out, errb bytes.Buffer
	code := Main(context.Background(), []string{"run", "--agent", "nobody", "hi"}, nil, &out, &errb, env)
	require.Equal(t, ExitFailure, code)
	require.Contains(t, errb.String(), "UnknownAgent")
}

// writeGatedAgents writes an agents file with one agent, gated, whose echo
// call needs an approval.
func writeGatedAgents(t *testing.T) string {
	agents := t.TempDir() + "/agents.yaml"
	require.NoError(t, os.WriteFile(agents, []byte(`
agents:
  - name: gated
    model: scripted
    tools: [echo]
    approval: [echo]
    script:
      - call: {name: echo, args: {text: approved-output}, id: c1}
      - text: finished
`), 0o644))
	return agents
}

// lovia run asks on the terminal for approvals: "y" approves, anything
// else rejects.
func TestRunAsksForApprovals(t *testing.T) {
	agents := writeGatedAgents(t)
	url := startDev(t, "--agents", agents)
	env := getenv(map[string]string{"NATS_URL": url})
	for answer, want := range map[string]string{"y\n": "← echo: approved-output", "n\n": "✗ echo: Tool echo was not approved."} {
		var out, errb bytes.Buffer
		code := Main(context.Background(), []string{"run", "--agent", "gated", "go"}, strings.NewReader(answer), &out, &errb, env)
		require.Equal(t, ExitOK, code, errb.String())
		require.Contains(t, errb.String(), "? approve echo(")
		require.Contains(t, out.String(), want)
		require.Contains(t, out.String(), "finished")
	}
}

// --cors-origin lets browser pages of that origin call the gateway (dev and
// gateway); a value that is not an origin is refused with what to write.
func TestCORSOriginFlag(t *testing.T) {
	url := startDev(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errb := &syncBuf{}
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, []string{"gateway", "--nats", url, "--http", "127.0.0.1:0", "--log-level", "warn",
			"--cors-origin", "http://localhost:5173"}, nil, io.Discard, errb, getenv(nil))
	}()
	re := regexp.MustCompile(`lovia gateway on (http://\S+)`)
	var base string
	require.Eventually(t, func() bool {
		m := re.FindStringSubmatch(errb.String())
		if m != nil {
			base = m[1]
		}
		return m != nil
	}, 20*time.Second, 20*time.Millisecond, errb.String())
	req, err := http.NewRequest(http.MethodOptions, base+"/v1/runs", nil)
	require.NoError(t, err)
	req.Header.Set("Origin", "http://localhost:5173")
	req.Header.Set("Access-Control-Request-Method", "POST")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusNoContent, resp.StatusCode)
	require.Equal(t, "http://localhost:5173", resp.Header.Get("Access-Control-Allow-Origin"))
	cancel()
	require.Equal(t, ExitOK, <-done, errb.String())

	var bad bytes.Buffer
	code := Main(context.Background(), []string{"gateway", "--nats", url, "--http", "127.0.0.1:0", "--cors-origin", "localhost:5173"},
		nil, io.Discard, &bad, getenv(nil))
	require.Equal(t, ExitFailure, code)
	require.Contains(t, bad.String(), "http(s)://host[:port]")
}

// slowReader answers after a delay, as a person at a terminal does.
type slowReader struct {
	delay time.Duration
	r     io.Reader
}

func (s *slowReader) Read(p []byte) (int, error) {
	time.Sleep(s.delay)
	s.delay = 0
	return s.r.Read(p)
}

// lovia run asks once per call: an answer slower than --park-after parks
// the run, and the resumed run's second approval_required is not asked
// again — the stored decision applies.
func TestRunAsksOnceAcrossAPark(t *testing.T) {
	agents := writeGatedAgents(t)
	url := startDev(t, "--agents", agents, "--park-after", "200ms")
	env := getenv(map[string]string{"NATS_URL": url})
	var out, errb bytes.Buffer
	code := Main(context.Background(), []string{"run", "--agent", "gated", "go"},
		&slowReader{delay: 1500 * time.Millisecond, r: strings.NewReader("y\n")}, &out, &errb, env)
	require.Equal(t, ExitOK, code, errb.String())
	require.Equal(t, 1, strings.Count(errb.String(), "? approve echo("), errb.String())
	require.Equal(t, 1, strings.Count(out.String(), "needs approval"), out.String())
	require.Contains(t, out.String(), "← echo: approved-output")
	require.Contains(t, out.String(), "finished")
}
