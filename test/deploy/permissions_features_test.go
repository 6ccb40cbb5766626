package deploy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/internal/cli"
	"github.com/lovia-fleet/lovia/internal/fleettest"
	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/client"
	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/toolsvc"
)

// registryAgentsYAML are the agents the operator applies to the registry:
// planner uses every plugin (todo, skills from the object store, memory,
// subagents) and a deduplicated tool service's tool; helper is the
// subagent, and the agent a schedule fires.
const registryAgentsYAML = `agents:
  - name: planner
    model: scripted
    tools: [gosvc__append]
    plugins:
      todo: {}
      skills: {}
      memory: {}
      subagents: {agents: [helper]}
    script:
      - call: {name: todo_write, id: p1, args: {todos: [{content: Ship it, status: in_progress}]}}
      - call: {name: load_skill, id: p2, args: {name: release}}
      - call: {name: remember, id: p3, args: {text: Releases are tagged first.}}
      - call: {name: gosvc__append, id: p4, args: {line: shipped}}
      - call: {name: spawn_subagent, id: p5, args: {agent: helper, task: Check the tag.}}
      - call: {name: wait_subagents, id: p6, args: {}}
      - text: planned
  - name: helper
    model: scripted
    tools: [echo]
    script:
      - call: {name: echo, id: h1, args: {text: checked}}
      - text: checked
`

// checkFeaturesUnderRoles runs what the plugins, the agents registry,
// schedules and tool services need under the roles of permissions.conf:
// the operator pushes skills, applies the registry and adds a schedule
// (through the lovia commands, which work on JetStream directly, and
// through the API); a tool service with the call-id dedupe serves under
// the tools user; a worker serving the registry runs an agent that calls
// every plugin and the service; the schedule's fire runs; the operator
// reads the memory the run wrote; the gateway's and the worker's users do
// the registry and schedule writes their API serves. No call fails and the
// server reports no violation.
func checkFeaturesUnderRoles(t *testing.T, ctx context.Context, userURL func(string) string, log *violationLog, c *client.Client, agents string) {
	t.Helper()
	dir := t.TempDir()
	op := func(args ...string) string {
		t.Helper()
		return runAs(t, ctx, userURL("operator"), log, args...)
	}

	// Skills and the registry, by the operator.
	skill := filepath.Join(dir, "skills", "release", "SKILL.md")
	require.NoError(t, os.MkdirAll(filepath.Dir(skill), 0o755))
	require.NoError(t, os.WriteFile(skill, []byte("---\nname: release\ndescription: How to cut a release.\n---\nTag, then build.\n"), 0o600))
	require.Contains(t, op("skills", "push", filepath.Join(dir, "skills")), "pushed 1 skill(s) to lovia_skills")
	require.Contains(t, op("skills", "ls"), "release")
	op("agents", "apply", agents)
	require.Contains(t, op("agents", "ls"), "planner")

	// A tool service with the call-id dedupe under a user that may not
	// use its bucket fails to start, saying what to check.
	wrong, err := toolsvc.New(toolsvc.Config{Conn: connectAs(t, userURL("submitter")), Name: "gosvc", Tools: []*loop.Tool{loop.NewTool("noop", "Nothing.", func(context.Context, *loop.RunContext, struct{}) (string, error) { return "", nil })}, Dedupe: &toolsvc.Dedupe{}})
	require.NoError(t, err)
	short, cancelShort := context.WithTimeout(ctx, 2*time.Second)
	err = wrong.Start(short)
	cancelShort()
	require.ErrorContains(t, err, "a refused permission shows as a Violation in the server log", "a tool service under the submitter user")
	log.waitViolation(t, ctx, "submitter", "$JS.API.INFO")
	log.forget("/user:submitter")

	// A tool service with the call-id dedupe, under the tools user.
	var mu sync.Mutex
	var lines []string
	appendLine := loop.NewTool("append", "Append a line.", func(_ context.Context, _ *loop.RunContext, in struct {
		Line string `json:"line"`
	}) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		lines = append(lines, in.Line)
		return "appended " + in.Line, nil
	})
	svc, err := toolsvc.New(toolsvc.Config{Conn: connectAs(t, userURL("tools")), Name: "gosvc", Tools: []*loop.Tool{appendLine}, Dedupe: &toolsvc.Dedupe{}})
	require.NoError(t, err)
	require.NoError(t, svc.Start(ctx), "the tool service starts under the tools user (it binds lovia_tool_calls)")
	t.Cleanup(func() { _ = svc.Stop(context.Background()) })
	waitFor(t, ctx, "the operator's lovia tools to list the tool service", func() error {
		if out := op("tools"); !strings.Contains(out, "gosvc__append") {
			return fmt.Errorf("lovia tools:\n%s", out)
		}
		return nil
	})

	// A worker serving the registry (seeded from the same file: a worker
	// writes the registry too) runs the planner.
	startCommand(t, "lovia worker ", "worker", "--nats", userURL("worker"), "--id", "w2", "--workspace", t.TempDir(), "--registry", "--agents", agents)
	runID := bus.NewRunID()
	waitFor(t, ctx, "a worker to serve the registry's planner", func() error {
		_, err := c.Submit(ctx, &bus.RunRequest{RunID: runID, Agent: "planner", SessionID: "team", Input: bus.TextInput("plan the release")})
		return err
	})
	envs := tailToEnd(t, ctx, c, runID)
	requireCleanRun(t, envs, "planner")
	require.Len(t, toolResults(t, envs), 6, "the planner's calls")
	mu.Lock()
	require.Equal(t, []string{"shipped"}, lines, "the tool service's calls")
	mu.Unlock()

	// The operator reads the note the run remembered.
	require.Contains(t, op("memory", "show", "session:team"), "Releases are tagged first.")

	// A schedule, added by the operator, fires a run of helper.
	at := time.Now().Add(5 * time.Second).UTC().Truncate(time.Second)
	op("schedule", "add", "tick", "--agent", "helper", "--input", "check", "--at", at.Format(time.RFC3339))
	require.Contains(t, op("schedule", "ls"), "tick")
	var fired string
	waitFor(t, ctx, "the schedule's fire to run helper to its end", func() error {
		page, err := c.ListRuns(ctx, &bus.RunsListRequest{Agent: "helper"})
		if err != nil {
			return err
		}
		for _, r := range page.Runs {
			if strings.HasPrefix(r.RunID, "sched-tick-") && r.Status == bus.StateCompleted {
				fired = r.RunID
				return nil
			}
		}
		return fmt.Errorf("%d runs of helper, none a completed fire of tick", len(page.Runs))
	})
	requireCleanRun(t, tailToEnd(t, ctx, c, fired), "the schedule's fire")

	// The same through the API: whichever of the gateway and the workers
	// answers reads and writes the registry and the schedules.
	opc := connectAs(t, userURL("operator"))
	names, err := bus.NewNames("")
	require.NoError(t, err)
	api := func(subject string, body any) {
		t.Helper()
		b, err := json.Marshal(body)
		require.NoError(t, err)
		msg, err := opc.RequestWithContext(ctx, subject, b)
		require.NoError(t, err, "%s as the operator", subject)
		require.Empty(t, msg.Header.Get(bus.HeaderServiceError), "%s as the operator: %s", subject, msg.Data)
	}
	api(names.RegistryAPI(bus.OpRegistryApply), bus.RegistryApplyRequest{File: registryAgentsYAML})
	api(names.RegistryAPI(bus.OpRegistryList), struct{}{})
	op("schedule", "add", "nightly", "--agent", "helper", "--input", "check", "--every", "24h")
	op("schedule", "pause", "nightly")
	op("schedule", "resume", "nightly")
	api(names.ScheduleAPI(bus.OpScheduleList), struct{}{})
	api(names.ScheduleAPI(bus.OpScheduleRemove), map[string]string{"name": "nightly"})
	require.Contains(t, op("schedule", "ls"), "no schedules")

	// Whichever process answers the API does these writes under its own
	// user: the same commands under the gateway's and the worker's users
	// need no permission they lack (the gateway may purge a schedule,
	// not a stream of runs or events).
	for _, user := range []string{"gateway", "worker"} {
		as := func(args ...string) { t.Helper(); runAs(t, ctx, userURL(user), log, args...) }
		as("agents", "apply", agents)
		as("schedule", "add", "by-"+user, "--agent", "helper", "--input", "check", "--every", "24h")
		as("schedule", "pause", "by-"+user)
		as("schedule", "rm", "by-"+user)
	}

	require.Empty(t, log.violations(), "the fleet, its tool service and the operator ran into permissions they lack:\n%s", strings.Join(log.violations(), "\n"))
}

