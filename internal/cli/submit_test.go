package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/bus"
)

// lovia run and submit against a dev fleet: the input from stdin or a
// file (larger than an argument list takes), metadata, a chosen run id
// and its if-run-exists policy; the human views of status and
// describe; approve's exit code when another decision came first.
func TestSubmitInputMetadataAndRunID(t *testing.T) {
	agents := writeGatedAgents(t)
	b, err := os.ReadFile(agents)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(agents, append(b, []byte(`
  - name: demo
    model: scripted
    tools: [echo]
    script:
      - call: {name: echo, args: {text: "84"}, id: e1}
      - text: "12*7 is 84."
`)...), 0o644))
	url := startDev(t, "--agents", agents)
	env := getenv(map[string]string{"NATS_URL": url})
	ctx := context.Background()
	lovia := func(stdin string, args ...string) (string, string, int) {
		var out, errb bytes.Buffer
		code := Main(ctx, args, strings.NewReader(stdin), &out, &errb, env)
		return out.String(), errb.String(), code
	}
	// describe polls the run until it ends.
	describe := func(runID string) bus.RunDescription {
		t.Helper()
		var d bus.RunDescription
		deadline := time.Now().Add(60 * time.Second)
		for {
			out, errs, code := lovia("", "runs", "describe", "--json", runID)
			require.Equal(t, ExitOK, code, errs)
			require.NoError(t, json.Unmarshal([]byte(out), &d), out)
			if d.Status == bus.StateCompleted || d.Status == bus.StateFailed {
				return d
			}
			require.True(t, time.Now().Before(deadline), "waiting for run %s to end: %s", runID, out)
			time.Sleep(50 * time.Millisecond)
		}
	}

	// stdin, with metadata: the Memory plugin's user_id, a typed value.
	out, errs, code := lovia("What is 12*7?\n", "run", "-", "--metadata", "user_id=u1", "--metadata", "tier:=2")
	require.Equal(t, ExitOK, code, errs)
	require.Contains(t, out, "← echo: 84")
	runID := strings.TrimSpace(strings.TrimPrefix(strings.Fields(errs)[1], "run "))
	d := describe(runID)
	require.Equal(t, map[string]any{"user_id": "u1", "tier": 2.0}, d.Metadata)
	out, errs, code = lovia("", "runs", "describe", runID)
	require.Equal(t, ExitOK, code, errs)
	require.Contains(t, out, "metadata  tier=2 user_id=u1")
	require.Contains(t, out, "output:\n  ", "describe shows the run's output")
	out, errs, code = lovia("", "status", runID)
	require.Equal(t, ExitOK, code, errs)
	require.Regexp(t, `status\s+completed( \(last on \S+\))?, attempt 1`, out)
	require.Contains(t, out, "output:")

	// A file over what an argument list takes (128 KiB).
	big := filepath.Join(t.TempDir(), "in.txt")
	require.NoError(t, os.WriteFile(big, []byte("What time is it? "+strings.Repeat("x", 200<<10)), 0o644))
	out, errs, code = lovia("", "submit", "--input-file", big, "--run-id", "big-1")
	require.Equal(t, ExitOK, code, errs)
	require.Equal(t, "big-1", strings.TrimSpace(out))
	require.Equal(t, bus.StateCompleted, describe("big-1").Status)

	// run --run-id: a second run of a completed id replays its output;
	// --if-run-exists fail refuses it.
	_, errs, code = lovia("", "run", "--run-id", "mine-1", "What is 12*7?")
	require.Equal(t, ExitOK, code, errs)
	out, errs, code = lovia("", "run", "--run-id", "mine-1", "What is 12*7?")
	require.Equal(t, ExitOK, code, errs)
	require.Contains(t, errs, "run mine-1 had already completed: nothing new runs, its stored result is replayed")
	require.Contains(t, out, "84")
	_, errs, code = lovia("", "submit", "--run-id", "mine-1", "--if-run-exists", "fail", "What is 12*7?")
	require.Equal(t, ExitFailure, code)
	require.Contains(t, errs, "run mine-1 already exists (status completed); give --if-run-exists resume to read its result or restart")
	require.NotContains(t, errs, "docs/protocol.md", "said in the flags' terms, not the wire's")

	// approve: a second, different decision is not applied and says so
	// (exit 1); the same decision again is a retry (exit 0).
	out, errs, code = lovia("", "submit", "--agent", "gated", "go")
	require.Equal(t, ExitOK, code, errs)
	gated := strings.TrimSpace(out)
	deadline := time.Now().Add(60 * time.Second)
	for {
		out, errs, code = lovia("", "status", gated)
		require.Equal(t, ExitOK, code, errs)
		if strings.Contains(out, "decide: lovia approve "+gated+" c1") {
			break
		}
		var list bus.RunsListReply
		lout, _, _ := lovia("", "runs", "list", "--awaiting", "--json")
		_ = json.Unmarshal([]byte(lout), &list)
		if len(list.Runs) == 1 && list.Runs[0].RunID == gated {
			break
		}
		require.True(t, time.Now().Before(deadline), "waiting for run %s to await its approval: %s", gated, out)
		time.Sleep(50 * time.Millisecond)
	}
	out, errs, code = lovia("", "approve", gated, "c1", "--reject")
	require.Equal(t, ExitOK, code, errs)
	require.Equal(t, "call c1 of run "+gated+": rejected\n", out)
	_, errs, code = lovia("", "approve", gated, "c1", "--reject")
	require.Equal(t, ExitOK, code, "the same decision again is a retry: %s", errs)
	_, errs, code = lovia("", "approve", gated, "c1")
	require.Equal(t, ExitFailure, code)
	require.Contains(t, errs, "was already decided: rejected; this decision (approved) was not applied")
	out, _, code = lovia("", "approve", gated, "c1", "--json")
	require.Equal(t, ExitFailure, code)
	require.Contains(t, out, `"accepted": false`)
}

