package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/internal/fleettest"
	"github.com/lovia-fleet/lovia/internal/mcptest"
	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/client"
	"github.com/lovia-fleet/lovia/pkg/loop"
)

// mcpAgents writes an agents file whose agents use the npm everything and
// filesystem MCP servers over stdio. The everything server's environment
// carries tag, so the test can count its processes.
func mcpAgents(t *testing.T, tag, dir string) string {
	t.Helper()
	agents := filepath.Join(t.TempDir(), "agents.yaml")
	yaml := fmt.Sprintf(`
mcp_servers:
  everything:
    command: node
    args: [%q, stdio]
    env: {LOVIA_TEST_TAG: %q}
agents:
  - name: echoer
    model: scripted
    tools: [everything__*]
    script:
      - call: {name: everything__echo, args: {message: hi from mcp}}
      - text: done
  - name: reader
    model: scripted
    mcp_servers:
      fs:
        command: node
        args: [%q, %q]
    tools: [fs__read_text_file]
    script:
      - call: {name: fs__read_text_file, args: {path: %q}}
      - call: {name: fs__read_text_file, args: {path: %q}}
      - text: read both
  - name: slow
    model: scripted
    tools: [everything__trigger-long-running-operation]
    script:
      - call: {name: everything__trigger-long-running-operation, args: {duration: 60, steps: 60}}
      - text: went on after the failure
`, mcptest.Script(t, "server-everything"), tag,
		mcptest.Script(t, "server-filesystem"), dir,
		filepath.Join(dir, "notes.txt"), filepath.Join(dir, "missing.txt"))
	require.NoError(t, os.WriteFile(agents, []byte(yaml), 0o644))
	return agents
}

// devClient connects a client to a lovia dev.
func devClient(t *testing.T, url string) *client.Client {
	t.Helper()
	nc, err := nats.Connect(url)
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	c, err := client.New(nc, client.Options{})
	require.NoError(t, err)
	return c
}

// runEvents submits a run and returns its events up to the terminal one.
func runEvents(t *testing.T, c *client.Client, agent string) []*bus.Envelope {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rep, err := c.Submit(ctx, &bus.RunRequest{Agent: agent, Input: bus.TextInput("go")})
	if err != nil {
		t.Errorf("submit %s: %v", agent, err)
		return nil
	}
	tail, err := c.Tail(ctx, rep.RunID, bus.FromStart())
	if err != nil {
		t.Errorf("tail %s: %v", rep.RunID, err)
		return nil
	}
	defer tail.Close(context.Background())
	var out []*bus.Envelope
	for env, err := range tail.All(ctx) {
		if err != nil {
			t.Errorf("tail %s after %d events: %v", rep.RunID, len(out), err)
			return out
		}
		out = append(out, env)
	}
	return out
}

// results returns the tool_call_completed events of a run.
func results(t *testing.T, envs []*bus.Envelope) []*loop.ToolCallCompleted {
	var out []*loop.ToolCallCompleted
	for _, e := range fleettest.OfType(envs, loop.EventToolCallCompleted) {
		out = append(out, fleettest.Event[*loop.ToolCallCompleted](t, e))
	}
	return out
}

func requireCompleted(t *testing.T, envs []*bus.Envelope) {
	t.Helper()
	require.NotEmpty(t, envs)
	require.Equal(t, loop.EventRunCompleted, envs[len(envs)-1].Type, "events: %v", fleettest.Types(envs))
}

// lovia dev with MCP servers in the agents file: runs call their tools
// over one shared stdio process per server, see isError results and
// dead servers as error results, and the server comes back.
func TestDevWithMCPServers(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("the notes"), 0o644))
	tag := "dev-" + strconv.Itoa(os.Getpid()) + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	errb := &syncBuf{}
	url := startDevLogging(t, errb, "--agents", mcpAgents(t, tag, dir), "--log-level", "debug")
	c := devClient(t, url)
	pids := mcptest.Processes(t, "LOVIA_TEST_TAG="+tag)
	require.Len(t, pids, 1, "one everything process for the dev process and its two workers")

	t.Run("a run calls everything__echo and its events carry the result", func(t *testing.T) {
		envs := runEvents(t, c, "echoer")
		requireCompleted(t, envs)
		res := results(t, envs)
		require.Len(t, res, 1)
		require.Equal(t, "everything__echo", res[0].Call.Name)
		require.Equal(t, "Echo: hi from mcp", res[0].Output)
		require.False(t, res[0].IsError)
	})

	t.Run("a filesystem tool, and its isError result reaches the model", func(t *testing.T) {
		envs := runEvents(t, c, "reader")
		requireCompleted(t, envs)
		res := results(t, envs)
		require.Len(t, res, 2)
		require.Equal(t, "the notes", res[0].Output)
		require.True(t, res[1].IsError)
		require.Contains(t, res[1].Output, "missing.txt")
	})

	t.Run("50 concurrent runs share one server process", func(t *testing.T) {
		var wg sync.WaitGroup
		outs := make(chan []*loop.ToolCallCompleted, 50)
		for range 50 {
			wg.Go(func() {
				envs := runEvents(t, c, "echoer")
				if len(envs) == 0 || envs[len(envs)-1].Type != loop.EventRunCompleted {
					t.Errorf("a run did not complete: %v", fleettest.Types(envs))
					return
				}
				outs <- results(t, envs)
			})
		}
		wg.Wait()
		close(outs)
		n := 0
		for res := range outs {
			require.Len(t, res, 1)
			require.Equal(t, "Echo: hi from mcp", res[0].Output)
			n++
		}
		require.Equal(t, 50, n)
		require.Equal(t, pids, mcptest.Processes(t, "LOVIA_TEST_TAG="+tag))
	})

	t.Run("a server killed mid-call is a tool error; it is restarted and the next run works", func(t *testing.T) {
		done := make(chan []*bus.Envelope, 1)
		go func() { done <- runEvents(t, c, "slow") }()
		// The server reports progress once the long operation runs.
		require.Eventually(t, func() bool { return strings.Contains(errb.String(), "MCP tool progress") }, time.Minute, 10*time.Millisecond,
			"waiting for the long-running call to report progress")
		require.NoError(t, syscall.Kill(pids[0], syscall.SIGKILL))

		var envs []*bus.Envelope
		select {
		case envs = <-done:
		case <-time.After(time.Minute):
			t.Fatal("the run whose server was killed did not end")
		}
		requireCompleted(t, envs)
		res := results(t, envs)
		require.Len(t, res, 1)
		require.True(t, res[0].IsError)
		require.Contains(t, res[0].Output, `MCP server "everything" failed during the call`)
		require.Contains(t, res[0].Output, "call the tool again")

		require.Eventually(t, func() bool {
			now := mcptest.Processes(t, "LOVIA_TEST_TAG="+tag)
			return len(now) == 1 && now[0] != pids[0]
		}, time.Minute, 10*time.Millisecond, "waiting for the everything server to be started again")

		envs = runEvents(t, c, "echoer")
		requireCompleted(t, envs)
		res = results(t, envs)
		require.Len(t, res, 1)
		require.Equal(t, "Echo: hi from mcp", res[0].Output)
	})
}

