package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/client"
)

func writeAgents(t testing.TB, yaml string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "agents.yaml")
	require.NoError(t, os.WriteFile(path, []byte(yaml), 0o644))
	return path
}

const quickAgents = `
agents:
  - name: quick
    model: scripted
    tools: [echo]
    script:
      - call: {name: echo, args: {text: hi}, id: e1}
      - text: quick done
`

const slowAgentsFile = `
agents:
  - name: slow
    model: scripted
    tools: [append_file, sleep]
    script:
      - call: {name: append_file, args: {path: slow.txt, line: started}, id: a}
      - call: {name: sleep, args: {ms: 4000}, id: s}
      - text: slow done
`

// waitServed waits until the live fleet serves every agent of want.
func waitServed(t *testing.T, c *client.Client, want ...string) {
	t.Helper()
	var have []string
	ok := waitUntil(30*time.Second, func() bool {
		rep, err := c.Agents(context.Background())
		if err != nil {
			return false
		}
		have = have[:0]
		for _, a := range rep.Agents {
			have = append(have, a.Name)
		}
		for _, w := range want {
			if !slices.Contains(have, w) {
				return false
			}
		}
		return true
	})
	require.True(t, ok, "the fleet never served %v (it serves %v)", want, have)
}

func waitUntil(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if cond() {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return cond()
}

// TestHeterogeneousFleet (lifecycle issue, routing by agent): a "quick"
// worker and a "slow" worker — different agents files — share one NATS,
// as in a rolling deploy that adds an agent. Every submit through
// lovia.api.submit is accepted whichever process's API answers; each run
// reaches a worker that serves its agent; the slow worker is killed with
// SIGKILL mid-tool, and its runs wait, queued, saying no worker serves
// their agent (a submit for it meanwhile is accepted and waits too) until
// a fresh slow worker joins and completes every one — one terminal event
// each. An agent nobody serves is refused with the list of those served.
func TestHeterogeneousFleet(t *testing.T) {
	srv, nc, _ := startNATS(t)
	ctx := context.Background()
	workspace := t.TempDir()
	quick, slow := writeAgents(t, quickAgents), writeAgents(t, slowAgentsFile)
	startWorker(t, srv.ClientURL(), quick, workspace, "quick-1")
	victim := startWorker(t, srv.ClientURL(), slow, workspace, "slow-1")
	c, err := client.New(nc, client.Options{})
	require.NoError(t, err)
	waitServed(t, c, "quick", "slow")

	const n = 10
	var quickIDs, slowIDs []string
	for i := range 2 * n {
		agent := []string{"quick", "slow"}[i%2]
		rep, err := c.Submit(ctx, &bus.RunRequest{Agent: agent, Input: bus.TextInput(fmt.Sprintf("run %d", i))})
		require.NoError(t, err, "submit %d (%s) refused", i, agent)
		if agent == "quick" {
			quickIDs = append(quickIDs, rep.RunID)
		} else {
			slowIDs = append(slowIDs, rep.RunID)
		}
	}
	for i, id := range quickIDs {
		completedRun(t, c, id, fmt.Sprintf("quick run %d", i))
	}
	// Every slow run is mid-tool (its first line written, sleeping).
	logPath := filepath.Join(workspace, "slow.txt")
	require.True(t, waitUntil(30*time.Second, func() bool { return fileLines(logPath) >= n }),
		"the slow runs never all started (%d of %d)", fileLines(logPath), n)
	require.NoError(t, victim.cmd.Process.Signal(syscall.SIGKILL))
	_, _ = victim.cmd.Process.Wait()

	// No live worker serves "slow": its runs wait, and say so.
	for _, id := range slowIDs {
		var st *bus.StatusReply
		ok := waitUntil(20*time.Second, func() bool {
			st, err = c.Status(ctx, id)
			return err == nil && st.Status == bus.StateQueued && strings.Contains(st.Waiting, `no worker serves agent "slow"`)
		})
		require.True(t, ok, "run %s: status %+v (%v), want queued waiting for a slow worker", id, st, err)
	}
	late, err := c.Submit(ctx, &bus.RunRequest{Agent: "slow", Input: bus.TextInput("late")})
	require.NoError(t, err, "a submit for an agent the fleet has served is accepted while no worker serves it")
	slowIDs = append(slowIDs, late.RunID)
	_, err = c.Submit(ctx, &bus.RunRequest{Agent: "nosuch", Input: bus.TextInput("x")})
	var ae *bus.APIError
	require.True(t, errors.As(err, &ae), "an unknown agent is refused: %v", err)
	require.Equal(t, bus.TypeUnknownAgent, ae.Type)
	require.Contains(t, ae.Hint, "quick")

	startWorker(t, srv.ClientURL(), slow, workspace, "slow-2")
	for i, id := range slowIDs {
		completedRun(t, c, id, fmt.Sprintf("slow run %d", i))
		st, err := c.Status(ctx, id)
		require.NoError(t, err)
		require.Equal(t, bus.StateCompleted, st.Status, "run %s", id)
	}
}
