package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/loop"
)

var goldenNow = time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)

// The human views of lovia status, session show and runs describe: what
// a person reads (the output, the metadata, the hint), not the raw reply.
func TestHumanOutput(t *testing.T) {
	t.Parallel()
	reason := "stop"
	t.Run("status of a completed run", func(t *testing.T) {
		var b bytes.Buffer
		printStatus(&b, &bus.StatusReply{RunID: "r1", Agent: "demo", SessionID: "s1", Status: bus.StateCompleted, Attempt: 1, Turns: 2,
			Result: &bus.StoredResult{Output: "12*7 is 84.\nAnything else?", Usage: loop.Usage{InputTokens: 30, OutputTokens: 12, TotalTokens: 42}, Turns: 2, FinishReason: &reason}})
		golden(t, "status-completed", b.String())
	})
	t.Run("status of a failed run", func(t *testing.T) {
		var b bytes.Buffer
		printStatus(&b, &bus.StatusReply{RunID: "r2", Agent: "nobody", Status: bus.StateFailed, Attempt: 1,
			Error: &loop.ErrorInfo{Type: "UnknownAgent", Message: `agent "nobody" is not defined`, Hint: "lovia agents ls lists the agents"}})
		golden(t, "status-failed", b.String())
	})
	t.Run("status of a parked run", func(t *testing.T) {
		var b bytes.Buffer
		printStatus(&b, &bus.StatusReply{RunID: "r3", Agent: "gated", Status: bus.StateRunning, Worker: "dev-1", Attempt: 1, Turns: 1,
			Awaiting: &bus.Awaiting{CallID: "c1", Deadline: goldenNow.Add(time.Hour)}})
		golden(t, "status-awaiting", b.String())
	})
	t.Run("session", func(t *testing.T) {
		var b bytes.Buffer
		printSession(&b, &bus.SessionReply{SessionID: "s1", Segments: []loop.Segment{{
			RunID: "r1",
			Entries: []loop.Entry{
				{Kind: loop.KindInput, Role: loop.RoleUser, Content: "What is 12*7?"},
				{Kind: loop.KindToolCall, CallID: "c1", Name: "calculator", Arguments: `{"expression":"12*7"}`},
				{Kind: loop.KindToolResult, CallID: "c1", Name: "calculator", Output: "84"},
				{Kind: loop.KindAssistantText, Text: "12*7 is 84."},
			},
			Meta: map[string]any{"context_state": map[string]any{"internal": true}},
		}, {
			RunID:   "r2",
			Entries: []loop.Entry{{Kind: loop.KindInput, Role: loop.RoleUser, Content: "rm -rf /"}, {Kind: loop.KindToolResult, Name: "shell", Output: "not approved", IsError: true}},
		}}})
		require.NotContains(t, b.String(), "context_state")
		golden(t, "session", b.String())
		b.Reset()
		printSession(&b, &bus.SessionReply{SessionID: "empty"})
		require.Equal(t, "session empty is empty (no run has completed in it)\n", b.String())
	})
	t.Run("describe a scheduled fire", func(t *testing.T) {
		var b bytes.Buffer
		d := &bus.RunDescription{
			RunSummary: bus.RunSummary{RunID: "sched-ping-1796284800", Agent: "demo", Status: bus.StateCompleted, Attempt: 1, Turns: 1,
				CreatedAt: goldenNow.Add(-90 * time.Second), StartedAt: goldenNow.Add(-89 * time.Second), FinishedAt: goldenNow.Add(-88 * time.Second)},
			DurationMS: 1000, Submissions: 1, Metadata: map[string]any{"schedule": "ping", "n": 3.0},
			Result:   &bus.StoredResult{Output: map[string]any{"answer": 84.0}},
			Attempts: []bus.RunStep{{N: 1, Kind: "claim", Attempt: 1, Worker: "dev-1", At: goldenNow.Add(-89 * time.Second)}},
		}
		printDescription(&b, d, goldenNow)
		golden(t, "describe-scheduled", b.String())
	})
	t.Run("describe a run cancelled before any worker started it", func(t *testing.T) {
		var b bytes.Buffer
		printDescription(&b, &bus.RunDescription{
			RunSummary: bus.RunSummary{RunID: "noagent-1", Agent: "nosuchagent", Status: bus.StateFailed,
				CreatedAt: goldenNow.Add(-11 * time.Second), FinishedAt: goldenNow},
			Submissions: 1,
		}, goldenNow)
		require.Contains(t, b.String(), "duration  - (no worker started it)\n", "a run that never started has no duration, not 0s")
	})
	t.Run("a decision without a reason", func(t *testing.T) {
		var out bytes.Buffer
		r := &renderer{w: &out, errw: &out}
		r.render(&loop.ApprovalResolved{CallID: "c1", Decision: loop.Reject})
		require.Equal(t, "  rejected\n", out.String())
		out.Reset()
		r.render(&loop.ApprovalResolved{CallID: "c1", Decision: loop.Approve, Reason: "fine"})
		require.Equal(t, "  approved (fine)\n", out.String())
	})
}

