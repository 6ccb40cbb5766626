package e2e

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/internal/fleettest"
	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/client"
	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/service"
	"github.com/lovia-fleet/lovia/pkg/store"
)

// TestParkedRunOutlivesItsWorker: a run waiting for an approval parks off
// its `lovia worker` process; the process is killed with SIGKILL while the
// run is parked; the approval, sent while no worker is up, is answered by a
// worker started afterwards: the approved tool runs once and the run
// completes as one gapless submission.
func TestParkedRunOutlivesItsWorker(t *testing.T) {
	srv, nc, js := startNATS(t)
	ctx := context.Background()

	agents := filepath.Join(t.TempDir(), "agents.yaml")
	require.NoError(t, os.WriteFile(agents, []byte(`
agents:
  - name: deployer
    model: scripted
    tools: [append_file]
    approval: [append_file]
    approval_timeout: 10m
    script:
      - call: {name: append_file, args: {path: deploys.txt, line: shipped}, id: d1}
      - text: deployed
`), 0o644))
	workspace := t.TempDir()
	first := startWorker(t, srv.ClientURL(), agents, workspace, "first", "--park-after", "300ms")
	c, err := client.New(nc, client.Options{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, err := c.Agents(ctx)
		return err == nil
	}, 20*time.Second, 50*time.Millisecond)

	rep, err := c.Submit(ctx, &bus.RunRequest{Agent: "deployer", Input: bus.TextInput("ship it")})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		st, err := c.Status(ctx, rep.RunID)
		return err == nil && st.Awaiting != nil && st.Awaiting.CallID == "d1"
	}, 20*time.Second, 50*time.Millisecond, "the run never parked")

	require.NoError(t, first.cmd.Process.Signal(syscall.SIGKILL))
	_, _ = first.cmd.Process.Wait()
	// No worker is up; the API is served here, as a gateway would.
	st, err := store.Open(ctx, js, store.Config{})
	require.NoError(t, err)
	api, err := service.NewAPI(service.Config{Conn: nc, Store: st})
	require.NoError(t, err)
	svc := service.New(api)
	require.NoError(t, svc.Start(ctx))
	t.Cleanup(func() { _ = svc.Stop(context.Background()) })
	ar, err := c.Approve(ctx, rep.RunID, "d1", loop.Approve, "go ahead")
	require.NoError(t, err)
	require.True(t, ar.Accepted)

	startWorker(t, srv.ClientURL(), agents, workspace, "second", "--park-after", "300ms")
	envs := completedRun(t, c, rep.RunID, rep.RunID)
	require.Len(t, fleettest.OfType(envs, loop.EventRunStarted), 1)
	require.Len(t, fleettest.OfType(envs, bus.EventRunResumed), 1)
	require.Len(t, fleettest.OfType(envs, loop.EventToolCallStarted), 1)
	require.Equal(t, []string{"shipped"}, readLines(t, filepath.Join(workspace, "deploys.txt")))
	resumed := fleettest.OfType(envs, bus.EventRunResumed)[0]
	ev, err := resumed.Event()
	require.NoError(t, err)
	require.Equal(t, "second", ev.(*bus.RunResumed).Worker)
}
