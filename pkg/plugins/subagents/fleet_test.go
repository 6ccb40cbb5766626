package subagents_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/internal/fleettest"
	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/catalog"
	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/loop/scripted"
	"github.com/lovia-fleet/lovia/pkg/plugins/subagents"
	"github.com/lovia-fleet/lovia/pkg/tools"
	"github.com/lovia-fleet/lovia/pkg/worker"
)

const leadAgent = `
  - name: lead
    model: scripted
    plugins:
      subagents: {agents: [helper]}
    script:
      - call: {name: spawn_subagent, id: s1, args: {agent: helper, task: Count the files.}}
      - call: {name: wait_subagents, id: w1, args: {}}
      - text: The helper reported.
`

const helperAgent = `
  - name: helper
    model: scripted
    tools: [echo]
    script:
      - call: {name: echo, id: e1, args: {text: counting}}
      - text: There are 7 files.
`

// TestChildIsAFleetRun: worker 1 serves only the parent's agent and worker
// 2 only the child's, so the child — a run of the fleet with its own run
// id — is claimed by the other worker. Its report reaches the parent through the parent's mailbox and
// is in the parent's next model request.
func TestChildIsAFleetRun(t *testing.T) {
	f := fleettest.Start(t, fleettest.Options{AgentsYAML: "agents:" + leadAgent + helperAgent, Workers: -1})
	ts, err := tools.Builtin(tools.Config{Workspace: t.TempDir()})
	require.NoError(t, err)
	models := map[string]*scripted.Provider{}
	for id, yaml := range map[string]string{"w1": leadAgent, "w2": helperAgent} {
		nc := f.Connect()
		js, err := jetstream.New(nc)
		require.NoError(t, err)
		cat, err := catalog.Parse([]byte("agents:"+yaml), catalog.Options{Tools: ts, Plugins: catalog.PluginStores{JetStream: js}})
		require.NoError(t, err)
		if lead, ok := cat.Get("lead"); ok {
			models[id] = lead.Provider.(*scripted.Provider)
		}
		f.StartWorker(worker.Config{Conn: nc, Catalog: cat, ID: id, SkipProvision: true})
	}
	ctx := context.Background()
	rep, err := f.Client.Submit(ctx, &bus.RunRequest{Agent: "lead", Input: bus.TextInput("How many files?")})
	require.NoError(t, err)
	envs := f.Events(rep.RunID, 60*time.Second)
	require.Equal(t, loop.EventRunCompleted, envs[len(envs)-1].Type, "%v", fleettest.Types(envs))
	parentWorker := workerOf(t, envs)
	require.Equal(t, "w1", parentWorker)

	var childID string
	for _, e := range fleettest.OfType(envs, loop.EventToolCallCompleted) {
		done := fleettest.Event[*loop.ToolCallCompleted](t, e)
		if done.Call.Name == subagents.SpawnTool {
			require.False(t, done.IsError, done.Output)
			childID = strings.Fields(done.Output)[1]
			// The parent's event names the child in its result: the
			// edge of the run tree a UI draws.
			require.Equal(t, map[string]any{"run_id": childID, "agent": "helper", "events_subject": "lovia.events." + childID}, done.Result)
		}
	}
	require.Equal(t, subagents.ChildRunID(rep.RunID, "s1"), childID)
	child := f.Events(childID, 30*time.Second)
	require.Equal(t, loop.EventRunCompleted, child[len(child)-1].Type)
	require.Equal(t, "w2", workerOf(t, child), "the child ran on the other worker")
	// The child names its parent in its run_started and its status; the
	// parent names none.
	require.Equal(t, rep.RunID, fleettest.Event[*bus.RunStarted](t, fleettest.OfType(child, loop.EventRunStarted)[0]).ParentRunID)
	require.Empty(t, fleettest.Event[*bus.RunStarted](t, fleettest.OfType(envs, loop.EventRunStarted)[0]).ParentRunID)
	st, err := f.Client.Status(ctx, childID)
	require.NoError(t, err)
	require.Equal(t, bus.RunState("completed"), st.Status)
	require.Equal(t, rep.RunID, st.ParentRunID)
	pst, err := f.Client.Status(ctx, rep.RunID)
	require.NoError(t, err)
	require.Empty(t, pst.ParentRunID)

	// The report came in through the mailbox: a user_message_injected
	// event, and the parent's last model request holds it as input.
	injected := fleettest.OfType(envs, loop.EventUserMessageInjected)
	require.Len(t, injected, 1)
	reqs := models[parentWorker].Requests()
	last := reqs[len(reqs)-1].Entries
	var report string
	for _, e := range last {
		if e.Kind == loop.KindInput && strings.HasPrefix(e.ContentText(), "<subagent_report") {
			report = e.ContentText()
		}
	}
	require.Equal(t, `<subagent_report run_id="`+childID+`" agent="helper" status="completed">`+"\nThere are 7 files.\n</subagent_report>", report)
	for _, e := range last {
		if e.Kind == loop.KindToolResult && e.Name == subagents.WaitTool {
			require.Equal(t, "1 subagent(s) ended; their reports follow as messages.", e.Output)
		}
	}
}