// -h is help, not a usage error; the help states each default once;
// flags may come before the command; runs describe without an id says
// so without the listing's flags.
func TestHelpAndGlobalFlags(t *testing.T) {
	t.Parallel()
	lovia := func(env map[string]string, args ...string) (string, string, int) {
		var out, errb bytes.Buffer
		code := Main(context.Background(), args, strings.NewReader(""), &out, &errb, getenv(env))
		return out.String(), errb.String(), code
	}
	_, errs, code := lovia(map[string]string{"NATS_URL": "nats://nats.example:4222"}, "run", "-h")
	require.Equal(t, ExitOK, code, errs)
	require.NotContains(t, errs, `(default "nats://nats.example:4222")`)
	golden(t, "run-help", errs)
	_, _, code = lovia(nil, "runs", "--help")
	require.Equal(t, ExitOK, code)

	// The flags before the command are the command's.
	_, errs, code = lovia(nil, "--prefix", "acme", "--nats", "nats://127.0.0.1:1", "workers")
	require.Equal(t, ExitFailure, code, errs)
	require.Contains(t, errs, "cannot connect to NATS at nats://127.0.0.1:1")
	_, errs, code = lovia(nil, "--json", "workers", "--nats", "nats://127.0.0.1:1")
	require.Equal(t, ExitFailure, code, errs)
	require.Contains(t, errs, "cannot connect to NATS")
	_, errs, code = lovia(nil, "--nats", "nats://127.0.0.1:1")
	require.Equal(t, ExitUsage, code)
	require.Contains(t, errs, "name a command")
	// --log-format json, before the command or after, makes a one-shot
	// command's errors JSON lines, as a worker's logs.
	_, errs, code = lovia(nil, "--log-format", "json", "workers", "--nats", "nats://127.0.0.1:1")
	require.Equal(t, ExitFailure, code, errs)
	lines := jsonLines(t, errs)
	require.Len(t, lines, 1, errs)
	require.Equal(t, "ERROR", lines[0]["level"])
	require.Contains(t, lines[0]["msg"], "lovia: cannot connect to NATS")
	_, errs, code = lovia(nil, "status", "--log-format=yaml", "r1")
	require.Equal(t, ExitUsage, code)
	require.Contains(t, errs, `--log-format "yaml": use text or json`)

	// A usage error says what is wrong and how to call the command, not
	// every flag.
	_, errs, code = lovia(nil, "runs", "list", "--schedule", "a b")
	require.Equal(t, ExitUsage, code)
	require.Contains(t, errs, "(lovia runs -h lists the flags)")
	require.NotContains(t, errs, "-tls-cert")

	_, errs, code = lovia(nil, "runs", "describe")
	require.Equal(t, ExitUsage, code)
	require.Contains(t, errs, "lovia runs describe RUN_ID")
	require.NotContains(t, errs, "--awaiting", "describe's usage, not the listing's")
}

// lovia run and submit refuse bad input before connecting, saying what
// to give.
func TestSubmitFlagsRefused(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args  []string
		stdin string
		want  string
	}{
		{[]string{"submit", "--metadata", "user_id", "hi"}, "", "want key=value (or key:=JSON)"},
		{[]string{"submit", "--metadata", "n:={bad", "hi"}, "", "is not JSON"},
		{[]string{"submit", "--run-id", "r1", "--if-run-exists", "replace", "hi"}, "", `--if-run-exists "replace" is not resume, restart, fail or resume_only`},
		{[]string{"run", "--if-run-exists", "fail", "hi"}, "", "add --run-id"},
		{[]string{"run", "--run-id", "a.b", "hi"}, "", "--run-id"},
		{[]string{"run", "-"}, "  \n", "the input is empty"},
		{[]string{"submit", "--input-file", "/nonexistent/in.txt"}, "", "--input-file: open /nonexistent/in.txt"},
		{[]string{"submit", "--input-file", "-", "extra"}, "", "not both"},
		{[]string{"run"}, "", "give it as arguments, - to read stdin, or --input-file FILE"},
	} {
		var out, errb bytes.Buffer
		code := Main(context.Background(), append(c.args, "--nats", "nats://127.0.0.1:1"), strings.NewReader(c.stdin), &out, &errb, getenv(nil))
		require.Equal(t, ExitUsage, code, "%v: %s", c.args, errb.String())
		require.Contains(t, errb.String(), c.want, "%v", c.args)
	}
}
