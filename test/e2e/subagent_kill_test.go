package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/internal/fleettest"
	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/client"
	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/plugins/subagents"
)

const subagentLead = `
agents:
  - name: lead
    model: scripted
    plugins:
      subagents: {agents: [helper]}
    script:
      - call: {name: spawn_subagent, id: s1, args: {agent: helper, task: Count the files.}}
      - call: {name: wait_subagents, id: w1}
      - text: The helper reported.
`

const subagentHelper = `
agents:
  - name: helper
    model: scripted
    tools: [echo]
    approval: [echo]
    approval_timeout: 10m
    script:
      - call: {name: echo, id: e1, args: {text: counting}}
      - text: There are 7 files.
`

// TestSubagentReportOutlivesParentWorker (issue 12 acceptance: subagents):
// the parent runs on one `lovia worker` process, its child — a run of the
// fleet — on a second one (each serves one of the two agents). While the
// parent waits in wait_subagents and the child waits for an approval, the
// parent's worker is killed with SIGKILL. Only then is the child approved:
// it ends on its worker, and its report reaches the parent's mailbox,
// delivered by the third worker that took the parent over. The parent
// completes there with the report folded in as an injected message (never
// as a tool result), once, and parent and child name each other on the
// wire.
func TestSubagentReportOutlivesParentWorker(t *testing.T) {
	srv, nc, _ := startNATS(t)
	ctx := context.Background()
	dir := t.TempDir()
	leadFile, helperFile := filepath.Join(dir, "lead.yaml"), filepath.Join(dir, "helper.yaml")
	require.NoError(t, os.WriteFile(leadFile, []byte(subagentLead), 0o644))
	require.NoError(t, os.WriteFile(helperFile, []byte(subagentHelper), 0o644))
	workspace := t.TempDir()

	victim := startWorker(t, srv.ClientURL(), leadFile, workspace, "victim")
	startWorker(t, srv.ClientURL(), helperFile, workspace, "child-worker")
	c, err := client.New(nc, client.Options{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		list, err := c.Agents(ctx)
		if err != nil {
			return false
		}
		served := map[string]bool{}
		for _, a := range list.Agents {
			served[a.Name] = true
		}
		return served["lead"] && served["helper"]
	}, 30*time.Second, 50*time.Millisecond, "waiting for both workers to announce lead and helper")

	rep, err := c.Submit(ctx, &bus.RunRequest{Agent: "lead", Input: bus.TextInput("How many files?")})
	require.NoError(t, err)
	childID := subagents.ChildRunID(rep.RunID, "s1")

	// The parent is inside wait_subagents on the victim, and the child
	// waits for its approval on the other worker.
	tctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	waitFor(t, tctx, c, rep.RunID, "the parent's wait_subagents call", func(env *bus.Envelope) bool {
		return env.Type == loop.EventToolCallStarted && fleettest.Event[*loop.ToolCallStarted](t, env).Call.Name == subagents.WaitTool
	})
	waitFor(t, tctx, c, childID, "the child's approval_required", func(env *bus.Envelope) bool {
		return env.Type == loop.EventApprovalRequired
	})

	// The survivor comes up, then the parent's worker dies.
	survivor := startWorker(t, srv.ClientURL(), leadFile, workspace, "survivor")
	require.Eventually(t, func() bool { return strings.Contains(survivor.output(), "serving agents") },
		30*time.Second, 20*time.Millisecond, "waiting for the survivor to serve lead")
	require.NoError(t, victim.cmd.Process.Signal(syscall.SIGKILL))
	_, _ = victim.cmd.Process.Wait()

	// The child ends only now, after the kill. An approval is sent once
	// (its effect may have happened when its reply is lost); right after
	// the kill, under load, a try can reach the dead worker's API and get
	// no reply: then the child's events say whether it was applied before
	// it is sent again.
	deadline := time.Now().Add(60 * time.Second)
	for {
		actx, acancel := context.WithTimeout(ctx, 10*time.Second)
		ar, err := c.Approve(actx, childID, "e1", loop.Approve, "")
		acancel()
		if err == nil {
			require.True(t, ar.Accepted || ar.Decision == loop.Approve, "the child's approval: %+v", ar)
			break
		}
		if sawEvent(ctx, c, childID, loop.EventApprovalResolved) {
			break // the try whose reply was lost was applied
		}
		require.ErrorIs(t, err, context.DeadlineExceeded, "approving the child")
		require.True(t, time.Now().Before(deadline), "approving the child for 60s: %v", err)
	}

	envs := completedRun(t, c, rep.RunID, "parent")
	child := completedRun(t, c, childID, "child")
	require.Equal(t, "child-worker", fleettest.Event[*bus.RunStarted](t, child[0]).Worker, "the child ran on the second worker")
	require.Equal(t, "victim", fleettest.Event[*bus.RunStarted](t, envs[0]).Worker)
	resumed := fleettest.OfType(envs, bus.EventRunResumed)
	require.NotEmpty(t, resumed, "%v", fleettest.Types(envs))
	require.Equal(t, "survivor", fleettest.Event[*bus.RunResumed](t, resumed[len(resumed)-1]).Worker)

	// The report came in through the mailbox, once, after the wait
	// returned and before the last model turn; no tool result holds it.
	report := `<subagent_report run_id="` + childID + `" agent="helper" status="completed">` + "\nThere are 7 files.\n</subagent_report>"
	injected := fleettest.OfType(envs, loop.EventUserMessageInjected)
	require.Len(t, injected, 1, "%v", fleettest.Types(envs))
	require.Equal(t, report, fleettest.Event[*loop.UserMessageInjected](t, injected[0]).Content)
	var waitDone *bus.Envelope
	for _, env := range fleettest.OfType(envs, loop.EventToolCallCompleted) {
		done := fleettest.Event[*loop.ToolCallCompleted](t, env)
		require.NotContains(t, done.Output, "<subagent_report", "a report never arrives as a tool result")
		if done.Call.Name == subagents.WaitTool {
			waitDone = env
			require.Equal(t, "1 subagent(s) ended; their reports follow as messages.", done.Output)
		}
	}
	require.NotNil(t, waitDone)
	require.Greater(t, injected[0].Seq, waitDone.Seq)
	last := envs[len(envs)-1]
	require.Equal(t, "The helper reported.", fleettest.Event[*loop.RunCompleted](t, last).Output)

	// Parent and child name each other.
	require.Equal(t, rep.RunID, fleettest.Event[*bus.RunStarted](t, child[0]).ParentRunID)
	st, err := c.Status(ctx, childID)
	require.NoError(t, err)
	require.Equal(t, rep.RunID, st.ParentRunID)
}

// waitFor tails a run from its start until an event satisfies ok.
func waitFor(t *testing.T, ctx context.Context, c *client.Client, runID, what string, ok func(*bus.Envelope) bool) {
	t.Helper()
	tail, err := c.Tail(ctx, runID, bus.FromStart())
	require.NoError(t, err, "waiting for %s", what)
	defer func() { _ = tail.Close(context.Background()) }()
	for env, err := range tail.All(ctx) {
		require.NoError(t, err, "waiting for %s", what)
		if ok(env) {
			return
		}
	}
	t.Fatalf("run %s ended before %s", runID, what)
}

// sawEvent reports whether the run's events so far include one of type
// typ (it reads them for at most 3 s).
func sawEvent(ctx context.Context, c *client.Client, runID string, typ loop.EventType) bool {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	tail, err := c.Tail(ctx, runID, bus.FromStart())
	if err != nil {
		return false
	}
	defer func() { _ = tail.Close(context.Background()) }()
	for env, err := range tail.All(ctx) {
		if err != nil {
			return false
		}
		if env.Type == typ {
			return true
		}
	}
	return false
}
