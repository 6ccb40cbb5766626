package subagents_test

import (
	"bytes"
	"context"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/internal/fleettest"
	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/catalog"
	"github.com/lovia-fleet/lovia/pkg/client"
	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/loop/scripted"
	"github.com/lovia-fleet/lovia/pkg/plugins/subagents"
	"github.com/lovia-fleet/lovia/pkg/store"
	"github.com/lovia-fleet/lovia/pkg/tools"
	"github.com/lovia-fleet/lovia/pkg/worker"
)

// holdingLead spawns a child, waits for its report, then holds on an
// approval, so a second delivery of the report has a turn to land in.
const holdingLead = `
  - name: lead
    model: scripted
    tools: [echo]
    approval: [echo]
    plugins:
      subagents: {agents: [helper]}
    script:
      - call: {name: spawn_subagent, id: s1, args: {agent: helper, task: Count the files.}}
      - call: {name: wait_subagents, id: w1, args: {}}
      - call: {name: echo, id: g1, args: {text: hold}}
      - text: The helper reported.
`

// syncBuffer is a log sink the watchers write to from their goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestReportDeliveredTwiceAppearsOnce: the parent's worker delivers the
// child's report and folds it in; then a second watcher — another
// process's plugin re-running the parent's wait, as the worker that takes
// a parent over does — delivers the same report again, and the test
// injects it a third time with the report's key. The parent's transcript
// holds the report once.
func TestReportDeliveredTwiceAppearsOnce(t *testing.T) {
	f := fleettest.Start(t, fleettest.Options{AgentsYAML: "agents:" + holdingLead + helperAgent, Workers: -1})
	ts, err := tools.Builtin(tools.Config{Workspace: t.TempDir()})
	require.NoError(t, err)
	var model *scripted.Provider
	for id, yaml := range map[string]string{"w1": holdingLead, "w2": helperAgent} {
		nc := f.Connect()
		js, err := jetstream.New(nc)
		require.NoError(t, err)
		cat, err := catalog.Parse([]byte("agents:"+yaml), catalog.Options{Tools: ts, Plugins: catalog.PluginStores{JetStream: js}})
		require.NoError(t, err)
		if lead, ok := cat.Get("lead"); ok {
			model = lead.Provider.(*scripted.Provider)
		}
		f.StartWorker(worker.Config{Conn: nc, Catalog: cat, ID: id, SkipProvision: true})
	}
	ctx := context.Background()
	rep, err := f.Client.Submit(ctx, &bus.RunRequest{Agent: "lead", Input: bus.TextInput("How many files?")})
	require.NoError(t, err)
	childID := subagents.ChildRunID(rep.RunID, "s1")

	// The parent folded the first delivery and holds on g1's approval.
	tctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	tail, err := f.Client.Tail(tctx, rep.RunID, bus.FromStart())
	require.NoError(t, err)
	for env, err := range tail.All(tctx) {
		require.NoError(t, err, "waiting for the parent's approval_required (g1)")
		if env.Type == loop.EventApprovalRequired {
			break
		}
	}
	require.NoError(t, tail.Close(ctx))

	// A second watcher, on its own connection, runs the parent's wait
	// again from a transcript holding the spawn.
	other, err := client.New(f.Connect(), client.Options{})
	require.NoError(t, err)
	var logs syncBuffer
	p2, err := subagents.New(subagents.Config{Fleet: other, Agents: []string{"helper"}, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	require.NoError(t, err)
	t.Cleanup(p2.Stop)
	cp := loop.NewMemoryCheckpointer()
	_, err = cp.Append(ctx, rep.RunID, loop.CheckpointWrite{
		Entries: []loop.Entry{
			loop.UserText("How many files?"),
			loop.ToolCallEntry("s1", subagents.SpawnTool, `{"agent":"helper","task":"Count the files."}`),
			loop.ToolResultEntry("s1", subagents.SpawnTool, subagents.Spawned{RunID: childID, Agent: "helper"}.String(), false),
		},
		Head: loop.RunHead{Agent: "lead", Turns: 1, Status: loop.StatusRunning},
	})
	require.NoError(t, err)
	again := scripted.New([]scripted.Step{{Calls: []scripted.Call{{ID: "w9", Name: subagents.WaitTool, Raw: `{}`, UseRaw: true}}}, scripted.Text("reported")})
	res, err := loop.NewRunner(loop.RunnerConfig{}).Run(ctx, &loop.Agent{Name: "lead", Provider: again, Plugins: []loop.Plugin{p2}}, nil, loop.WithCheckpoint(cp, rep.RunID))
	require.NoError(t, err)
	for _, e := range res.Entries {
		if e.Kind == loop.KindToolResult && e.Name == subagents.WaitTool {
			require.Equal(t, "1 subagent(s) ended; their reports follow as messages.", e.Output)
		}
	}
	require.NotContains(t, logs.String(), "not delivered", "the second watcher's inject was answered")
	// A third delivery, straight through the API, answers the same token.
	child := f.Events(childID, 30*time.Second)
	tok, err := f.Client.Inject(ctx, rep.RunID, subagents.Report(childID, child[len(child)-1]), bus.InjectKey(subagents.ReportKey(childID)))
	require.NoError(t, err)
	require.Equal(t, store.KeyToken("subagent:"+childID), tok)

	_, err = f.Client.Approve(ctx, rep.RunID, "g1", loop.Approve, "")
	require.NoError(t, err)
	envs := f.Events(rep.RunID, 60*time.Second)
	require.Equal(t, loop.EventRunCompleted, envs[len(envs)-1].Type, "%v", fleettest.Types(envs))
	require.Len(t, fleettest.OfType(envs, loop.EventUserMessageInjected), 1, "%v", fleettest.Types(envs))
	reqs := model.Requests()
	var reports int
	for _, e := range reqs[len(reqs)-1].Entries {
		if e.Kind == loop.KindInput && strings.HasPrefix(e.ContentText(), "<subagent_report") {
			reports++
		}
	}
	require.Equal(t, 1, reports, "the parent's last model request holds the report once")
}

// watchers returns the stacks of the goroutines inside a subagents
// watcher's delivery.
func watchers() []string {
	buf := make([]byte, 8<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "plugins/subagents.(*Plugin).deliver") {
			out = append(out, g)
		}
	}
	return out
}
