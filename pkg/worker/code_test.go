package worker_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/internal/fleettest"
	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/catalog"
	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/loop/scripted"
	"github.com/lovia-fleet/lovia/pkg/worker"
)

// orderStore is a code agent's dependency: given once to the worker
// (Config.Deps), read by its Go tool through RunContext.Deps.
type orderStore struct {
	status map[string]string
	reads  atomic.Int32
}

type lookupIn struct {
	Order string `json:"order"`
}

type orderAnswer struct {
	Order  string `json:"order"`
	Status string `json:"status"`
}

// codeAgents are a triage agent handing off to a billing agent (both code
// agents: the catalog collects billing through the handoff), whose Go
// tool reads the order store from Deps, whose output is an orderAnswer
// checked by an output guardrail; and a gated agent whose Go tool needs
// an approval.
func codeAgents(t *testing.T, answer string) *catalog.Catalog {
	t.Helper()
	lookup := loop.NewTool("lookup_order", "look an order up", func(_ context.Context, rc *loop.RunContext, in lookupIn) (string, error) {
		st := rc.Deps.(*orderStore)
		st.reads.Add(1)
		s, ok := st.status[in.Order]
		if !ok {
			return "", &loop.ToolError{Message: "no such order"}
		}
		return s, nil
	})
	billing := &loop.Agent{
		Name: "billing", Instructions: "Answer about orders.",
		Provider: scripted.New([]scripted.Step{
			scripted.CallTool("lookup_order", lookupIn{Order: "A1"}, "c1"),
			scripted.Text(answer),
		}, scripted.ForAgent("billing")),
		Tools:  []*loop.Tool{lookup},
		Output: loop.OutputFor[orderAnswer](),
		OutputGuardrails: []loop.OutputGuardrail{func(_ context.Context, _ *loop.RunContext, out any) (string, error) {
			if out.(orderAnswer).Status == "" {
				return "an answer needs the order's status", nil
			}
			return "", nil
		}},
	}
	triage := &loop.Agent{
		Name: "triage", Instructions: "Route the customer.",
		Provider: scripted.New([]scripted.Step{scripted.CallTool(loop.HandoffToolName("billing"), map[string]string{"reason": "order"}, "h1")},
			scripted.ForAgent("triage")),
		Handoffs: []loop.Handoff{loop.HandoffTo(billing)},
	}
	ship := loop.NewTool("ship", "ship an order", func(_ context.Context, rc *loop.RunContext, in lookupIn) (string, error) {
		rc.Deps.(*orderStore).reads.Add(1)
		return "shipped " + in.Order, nil
	}, loop.RequireApproval())
	gated := &loop.Agent{
		Name: "gated_code", Model: "",
		Provider: scripted.New([]scripted.Step{scripted.CallTool("ship", lookupIn{Order: "A1"}, "c1"), scripted.Text("done")},
			scripted.ForAgent("gated_code")),
		Tools: []*loop.Tool{ship},
	}
	cat, err := catalog.FromAgents([]*loop.Agent{triage, gated}, catalog.CodeSettings{})
	require.NoError(t, err)
	return cat
}

func codeFleet(t *testing.T, answer string, deps *orderStore) *fleettest.Fleet {
	return fleettest.Start(t, fleettest.Options{Catalog: codeAgents(t, answer), Workers: 2,
		Worker: func(c *worker.Config) { c.Deps = deps; c.ParkAfter = 200 * time.Millisecond }})
}

// TestCodeAgentsOnTheFleet: a worker serves agents defined in Go: the run
// of triage hands off to billing (collected from the handoff, served),
// whose Go tool reads the worker's Deps, and ends with the typed output
// its guardrail passed.
func TestCodeAgentsOnTheFleet(t *testing.T) {
	t.Parallel()
	deps := &orderStore{status: map[string]string{"A1": "shipped"}}
	f := codeFleet(t, `{"order":"A1","status":"shipped"}`, deps)
	rep, err := f.Client.Submit(context.Background(), &bus.RunRequest{Agent: "triage", Input: bus.TextInput("where is A1?")})
	require.NoError(t, err)
	envs := f.Events(rep.RunID, 15*time.Second)
	checkOneSubmission(t, rep.RunID, envs)
	last := envs[len(envs)-1]
	require.Equal(t, loop.EventRunCompleted, last.Type, "%v", fleettest.Types(envs))
	out, err := json.Marshal(fleettest.Event[*loop.RunCompleted](t, last).Output)
	require.NoError(t, err)
	require.JSONEq(t, `{"order":"A1","status":"shipped"}`, string(out))
	require.Len(t, fleettest.OfType(envs, loop.EventHandoffOccurred), 1, "%v", fleettest.Types(envs))
	require.Equal(t, int32(1), deps.reads.Load(), "the Go tool read the worker's Deps once")
}