// An agent naming an MCP tool the server does not have stops lovia dev at
// start-up with the tools the server does have.
func TestDevRejectsUnknownMCPTool(t *testing.T) {
	agents := filepath.Join(t.TempDir(), "agents.yaml")
	require.NoError(t, os.WriteFile(agents, []byte(fmt.Sprintf(`
mcp_servers:
  everything: {command: node, args: [%q, stdio]}
agents:
  - {name: a, model: scripted, tools: [everything__nope], script: [{text: x}]}
`, mcptest.Script(t, "server-everything"))), 0o644))
	var out, errb bytes.Buffer
	code := Main(context.Background(), []string{"dev", "--nats-port", "0", "--http", "127.0.0.1:0", "--data", t.TempDir(),
		"--workspace", t.TempDir(), "--log-level", "warn", "--agents", agents}, strings.NewReader(""), &out, &errb, getenv(nil))
	require.Equal(t, ExitFailure, code)
	require.Contains(t, errb.String(), `unknown tool "everything__nope" (MCP server "everything" has: everything__echo,`)
}

// startDevLogging is startDev with the dev process's stderr (its log) in
// errb.
func startDevLogging(t *testing.T, errb *syncBuf, extra ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out := &syncBuf{}
	done := make(chan int, 1)
	args := append([]string{"dev", "--nats-port", "0", "--http", "127.0.0.1:0", "--data", t.TempDir(),
		"--workspace", t.TempDir(), "--log-level", "warn"}, extra...)
	go func() { done <- Main(ctx, args, strings.NewReader(""), out, errb, getenv(nil)) }()
	t.Cleanup(func() {
		cancel()
		select {
		case code := <-done:
			require.Equal(t, ExitOK, code, lastLines(errb.String(), 20))
		case <-time.After(time.Minute):
			t.Error("lovia dev did not stop")
		}
	})
	re := regexp.MustCompile(`NATS\s+(nats://\S+)`)
	var url string
	require.Eventually(t, func() bool {
		if m := re.FindStringSubmatch(out.String()); m != nil {
			url = m[1]
			return true
		}
		return false
	}, time.Minute, 20*time.Millisecond, "waiting for lovia dev to be up: %s %s", out.String(), lastLines(errb.String(), 20))
	return url
}

func lastLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// The number: 1,000 concurrent runs on one worker calling one
// stdio MCP server: one server process, and every run completes.
func TestThousandRunsShareOneMCPProcess(t *testing.T) {
	tag := "thousand-" + strconv.Itoa(os.Getpid()) + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	url := startDevLogging(t, &syncBuf{}, "--agents", mcpAgents(t, tag, t.TempDir()), "--workers", "1", "--concurrency", "1000")
	c := devClient(t, url)
	var wg sync.WaitGroup
	var completed atomic.Int64
	for range 1000 {
		wg.Go(func() {
			envs := runEvents(t, c, "echoer")
			if len(envs) == 0 || envs[len(envs)-1].Type != loop.EventRunCompleted {
				t.Errorf("a run did not complete: %v", fleettest.Types(envs))
				return
			}
			if res := results(t, envs); len(res) != 1 || res[0].Output != "Echo: hi from mcp" {
				t.Errorf("a run's tool result: %+v", res)
				return
			}
			completed.Add(1)
		})
	}
	wg.Wait()
	require.EqualValues(t, 1000, completed.Load())
	require.Len(t, mcptest.Processes(t, "LOVIA_TEST_TAG="+tag), 1)
}
