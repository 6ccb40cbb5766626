package e2e

import (
	"context"
	"encoding/json"
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

// TestHandoffKill9: a scripted agent reached by a handoff plays its own
// script from its first step, and after a kill -9 of its worker in the
// middle of it, another worker resumes it at the right step: each tool
// call of either agent ran once, and the run ends with the target's
// answer.
func TestHandoffKill9(t *testing.T) {
	srv, nc, _ := startNATS(t)
	ctx := context.Background()
	agents := writeAgents(t, `
agents:
  - name: triage
    model: scripted
    tools: [append_file]
    handoffs: [specialist]
    script:
      - call: {name: append_file, args: {path: log.txt, line: triage-a}, id: ta}
      - call: {name: transfer_to_specialist, args: {reason: billing}, id: th}
  - name: specialist
    model: scripted
    tools: [append_file, sleep]
    script:
      - call: {name: append_file, args: {path: log.txt, line: specialist-a}, id: sa}
      - call: {name: sleep, args: {ms: 4000}, id: ss}
      - call: {name: append_file, args: {path: log.txt, line: specialist-b}, id: sb}
      - text: specialist done
`)
	workspace := t.TempDir()
	victim := startWorker(t, srv.ClientURL(), agents, workspace, "victim")
	c, err := client.New(nc, client.Options{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { _, err := c.Agents(ctx); return err == nil }, 20*time.Second, 50*time.Millisecond, "waited for the victim's API")
	rep, err := c.Submit(ctx, &bus.RunRequest{Agent: "triage", Input: bus.TextInput("my bill")})
	require.NoError(t, err)

	logPath := filepath.Join(workspace, "log.txt")
	if !waitUntil(30*time.Second, func() bool { return slices.Contains(readLinesIfAny(logPath), "specialist-a") }) {
		t.Fatalf("waited 30s for the specialist's first step on the victim; the log holds %v", readLinesIfAny(logPath))
	}
	survivor := startWorker(t, srv.ClientURL(), agents, workspace, "survivor")
	require.Eventually(t, func() bool { return strings.Contains(survivor.output(), "serving agents") }, 20*time.Second, 10*time.Millisecond,
		"waited for the survivor to start")
	require.NotContains(t, readLinesIfAny(logPath), "specialist-b", "the victim finished before the kill; lengthen the specialist's sleep")
	require.NoError(t, victim.cmd.Process.Signal(syscall.SIGKILL))
	_, _ = victim.cmd.Process.Wait()

	envs := completedRun(t, c, rep.RunID, "the handed-off run")
	var done struct {
		Output string `json:"output"`
	}
	require.NoError(t, json.Unmarshal(envs[len(envs)-1].Data, &done))
	require.Equal(t, "specialist done", done.Output)
	resumed := 0
	for _, env := range envs {
		if env.Type == bus.EventRunResumed {
			resumed++
		}
	}
	require.Positive(t, resumed, "the survivor resumed the run")
	require.Equal(t, []string{"triage-a", "specialist-a", "specialist-b"}, readLinesIfAny(logPath), "each step ran once, in order")
}

func readLinesIfAny(path string) []string {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	return strings.Fields(string(b))
}