// TestCodeAgentOutputGuardrail: the guardrail of a code agent trips on
// the fleet: the run fails GuardrailTripped.
func TestCodeAgentOutputGuardrail(t *testing.T) {
	t.Parallel()
	deps := &orderStore{status: map[string]string{"A1": "shipped"}}
	f := codeFleet(t, `{"order":"A1","status":""}`, deps)
	rep, err := f.Client.Submit(context.Background(), &bus.RunRequest{Agent: "triage", Input: bus.TextInput("where is A1?")})
	require.NoError(t, err)
	envs := f.Events(rep.RunID, 15*time.Second)
	last := envs[len(envs)-1]
	require.Equal(t, loop.EventRunFailed, last.Type, "%v", fleettest.Types(envs))
	info := fleettest.Event[*loop.RunFailed](t, last).Error
	require.Equal(t, "GuardrailTripped", info.Type)
	require.Contains(t, info.Message, "needs the order's status")
}

// TestCodeAgentParkedApproval: a code agent's Go tool that needs an
// approval parks the run off the worker; the decision resumes it on a
// worker, the tool runs once, with the Deps.
func TestCodeAgentParkedApproval(t *testing.T) {
	t.Parallel()
	deps := &orderStore{}
	f := codeFleet(t, "{}", deps)
	runID := submitParked(t, f, "gated_code")
	ar, err := f.Client.Approve(context.Background(), runID, "c1", loop.Approve, "go")
	require.NoError(t, err)
	require.True(t, ar.Accepted)
	envs := f.Events(runID, 15*time.Second)
	checkOneSubmission(t, runID, envs)
	require.Len(t, fleettest.OfType(envs, bus.EventRunResumed), 1, "%v", fleettest.Types(envs))
	require.Equal(t, "done", fleettest.Event[*loop.RunCompleted](t, envs[len(envs)-1]).Output)
	require.Equal(t, int32(1), deps.reads.Load(), "the approved tool ran once")
}

// TestCodeAgentsListed: the agents list gives the code agents with their
// Go tools' schemas and handoffs, and the fleet view names them.
func TestCodeAgentsListed(t *testing.T) {
	t.Parallel()
	f := codeFleet(t, "{}", &orderStore{})
	rep, err := f.Client.Agents(context.Background())
	require.NoError(t, err)
	byName := map[string]bus.AgentInfo{}
	for _, a := range rep.Agents {
		byName[a.Name] = a
	}
	require.Contains(t, byName, "billing", "the handoff target is served")
	require.Equal(t, []string{"billing"}, byName["triage"].Handoffs)
	require.Equal(t, []string{"lookup_order"}, byName["billing"].Tools)
	require.Len(t, byName["billing"].Schemas, 1)
	require.Contains(t, string(byName["billing"].Schemas[0].Parameters), `"order"`)
	require.ElementsMatch(t, []string{"billing", "gated_code", "triage"}, f.Workers[0].Agents())
}

// TestCodeAgentDefinedTwice: two agents of one name (in code, or in code
// and an agents file) are an error naming the agent.
func TestCodeAgentDefinedTwice(t *testing.T) {
	t.Parallel()
	p := scripted.New([]scripted.Step{scripted.Text("ok")})
	_, err := catalog.FromAgents([]*loop.Agent{{Name: "twin", Provider: p}, {Name: "twin", Provider: p}}, catalog.CodeSettings{})
	require.ErrorContains(t, err, `agent "twin" is defined twice`)
	code, err := catalog.FromAgents([]*loop.Agent{{Name: "quick", Provider: p}}, catalog.CodeSettings{})
	require.NoError(t, err)
	file, err := catalog.Parse([]byte("agents:\n  - {name: quick, model: scripted, script: [{text: ok}]}\n"), catalog.Options{})
	require.NoError(t, err)
	_, err = catalog.Merge(file, code)
	require.ErrorContains(t, err, `agent "quick" (the agents file and a code agent) defined twice`)
	_, err = catalog.FromAgents([]*loop.Agent{{Name: "nomodel"}}, catalog.CodeSettings{})
	require.ErrorContains(t, err, "set Agent.Provider or Agent.Model")
}
