package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/client"
	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/toolsvc"
)

const writerAgents = `
agents:
  - name: writer
    model: scripted
    tools: [files__append]
    script:
      - call: {name: files__append, args: {line: a}, id: a}
      - call: {name: files__append, args: {line: b}, id: b}
      - text: written
`

// TestToolServiceCallSurvivesAWorkerKill (tools from anywhere, exactly-once
// effects): a `lovia worker` process calls a NATS tool service with the
// call-id dedupe; it is killed with SIGKILL while its second call runs on
// the service. The worker that resumes the run calls again with the same
// call id (Lovia-Call-Id) and gets the stored reply instead of running the
// tool twice: the file has exactly one line per call, also for the call
// that was in flight at the kill, and the run ends once.
func TestToolServiceCallSurvivesAWorkerKill(t *testing.T) {
	srv, nc, _ := startNATS(t)
	ctx := context.Background()
	file := filepath.Join(t.TempDir(), "lines.txt")
	var mu sync.Mutex
	inFlight, release := make(chan struct{}), make(chan struct{})
	type lineIn struct {
		Line string `json:"line"`
	}
	appendLine := loop.NewTool("append", "Append a line to the file.", func(ctx context.Context, _ *loop.RunContext, in lineIn) (string, error) {
		mu.Lock()
		f, err := os.OpenFile(file, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err == nil {
			_, err = fmt.Fprintln(f, in.Line)
			_ = f.Close()
		}
		mu.Unlock()
		if err != nil {
			return "", err
		}
		if in.Line == "b" {
			close(inFlight)
			select { // the call in flight at the kill
			case <-release:
			case <-ctx.Done():
				return "", ctx.Err()
			}
		}
		return "appended " + in.Line, nil
	})
	svc, err := toolsvc.New(toolsvc.Config{Conn: nc, Name: "files", Tools: []*loop.Tool{appendLine}, Dedupe: &toolsvc.Dedupe{}})
	require.NoError(t, err)
	require.NoError(t, svc.Start(ctx))
	t.Cleanup(func() { _ = svc.Stop(context.Background()) })

	agents := writeAgents(t, writerAgents)
	workspace := t.TempDir()
	victim := startWorker(t, srv.ClientURL(), agents, workspace, "victim")
	c, err := client.New(nc, client.Options{})
	require.NoError(t, err)
	waitServed(t, c, "writer")
	rep, err := c.Submit(ctx, &bus.RunRequest{Agent: "writer", Input: bus.TextInput("write")})
	require.NoError(t, err)
	select {
	case <-inFlight:
	case <-time.After(30 * time.Second):
		t.Fatal("the second call never reached the service")
	}
	require.NoError(t, victim.cmd.Process.Signal(syscall.SIGKILL))
	_, _ = victim.cmd.Process.Wait()

	startWorker(t, srv.ClientURL(), agents, workspace, "survivor")
	tctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	tail, err := c.Tail(tctx, rep.RunID, bus.FromStart())
	require.NoError(t, err)
	defer func() { _ = tail.Close(ctx) }()
	released := false
	var envs []*bus.Envelope
	for env, err := range tail.All(tctx) {
		require.NoError(t, err, "tailing the run")
		envs = append(envs, env)
		if env.Type == bus.EventRunResumed && !released {
			// The survivor re-runs the dangling call b, with the same call
			// id, while (or after) the first call finishes on the service.
			released = true
			close(release)
		}
	}
	require.True(t, released, "the run was never resumed")
	require.Equal(t, loop.EventRunCompleted, envs[len(envs)-1].Type)
	terminals := 0
	for _, e := range envs {
		if e.IsTerminal() {
			terminals++
		}
	}
	require.Equal(t, 1, terminals)
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	require.Equal(t, "a\nb\n", string(b), "each call ran once, also the one in flight at the kill")
}