func workerOf(t *testing.T, envs []*bus.Envelope) string {
	t.Helper()
	for _, e := range envs {
		if e.Type == loop.EventRunStarted {
			return fleettest.Event[*bus.RunStarted](t, e).Worker
		}
	}
	t.Fatalf("no run_started in %v", fleettest.Types(envs))
	return ""
}

const gatedHelper = `
  - name: helper
    model: scripted
    tools: [echo]
    approval: [echo]
    script:
      - call: {name: echo, id: e1, args: {text: counting}}
      - text: There are 7 files.
`

// TestReportAfterTheParentMovedWorkers: the parent waits for a child that
// waits for an approval; the parent's worker stops (its run is released at
// its checkpoint) and a new worker resumes the parent. The child is then
// approved and ends: the new worker, which never saw the spawn, delivers
// the report to the parent's mailbox.
func TestReportAfterTheParentMovedWorkers(t *testing.T) {
	f := fleettest.Start(t, fleettest.Options{AgentsYAML: "agents:" + leadAgent + gatedHelper, Workers: -1})
	ts, err := tools.Builtin(tools.Config{Workspace: t.TempDir()})
	require.NoError(t, err)
	start := func(id, yaml string) (*worker.Worker, *scripted.Provider) {
		nc := f.Connect()
		js, err := jetstream.New(nc)
		require.NoError(t, err)
		cat, err := catalog.Parse([]byte("agents:"+yaml), catalog.Options{Tools: ts, Plugins: catalog.PluginStores{JetStream: js}})
		require.NoError(t, err)
		var model *scripted.Provider
		if lead, ok := cat.Get("lead"); ok {
			model = lead.Provider.(*scripted.Provider)
		}
		return f.StartWorker(worker.Config{Conn: nc, Catalog: cat, ID: id, SkipProvision: true, ShutdownGrace: 50 * time.Millisecond}), model
	}
	w1, _ := start("w1", leadAgent)
	start("w2", gatedHelper)
	ctx := context.Background()
	rep, err := f.Client.Submit(ctx, &bus.RunRequest{Agent: "lead", Input: bus.TextInput("How many files?")})
	require.NoError(t, err)

	// Wait until the parent is inside wait_subagents and the child asks
	// for its approval.
	tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	tail, err := f.Client.Tail(tctx, rep.RunID, bus.FromStart())
	require.NoError(t, err)
	var childID string
	for env, err := range tail.All(tctx) {
		require.NoError(t, err, "waiting for the parent's wait_subagents call")
		if env.Type == loop.EventToolCallCompleted {
			if done := fleettest.Event[*loop.ToolCallCompleted](t, env); done.Call.Name == subagents.SpawnTool {
				childID = strings.Fields(done.Output)[1]
			}
		}
		if env.Type == loop.EventToolCallStarted && fleettest.Event[*loop.ToolCallStarted](t, env).Call.Name == subagents.WaitTool {
			break
		}
	}
	require.NoError(t, tail.Close(ctx))
	require.NotEmpty(t, childID)
	ctail, err := f.Client.Tail(tctx, childID, bus.FromStart())
	require.NoError(t, err)
	for env, err := range ctail.All(tctx) {
		require.NoError(t, err, "waiting for the child's approval_required")
		if env.Type == loop.EventApprovalRequired {
			break
		}
	}
	require.NoError(t, ctail.Close(ctx))

	stopCtx, stop := context.WithTimeout(ctx, 15*time.Second)
	require.NoError(t, w1.Stop(stopCtx))
	stop()
	// The parent was released inside wait_subagents, its watcher tailing
	// the child: the plugin's Close at the run's end stopped the watcher
	// and waited for it, so none is left once Stop returns.
	require.Empty(t, watchers(), "w1's subagent watcher outlived its Stop")
	_, model3 := start("w3", leadAgent)
	_, err = f.Client.Approve(ctx, childID, "e1", loop.Approve, "")
	require.NoError(t, err)

	envs := f.Events(rep.RunID, 60*time.Second)
	require.Equal(t, loop.EventRunCompleted, envs[len(envs)-1].Type, "%v", fleettest.Types(envs))
	resumed := fleettest.OfType(envs, bus.EventRunResumed)
	require.NotEmpty(t, resumed, "%v", fleettest.Types(envs))
	require.Equal(t, "w3", fleettest.Event[*bus.RunResumed](t, resumed[len(resumed)-1]).Worker)
	reqs := model3.Requests()
	require.NotEmpty(t, reqs, "w3 ran the parent's last turns")
	var reports []string
	for _, e := range reqs[len(reqs)-1].Entries {
		if e.Kind == loop.KindInput && strings.HasPrefix(e.ContentText(), "<subagent_report") {
			reports = append(reports, e.ContentText())
		}
	}
	require.Equal(t, []string{`<subagent_report run_id="` + childID + `" agent="helper" status="completed">` + "\nThere are 7 files.\n</subagent_report>"}, reports, "one report")
	require.Len(t, fleettest.OfType(envs, loop.EventUserMessageInjected), 1)
}

