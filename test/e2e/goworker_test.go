package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/broker"
	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/client"
	"github.com/lovia-fleet/lovia/pkg/loop"
)

// startGoWorker runs the examples/go-worker program as a worker until the
// test ends (SIGTERM then, SIGKILL after 20 s); its output is logged when
// the test failed.
func startGoWorker(t *testing.T, url, id string, env []string) *proc {
	t.Helper()
	return startBinary(t, goWorkerBin, id, env, "worker", "--nats", url, "--id", id, "--ack-wait", "30s", "--log-level", "debug")
}

// toolStarts reads the example's tool log: each line "pid tool".
func toolStarts(t *testing.T, path string) [][2]string {
	t.Helper()
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	var out [][2]string
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if pid, tool, ok := strings.Cut(l, " "); ok {
			out = append(out, [2]string{pid, tool})
		}
	}
	return out
}

func countTool(starts [][2]string, tool string) int {
	n := 0
	for _, s := range starts {
		if s[1] == tool {
			n++
		}
	}
	return n
}

// TestGoWorkerResumesAfterKill: two processes of a Go program
// (examples/go-worker: code agents with Deps, a guardrail and a typed
// output) serve one fleet. A run submitted with `lovia submit` is killed
// with SIGKILL while its second tool blocks; the other process resumes it
// from its checkpoint: the first tool (checkpointed) never runs again, the
// blocked one runs once more, and the run completes with the typed output.
func TestGoWorkerResumesAfterKill(t *testing.T) {
	srv, err := broker.StartEmbedded(broker.EmbeddedConfig{StoreDir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	dir := t.TempDir()
	logPath, gate := filepath.Join(dir, "tools.log"), filepath.Join(dir, "gate")
	env := []string{"ORDER_TOOL_LOG=" + logPath, "ORDER_TRACK_GATE=" + gate}
	procs := map[int]*proc{}
	for _, id := range []string{"go-a", "go-b"} {
		p := startGoWorker(t, srv.ClientURL(), id, env)
		procs[p.cmd.Process.Pid] = p
	}
	nc, err := nats.Connect(srv.ClientURL())
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	c, err := client.New(nc, client.Options{})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	require.True(t, waitUntil(30*time.Second, func() bool {
		ws, err := c.Workers(ctx)
		return err == nil && len(ws.Workers) == 2
	}), "the two go-worker processes never both joined the fleet")

	sub := exec.Command(loviaBin, "submit", "--nats", srv.ClientURL(), "--agent", "support", "where is order A1?")
	out, err := sub.CombinedOutput()
	require.NoError(t, err, "lovia submit: %s", out)
	runID := strings.TrimSpace(string(out))
	require.NotEmpty(t, runID)

	var holder int
	require.True(t, waitUntil(30*time.Second, func() bool {
		for _, s := range toolStarts(t, logPath) {
			if s[1] == "track_shipment" {
				holder, _ = strconv.Atoi(s[0])
				return true
			}
		}
		return false
	}), "track_shipment never started")
	victim, ok := procs[holder]
	require.True(t, ok, "the tool ran in pid %d, not one of the workers", holder)
	require.NoError(t, victim.cmd.Process.Signal(syscall.SIGKILL))
	_, _ = victim.cmd.Process.Wait()
	require.NoError(t, os.WriteFile(gate, nil, 0o644))

	tail, err := c.Tail(ctx, runID)
	require.NoError(t, err)
	defer tail.Close(context.Background())
	var done *loop.RunCompleted
	for e, err := range tail.All(ctx) {
		require.NoError(t, err)
		ev, err := e.Event()
		require.NoError(t, err)
		if f, ok := ev.(*loop.RunFailed); ok {
			t.Fatalf("run failed: %+v", f.Error)
		}
		if rc, ok := ev.(*loop.RunCompleted); ok {
			done = rc
		}
	}
	require.NotNil(t, done, "no run_completed")
	raw, err := json.Marshal(done.Output)
	require.NoError(t, err)
	require.JSONEq(t, `{"order":"A1","status":"shipped","eta":"tomorrow"}`, string(raw))

	starts := toolStarts(t, logPath)
	require.Equal(t, 1, countTool(starts, "lookup_order"), "the checkpointed call ran again: %v", starts)
	require.Equal(t, 2, countTool(starts, "track_shipment"), "the call in flight at the kill runs once more: %v", starts)
	require.NotEqual(t, strconv.Itoa(holder), starts[len(starts)-1][0], "the survivor finished the run")
	st, err := c.Status(ctx, runID)
	require.NoError(t, err)
	require.Equal(t, bus.StateCompleted, st.Status)
}