// A schedule's fires: listed by lovia runs list --schedule, described
// with their schedule metadata.
func TestRunsOfASchedule(t *testing.T) {
	url := startDev(t)
	env := getenv(map[string]string{"NATS_URL": url})
	ctx := context.Background()
	lovia := func(args ...string) (string, string, int) {
		var out, errb bytes.Buffer
		code := Main(ctx, args, strings.NewReader(""), &out, &errb, env)
		return out.String(), errb.String(), code
	}
	// The agents the fleet serves from its agents files are listed, the
	// registry being empty.
	out, errs, code := lovia("agents", "ls")
	require.Equal(t, ExitOK, code, errs)
	require.Regexp(t, `demo\s+workers\s+-\s+demo\s+calculator,time_now\s+2\n`, out)

	_, errs, code = lovia("schedule", "add", "tick", "--agent", "demo", "--input", "What is 2*3?", "--every", "1s")
	require.Equal(t, ExitOK, code, errs)
	_, errs, code = lovia("schedule", "add", "tick-2", "--agent", "demo", "--input", "What time is it?", "--every", "1h")
	require.Equal(t, ExitOK, code, errs)
	var list bus.RunsListReply
	deadline := time.Now().Add(60 * time.Second)
	for {
		out, errs, code := lovia("runs", "list", "--schedule", "tick", "--status", "completed", "--json")
		require.Equal(t, ExitOK, code, errs)
		require.NoError(t, json.Unmarshal([]byte(out), &list), out)
		if len(list.Runs) > 0 {
			break
		}
		require.True(t, time.Now().Before(deadline), "waiting for a completed fire of schedule tick: %s", out)
		time.Sleep(100 * time.Millisecond)
	}
	_, errs, code = lovia("schedule", "rm", "tick")
	require.Equal(t, ExitOK, code, errs)
	for _, r := range list.Runs {
		require.True(t, strings.HasPrefix(r.RunID, "sched-tick-"), r.RunID)
	}
	out, errs, code = lovia("runs", "describe", list.Runs[0].RunID)
	require.Equal(t, ExitOK, code, errs)
	require.Contains(t, out, "metadata  schedule=tick")
	out, errs, code = lovia("runs", "list", "--schedule", "tick-2")
	require.Equal(t, ExitOK, code, errs)
	require.Contains(t, out, "no runs match", "schedule tick-2 has not fired; tick's fires are not its")
	_, errs, code = lovia("runs", "list", "--schedule", "a.b")
	require.Equal(t, ExitUsage, code)
	require.Contains(t, errs, "schedule")
}