// A run reaches only its own children and the allowed agents; both are
// refused before anything is sent to the fleet.
func TestOnlyOwnChildrenAndAllowedAgents(t *testing.T) {
	f := fleettest.Start(t, fleettest.Options{AgentsYAML: "agents:" + leadAgent + helperAgent, Workers: -1})
	p, err := subagents.New(subagents.Config{Fleet: f.Client, Agents: []string{"helper"}})
	require.NoError(t, err)
	rc := &loop.RunContext{RunID: "parent-1"}
	byName := map[string]*loop.Tool{}
	for _, tl := range p.Tools() {
		byName[tl.Name] = tl
	}
	ctx := context.Background()
	_, err = byName[subagents.SpawnTool].Func(ctx, rc, []byte(`{"agent":"lead","task":"x"}`))
	require.ErrorContains(t, err, `agent "lead" cannot run as a subagent here (allowed: helper)`)
	_, err = byName[subagents.SendTool].Func(ctx, rc, []byte(`{"run_id":"someone-else","message":"hi"}`))
	require.ErrorContains(t, err, "someone-else is not a subagent of this run: this run has started no subagents: call spawn_subagent first", "not an empty list")
	_, err = byName[subagents.CancelTool].Func(ctx, rc, []byte(`{"run_id":"someone-else"}`))
	require.ErrorContains(t, err, "someone-else is not a subagent of this run")
	_, err = byName[subagents.WaitTool].Func(ctx, rc, []byte(`{}`))
	require.ErrorContains(t, err, "this run has started no subagents: call spawn_subagent first")
	_, err = subagents.New(subagents.Config{Fleet: f.Client})
	require.ErrorContains(t, err, "Config.Agents must name the agents")
}

// A spawn_subagent call that runs again — its parent resumed from a
// checkpoint that holds the call but not its result, as after a crash —
// submits the same child run, which the fleet deduplicates: the parent
// gets the same child, and the child ran once.
func TestSpawnRunAgainStartsNoSecondChild(t *testing.T) {
	f := fleettest.Start(t, fleettest.Options{AgentsYAML: "agents:" + helperAgent})
	p, err := subagents.New(subagents.Config{Fleet: f.Client, Agents: []string{"helper"}})
	require.NoError(t, err)
	t.Cleanup(p.Stop)
	ctx := context.Background()
	runner := loop.NewRunner(loop.RunnerConfig{})
	spawn := `{"agent":"helper","task":"Count the files."}`
	spawned := func(res *loop.RunResult) string {
		for _, e := range res.Entries {
			if e.Kind == loop.KindToolResult && e.Name == subagents.SpawnTool {
				require.False(t, e.IsError, e.Output)
				return strings.Fields(e.Output)[1]
			}
		}
		t.Fatal("no spawn_subagent result")
		return ""
	}

	cp := loop.NewMemoryCheckpointer()
	model := scripted.New([]scripted.Step{{Calls: []scripted.Call{{ID: "s1", Name: subagents.SpawnTool, Raw: spawn, UseRaw: true}}}, scripted.Text("started")})
	res, err := runner.Run(ctx, &loop.Agent{Name: "lead", Provider: model, Plugins: []loop.Plugin{p}}, []loop.Entry{loop.UserText("go")}, loop.WithCheckpoint(cp, "parent-1"))
	require.NoError(t, err)
	first := spawned(res)
	require.Equal(t, subagents.ChildRunID("parent-1", "s1"), first)
	child := f.Events(first, 30*time.Second)
	require.Equal(t, loop.EventRunCompleted, child[len(child)-1].Type)

	// The same parent, resumed elsewhere with the call dangling.
	cp2 := loop.NewMemoryCheckpointer()
	_, err = cp2.Append(ctx, "parent-1", loop.CheckpointWrite{
		Entries: []loop.Entry{loop.UserText("go"), loop.ToolCallEntry("s1", subagents.SpawnTool, spawn)},
		Head:    loop.RunHead{Agent: "lead", Turns: 1, Status: loop.StatusRunning},
	})
	require.NoError(t, err)
	model2 := scripted.New([]scripted.Step{{Text: "unused"}, scripted.Text("started")})
	res, err = runner.Run(ctx, &loop.Agent{Name: "lead", Provider: model2, Plugins: []loop.Plugin{p}}, nil, loop.WithCheckpoint(cp2, "parent-1"))
	require.NoError(t, err)
	require.Equal(t, first, spawned(res), "the call run again names the same child")
	child = f.Events(first, 30*time.Second)
	require.Len(t, fleettest.OfType(child, loop.EventRunStarted), 1, "the child ran once: %v", fleettest.Types(child))
	require.Len(t, fleettest.OfType(child, loop.EventRunCompleted), 1)
}