// requireCleanRun checks a run completed and none of its calls failed.
func requireCleanRun(t *testing.T, envs []*bus.Envelope, what string) {
	t.Helper()
	require.Equal(t, loop.EventRunCompleted, envs[len(envs)-1].Type, "%s: the last event", what)
	for _, r := range toolResults(t, envs) {
		require.False(t, r.IsError, "%s: call %s (%s) failed: %s", what, r.Call.ID, r.Call.Name, r.Output)
	}
}

// toolResults are a run's tool_call_completed events.
func toolResults(t *testing.T, envs []*bus.Envelope) []*loop.ToolCallCompleted {
	t.Helper()
	var out []*loop.ToolCallCompleted
	for _, e := range fleettest.OfType(envs, loop.EventToolCallCompleted) {
		out = append(out, fleettest.Event[*loop.ToolCallCompleted](t, e))
	}
	return out
}

// writeRegistryAgents writes registryAgentsYAML to a file.
func writeRegistryAgents(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "registry.yaml")
	require.NoError(t, os.WriteFile(path, []byte(registryAgentsYAML), 0o600))
	return path
}

// runAs runs a one-shot lovia command (its first argument the command)
// with the user's URL and requires it to succeed; it returns its output.
func runAs(t *testing.T, ctx context.Context, url string, log *violationLog, args ...string) string {
	t.Helper()
	args = append([]string{args[0], "--nats", url}, args[1:]...)
	code, out := runCommand(t, ctx, args...)
	require.Equal(t, cli.ExitOK, code, "lovia %s:\n%s\nviolations:\n%s", strings.Join(args, " "), out, strings.Join(log.violations(), "\n"))
	return out
}

// runCommand runs a one-shot lovia command to its end and returns its
// exit code and its output (stdout and stderr).
func runCommand(t *testing.T, ctx context.Context, args ...string) (int, string) {
	t.Helper()
	var out syncBuffer
	code := cli.Main(ctx, args, strings.NewReader(""), &out, &out, func(string) string { return "" })
	return code, out.String()
}
