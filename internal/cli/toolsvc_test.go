package cli

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/internal/fleettest"
	"github.com/lovia-fleet/lovia/internal/mcptest"
	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/toolsvc"
)

// startNodeToolService starts examples/tool-service-node against url and
// stops it at cleanup.
func startNodeToolService(t *testing.T, url string) {
	t.Helper()
	dir := filepath.Join(mcptest.Root(t), "examples", "tool-service-node")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@nats-io", "services")); err != nil {
		t.Fatalf("the Node tool service's packages are not installed (%v): run `make npm-deps`", err)
	}
	cmd := exec.Command("node", "index.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "NATS_URL="+url)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		t.Log("node tool service:\n" + stderr.String())
	})
}

// lovia dev with an agent that names a tool service: the service starts
// after dev (on its embedded server), and the next run calls it.
func TestDevWithToolService(t *testing.T) {
	agents := filepath.Join(t.TempDir(), "agents.yaml")
	require.NoError(t, os.WriteFile(agents, []byte(`
agents:
  - name: counter
    model: scripted
    tools: [texttools__word_count]
    script:
      - call: {name: texttools__word_count, args: {text: "one two three"}}
      - text: done
`), 0o644))
	url := startDev(t, "--agents", agents)
	c := devClient(t, url)

	// Before the service runs, the run fails and says what to start.
	envs := runEvents(t, c, "counter")
	require.NotEmpty(t, envs)
	last := envs[len(envs)-1]
	require.Equal(t, loop.EventRunFailed, last.Type, "events: %v", fleettest.Types(envs))
	failed := fleettest.Event[*loop.RunFailed](t, last)
	require.Contains(t, failed.Error.Message, `no tool service "texttools" is running`)

	startNodeToolService(t, url)
	nc, err := nats.Connect(url)
	require.NoError(t, err)
	defer nc.Close()
	require.Eventually(t, func() bool {
		found, err := toolsvc.Discover(context.Background(), nc, "lovia", 0)
		return err == nil && len(found) == 1
	}, 30*time.Second, 20*time.Millisecond, "waiting for the Node tool service to answer discovery")

	envs = runEvents(t, c, "counter")
	requireCompleted(t, envs)
	res := results(t, envs)
	require.Len(t, res, 1)
	require.Equal(t, "3 words", res[0].Output)
}
