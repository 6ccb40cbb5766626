package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/bus"
)

// lovia runs list and lovia runs describe against a lovia dev fleet: the
// table, the filters, the next-page hint, JSON, a gated run listed as
// awaiting with the command that decides it, and the errors a user can
// cause.
func TestRunsCommands(t *testing.T) {
	agents := writeGatedAgents(t)
	url := startDev(t, "--agents", agents)
	env := getenv(map[string]string{"NATS_URL": url})
	ctx := context.Background()
	lovia := func(args ...string) (string, string, int) {
		var out, errb bytes.Buffer
		code := Main(ctx, args, strings.NewReader(""), &out, &errb, env)
		return out.String(), errb.String(), code
	}

	// Bad input is refused before connecting, with what to give.
	_, errs, code := lovia("runs", "list", "--status", "done")
	require.Equal(t, ExitUsage, code)
	require.Contains(t, errs, "known statuses: queued, running, parked, completed, failed")
	_, errs, code = lovia("runs", "list", "--since", "yesterday")
	require.Equal(t, ExitUsage, code)
	require.Contains(t, errs, "neither an RFC 3339 time")
	_, errs, code = lovia("runs", "frob")
	require.Equal(t, ExitUsage, code)
	require.Contains(t, errs, "use list or describe")
	_, errs, code = lovia("runs", "describe")
	require.Equal(t, ExitUsage, code)
	require.Contains(t, errs, "lovia runs describe RUN_ID")

	out, errs, code := lovia("runs", "list")
	require.Equal(t, ExitOK, code, errs)
	require.Contains(t, out, "no runs match")

	// A gated run waits for its approval: listed as awaiting, described
	// with the command that decides it.
	out, errs, code = lovia("submit", "--agent", "gated", "go")
	require.Equal(t, ExitOK, code, errs)
	gated := strings.TrimSpace(out)
	var list bus.RunsListReply
	deadline := time.Now().Add(60 * time.Second)
	for {
		out, errs, code = lovia("runs", "list", "--awaiting", "--json")
		require.Equal(t, ExitOK, code, errs)
		require.NoError(t, json.Unmarshal([]byte(out), &list), out)
		if len(list.Runs) == 1 && list.Runs[0].Awaiting != nil && list.Runs[0].Awaiting.Tool != "" {
			break
		}
		require.True(t, time.Now().Before(deadline), "waiting for the gated run to be listed as awaiting: %s", out)
		time.Sleep(50 * time.Millisecond)
	}
	require.Equal(t, gated, list.Runs[0].RunID)
	out, errs, code = lovia("runs", "list", "--awaiting")
	require.Equal(t, ExitOK, code, errs)
	require.Contains(t, out, "RUN")
	require.Contains(t, out, gated)
	require.Contains(t, out, "approval of echo (call c1)")
	require.Contains(t, out, "running 1")
	out, errs, code = lovia("runs", "describe", gated)
	require.Equal(t, ExitOK, code, errs)
	require.Contains(t, out, "awaiting")
	require.Contains(t, out, "lovia approve "+gated+" c1")
	require.Contains(t, out, "history:")
	require.Contains(t, out, "claim")

	_, errs, code = lovia("approve", gated, "c1")
	require.Equal(t, ExitOK, code, errs)
	deadline = time.Now().Add(60 * time.Second)
	for {
		out, errs, code = lovia("runs", "list", "--status", "completed")
		require.Equal(t, ExitOK, code, errs)
		if strings.Contains(out, gated) {
			break
		}
		require.True(t, time.Now().Before(deadline), "waiting for the gated run to complete: %s", out)
		time.Sleep(50 * time.Millisecond)
	}

	// Pages: a second run, one per page, and the hint names the cursor.
	_, errs, code = lovia("run", "--agent", "gated", "again")
	require.NotEqual(t, ExitUsage, code, errs) // it waits on the terminal's empty answer: a rejection
	out, errs, code = lovia("runs", "list", "--agent", "gated", "--limit", "1")
	require.Equal(t, ExitOK, code, errs)
	require.NotContains(t, out, gated, "the newest run comes first")
	require.Contains(t, errs, "more runs: add --cursor ")
	cursor := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(errs), "more runs: add --cursor "))
	out, errs, code = lovia("runs", "list", "--agent", "gated", "--limit", "1", "--cursor", cursor)
	require.Equal(t, ExitOK, code, errs)
	require.Contains(t, out, gated)
	require.NotContains(t, errs, "more runs")

	_, errs, code = lovia("runs", "describe", "no-such-run")
	require.Equal(t, ExitFailure, code)
	require.Contains(t, errs, "run no-such-run not found")
	require.Contains(t, errs, "lovia runs list")
}
