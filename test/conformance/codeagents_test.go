// Package conformance checks that agents defined in Go behave on the fleet
// as they do in process: each scenario runs one agent definition with
// loop.Runner, and on a worker over NATS (catalog.FromAgents, a real
// embedded nats-server), and compares the two event sequences.
package conformance

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/internal/fleettest"
	"github.com/lovia-fleet/lovia/internal/leaktest"
	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/catalog"
	"github.com/lovia-fleet/lovia/pkg/client"
	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/loop/scripted"
	"github.com/lovia-fleet/lovia/pkg/worker"
)

func TestMain(m *testing.M) { leaktest.VerifyTestMain(m) }

// workerID is the fleet's only worker.
const workerID = "w1"

// recorder is what one instance of a scenario's agent saw: its provider,
// and what its guardrails and hooks recorded. The in-process agent and the
// fleet's are two instances of one definition (a scripted provider counts
// its attempts, so the two runs cannot share one).
type recorder struct {
	p *scripted.Provider

	mu       sync.Mutex
	hooked   []loop.Event // every event a catch-all hook saw
	typed    []string     // typed hooks' records
	ran      []int        // guardrails that ran
	sessions []string     // the session id hooks saw
	agents   []string     // the agent hooks saw
	deps     []any        // the Deps hooks saw
}

func (r *recorder) add(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f()
}

// deps is the value given to the in-process run (loop.WithDeps) and to
// the worker (worker.Config.Deps): the fleet promises that a code agent's
// run sees the worker's Deps where an in-process run sees its own.
type deps struct{ name string }

// outcome is one run of a scenario.
type outcome struct {
	events []loop.Event
	rec    *recorder
	res    *loop.RunResult // in process only
	err    error           // in process only
}

// scenario is one conformance scenario of lovia's semantics (§8), named
// after its number, run in process and on the fleet.
type scenario struct {
	name    string // "S<n>_<name>[/<case>]"
	agent   string // the agent's name (each scenario its own agent)
	input   string
	session string
	build   func(name string, rec *recorder) *loop.Agent
	// check, when set, checks what the scenario adds beyond the event
	// sequence, for each of the two runs.
	check func(t *testing.T, o *outcome)
}

type guardResult struct {
	Result int `json:"result"`
}

type timedResult struct {
	Result int       `json:"result"`
	At     time.Time `json:"at"`
}

type addIn struct {
	A int `json:"a"`
	B int `json:"b"`
}

func addTool() *loop.Tool {
	return loop.NewTool("add", "Add two integers.", func(_ context.Context, _ *loop.RunContext, in addIn) (int, error) {
		return in.A + in.B, nil
	})
}

// zeroRetry makes k attempts with no backoff.
func zeroRetry(k int) *loop.RetryPolicy {
	return &loop.RetryPolicy{MaxAttempts: k, Sleep: func(context.Context, time.Duration) error { return nil }}
}

func simple(steps ...scripted.Step) func(string, *recorder) *loop.Agent {
	return func(name string, rec *recorder) *loop.Agent {
		rec.p = scripted.New(steps)
		return &loop.Agent{Name: name, Provider: rec.p}
	}
}

func calls(n int) func(*testing.T, *outcome) {
	return func(t *testing.T, o *outcome) {
		require.Equal(t, n, o.rec.p.Calls(), "provider calls")
	}
}

var errBoom = errors.New("boom")

func banned(rec *recorder, i int) loop.InputGuardrail {
	return func(_ context.Context, _ *loop.RunContext, entries []loop.Entry) (string, error) {
		rec.add(func() { rec.ran = append(rec.ran, i) })
		for _, e := range entries {
			if e.Kind == loop.KindInput && strings.Contains(e.ContentText(), "banned") {
				return "banned word", nil
			}
		}
		return "", nil
	}
}

// guardrailScenarios are §8.6 (S40, S41), as pkg/loop's conformance
// tests run them.
func guardrailScenarios() []scenario {
	withInput := func(g func(rec *recorder) []loop.InputGuardrail, steps ...scripted.Step) func(string, *recorder) *loop.Agent {
		return func(name string, rec *recorder) *loop.Agent {
			a := simple(steps...)(name, rec)
			a.InputGuardrails = g(rec)
			return a
		}
	}
	verdict := func(rec *recorder, i int, v string, err error) loop.InputGuardrail {
		return func(context.Context, *loop.RunContext, []loop.Entry) (string, error) {
			rec.add(func() { rec.ran = append(rec.ran, i) })
			return v, err
		}
	}
	return []scenario{
		{name: "S40_input_guardrail_trip/trip", agent: "s40_trip", input: "this is banned input",
			build: withInput(func(rec *recorder) []loop.InputGuardrail { return []loop.InputGuardrail{banned(rec, 1)} }, scripted.Text("never")),
			check: calls(0)},
		// A guardrail's error without a message trips with the default wording.
		{name: "S40_input_guardrail_trip/trip_without_message", agent: "s40_nomsg", input: "anything",
			build: withInput(func(rec *recorder) []loop.InputGuardrail {
				return []loop.InputGuardrail{verdict(rec, 1, "", errors.New(""))}
			}, scripted.Text("never")),
			check: calls(0)},
		{name: "S40_input_guardrail_trip/error_trips_with_its_message", agent: "s40_error", input: "anything",
			build: withInput(func(rec *recorder) []loop.InputGuardrail {
				return []loop.InputGuardrail{verdict(rec, 1, "", errBoom)}
			}, scripted.Text("never")),
			check: calls(0)},
		{name: "S40_input_guardrail_trip/empty_verdict_passes", agent: "s40_pass", input: "a harmless input",
			build: withInput(func(rec *recorder) []loop.InputGuardrail { return []loop.InputGuardrail{banned(rec, 1)} }, scripted.Text("fine")),
			check: calls(1)},
		{name: "S40_input_guardrail_trip/first_violation_wins", agent: "s40_first", input: "hi",
			build: withInput(func(rec *recorder) []loop.InputGuardrail {
				return []loop.InputGuardrail{verdict(rec, 1, "", nil), verdict(rec, 2, "second says no", nil), verdict(rec, 3, "third says no", nil)}
			}, scripted.Text("never")),
			check: func(t *testing.T, o *outcome) {
				require.Equal(t, []int{1, 2}, o.rec.ran, "the third guardrail never runs")
				calls(0)(t, o)
			}},
		{name: "S41_output_guardrail_trip", agent: "s41", input: "q",
			build: func(name string, rec *recorder) *loop.Agent {
				a := simple(scripted.Text("answer without source"))(name, rec)
				a.OutputGuardrails = []loop.OutputGuardrail{func(_ context.Context, _ *loop.RunContext, out any) (string, error) {
					if s, _ := out.(string); !strings.Contains(s, "[src]") {
						return "missing citation", nil
					}
					return "", nil
				}}
				return a
			},
			check: calls(1)},
	}
}

// outputScenarios are §8.7 (S43, S44): a Go output type (loop.OutputFor),
// an invalid reply, the repair turn, success or failure.
func outputScenarios() []scenario {
	typed := func(repair loop.RepairPolicy, steps ...scripted.Step) func(string, *recorder) *loop.Agent {
		return func(name string, rec *recorder) *loop.Agent {
			a := simple(steps...)(name, rec)
			a.Output = loop.OutputFor[guardResult]()
			a.OutputRepair = repair
			return a
		}
	}
	return []scenario{
		{name: "S43_repair_succeeds", agent: "s43", input: "compute",
			build: typed(nil, scripted.Text("not even close to JSON"), scripted.Text(`{"result": 7}`)),
			check: func(t *testing.T, o *outcome) {
				calls(2)(t, o)
				// The repair prompt ends the second request, in both runs.
				reqs := o.rec.p.Requests()
				last := reqs[1].Entries[len(reqs[1].Entries)-1]
				require.Equal(t, loop.RoleUser, last.Role)
				require.Contains(t, last.ContentText(), "could not be parsed")
				rc := o.events[len(o.events)-1].(*loop.RunCompleted)
				if o.res != nil {
					// In process the output is the Go value; on the wire
					// it is its JSON (RC's rendering compares the two).
					require.Equal(t, guardResult{Result: 7}, o.res.Output)
					require.Equal(t, guardResult{Result: 7}, rc.Output)
				} else {
					// Off the wire a JSON-like value (a msgpack body gives
					// int64 where JSON gives float64): the same JSON.
					require.IsType(t, map[string]any{}, rc.Output)
					require.JSONEq(t, `{"result":7}`, jsonOf(t, rc.Output))
				}
			}},
		// A Go output type whose field marshals itself (time.Time, a
		// json.Marshaler): on the wire and in the record, its JSON.
		{name: "S43_repair_succeeds/go_type_with_time", agent: "s43_time", input: "when",
			build: func(name string, rec *recorder) *loop.Agent {
				a := simple(scripted.Text("soon"), scripted.Text(`{"result": 7, "at": "2026-01-02T03:04:05Z"}`))(name, rec)
				a.Output = loop.OutputFor[timedResult]()
				return a
			},
			check: func(t *testing.T, o *outcome) {
				calls(2)(t, o)
				rc := o.events[len(o.events)-1].(*loop.RunCompleted)
				require.JSONEq(t, `{"result":7,"at":"2026-01-02T03:04:05Z"}`, jsonOf(t, rc.Output))
			}},
		{name: "S44_repair_exhausted/default_repair", agent: "s44_default", input: "compute",
			build: typed(nil, scripted.Text("bad"), scripted.Text("still bad"), scripted.Text("never")),
			check: calls(2)},
		{name: "S44_repair_exhausted/no_repair", agent: "s44_norepair", input: "compute",
			build: typed(loop.NoRepair, scripted.Text("bad")),
			check: calls(1)},
	}
}

// retryScenarios are §8.10 (S58, S59, S61, S62): a provider that fails
// retryably N times (scripted FailTimes, optionally after streaming a
// partial reply), under the agent's own retry policy (Agent.Retry: the
// worker sets none of its own).
func retryScenarios() []scenario {
	retrying := func(policy *loop.RetryPolicy, step scripted.Step) func(string, *recorder) *loop.Agent {
		return func(name string, rec *recorder) *loop.Agent {
			a := simple(step)(name, rec)
			a.Retry = policy
			return a
		}
	}
	noRestart := zeroRetry(3)
	noRestart.NoRestartOnPartial = true
	return []scenario{
		{name: "S58_transient_then_success", agent: "s58", input: "hi",
			build: retrying(zeroRetry(5), scripted.Step{Text: "ok", FailTimes: 2}), check: calls(3)},
		{name: "S59_output_discarded", agent: "s59", input: "hi",
			build: retrying(zeroRetry(3), scripted.Step{Text: "final answer", FailTimes: 1, Partial: "partial-"}), check: calls(2)},
		{name: "S61_no_restart_on_partial", agent: "s61", input: "hi",
			build: retrying(noRestart, scripted.Step{Text: "final answer", FailTimes: 1, Partial: "partial-"}), check: calls(1)},
		{name: "S62_exhaustion", agent: "s62", input: "hi",
			build: retrying(zeroRetry(3), scripted.Step{Text: "never", FailTimes: 1000, Partial: "partial-"}), check: calls(3)},
	}
}

// hookScenarios are §8.13's S85 on S2's script: a catch-all hook sees
// every event in order, RS and RC included; typed hooks record the tool's
// start and end; a hook that panics is logged and the run completes;
// hooks get the live run context (session, agent, Deps).
//
// Where the fleet differs: a hook is a Go closure, and its state lives in
// the process of the worker that ran the claim. A run resumed on another
// worker runs the hooks there, so one process's hook sees only the events
// of the claims it ran (and sees loop.RunStarted, never run_resumed,
// which a worker publishes on its own). Here one worker, in this process,
// runs the whole run: its hook must see exactly the published events.
func hookScenarios() []scenario {
	return []scenario{
		{name: hooksScenario, agent: "s85", input: "add", session: "u1",
			build: func(name string, rec *recorder) *loop.Agent {
				a := simple(scripted.CallTool("add", map[string]int{"a": 2, "b": 3}, "c1"), scripted.Text("The answer is 5."))(name, rec)
				a.Tools = []*loop.Tool{addTool()}
				h := loop.NewHooks()
				h.On(func(_ context.Context, _ *loop.RunContext, ev loop.Event) {
					rec.add(func() { rec.typed = append(rec.typed, "start:"+ev.(*loop.ToolCallStarted).Call.Name) })
				}, loop.EventToolCallStarted)
				h.On(func(_ context.Context, _ *loop.RunContext, ev loop.Event) {
					rec.add(func() { rec.typed = append(rec.typed, "end:"+ev.(*loop.ToolCallCompleted).Call.Name) })
				}, loop.EventToolCallCompleted)
				h.OnAny(func(_ context.Context, rc *loop.RunContext, ev loop.Event) {
					rec.add(func() {
						rec.hooked = append(rec.hooked, ev)
						rec.sessions = append(rec.sessions, rc.SessionID)
						rec.agents = append(rec.agents, rc.Agent().Name)
						rec.deps = append(rec.deps, rc.Deps)
					})
				})
				h.On(func(context.Context, *loop.RunContext, loop.Event) { panic("hook exploded") }, loop.EventTurnStarted)
				a.Hooks = h
				return a
			},
			check: func(t *testing.T, o *outcome) {
				calls(2)(t, o)
				require.Equal(t, sig(t, o.events), sig(t, o.rec.hooked), "the catch-all hook saw every event, in order")
				require.Equal(t, loop.EventRunStarted, o.rec.hooked[0].Type())
				require.Equal(t, loop.EventRunCompleted, o.rec.hooked[len(o.rec.hooked)-1].Type())
				require.Equal(t, []string{"start:add", "end:add"}, o.rec.typed)
				for i := range o.rec.hooked {
					require.Equal(t, "u1", o.rec.sessions[i], "event %d", i)
					require.Equal(t, "s85", o.rec.agents[i], "event %d", i)
					require.Same(t, theDeps, o.rec.deps[i], "event %d: the hook sees the run's Deps", i)
				}
			}},
	}
}

const hooksScenario = "S85_hooks"

var theDeps = &deps{name: "shared"}

// syncBuffer is a log sink safe across goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// variant is one way the fleet carries a run's events.
type variant struct {
	name string
	// encoding is the client's (of the submission, so of the run's events).
	encoding bus.Encoding
	// coalesce is the worker's CoalesceDeltas: consecutive deltas may
	// arrive as fewer events, with the same concatenation (sig compares
	// the concatenations, so the sequences must still be equal).
	coalesce time.Duration
}

var variants = []variant{
	{name: "json", encoding: bus.JSON},
	{name: "msgpack_coalesced", encoding: bus.Msgpack, coalesce: 20 * time.Millisecond},
}

// TestCodeAgentConformance runs each scenario's agent in process and on a
// worker of a real fleet, and requires the same event sequence (sig: the
// types, turns and key fields), the same terminal outcome in the run
// record (and, for a completed run, in a replay of it), and the
// scenario's own checks for both runs. The fleet runs once with JSON
// events, once with msgpack events and coalesced deltas.
func TestCodeAgentConformance(t *testing.T) {
	var scs []scenario
	for _, g := range [][]scenario{guardrailScenarios(), outputScenarios(), retryScenarios(), hookScenarios()} {
		scs = append(scs, g...)
	}
	var hooksRan atomic.Bool // (-run may leave S85 out)
	procLogs := &syncBuffer{}
	runner := loop.NewRunner(loop.RunnerConfig{Logger: slog.New(slog.NewTextHandler(procLogs, nil))})
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			fleetRecs := map[string]*recorder{}
			var agents []*loop.Agent
			for _, sc := range scs {
				rec := &recorder{}
				fleetRecs[sc.name] = rec
				agents = append(agents, sc.build(sc.agent, rec))
			}
			cat, err := catalog.FromAgents(agents, catalog.CodeSettings{})
			require.NoError(t, err)
			fleetLogs := &syncBuffer{}
			f := fleettest.Start(t, fleettest.Options{Catalog: cat, Workers: 1, Worker: func(c *worker.Config) {
				c.Deps = theDeps
				c.CoalesceDeltas = v.coalesce
				c.Logger = slog.New(slog.NewTextHandler(fleetLogs, nil))
			}})
			require.Equal(t, workerID, f.Workers[0].ID())
			cl, err := client.New(f.Conn, client.Options{Encoding: v.encoding})
			require.NoError(t, err)
			for _, sc := range scs {
				t.Run(sc.name, func(t *testing.T) {
					t.Parallel()
					if sc.name == hooksScenario {
						hooksRan.Store(true)
					}
					proc := runInProcess(t, runner, sc)
					fleet := runOnFleet(t, f, cl, sc, fleetRecs[sc.name])
					require.Equal(t, sig(t, proc.events), sig(t, fleet.events), "in process (expected) and on the fleet (actual)")
					// The in-process run's error is the terminal event's.
					switch last := proc.events[len(proc.events)-1].(type) {
					case *loop.RunFailed:
						require.Nil(t, proc.res)
						require.Equal(t, last.Error, loop.Describe(proc.err))
					case *loop.RunCompleted:
						require.NoError(t, proc.err)
					}
					if sc.check != nil {
						t.Run("in_process", func(t *testing.T) { sc.check(t, proc) })
						t.Run("fleet", func(t *testing.T) { sc.check(t, fleet) })
					}
				})
			}
			t.Cleanup(func() {
				// S85's panicking hook is logged on the worker.
				if !t.Failed() && hooksRan.Load() {
					require.Contains(t, fleetLogs.String(), "hook exploded")
				}
			})
		})
	}
	// ... and in process.
	if hooksRan.Load() {
		require.Contains(t, procLogs.String(), "hook exploded")
	}
}

func runInProcess(t *testing.T, runner *loop.Runner, sc scenario) *outcome {
	t.Helper()
	rec := &recorder{}
	a := sc.build(sc.agent, rec)
	opts := []loop.RunOption{loop.WithDeps(theDeps)}
	if sc.session != "" {
		opts = append(opts, loop.WithSession(loop.NewMemorySession(), sc.session))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h := runner.Stream(ctx, a, []loop.Entry{loop.UserText(sc.input)}, opts...)
	o := &outcome{rec: rec}
	for ev := range h.Events() {
		o.events = append(o.events, ev)
	}
	o.res, o.err = h.Result()
	requireOneTerminal(t, o.events)
	return o
}

// runOnFleet submits the scenario's run to the fleet, tails it to its
// terminal event, and checks that the run record's status says what the
// terminal event says.
func runOnFleet(t *testing.T, f *fleettest.Fleet, cl *client.Client, sc scenario, rec *recorder) *outcome {
	t.Helper()
	ctx := context.Background()
	rep, err := cl.Submit(ctx, &bus.RunRequest{Agent: sc.agent, Input: bus.TextInput(sc.input), SessionID: sc.session})
	require.NoError(t, err)
	envs := tail(t, cl, rep.RunID, 30*time.Second)
	o := &outcome{rec: rec, events: wireEvents(t, envs, workerID)}
	requireOneTerminal(t, o.events)

	// The record settles after the terminal event: wait for it to.
	var st *bus.StatusReply
	deadline := time.Now().Add(15 * time.Second)
	for {
		st, err = f.Client.Status(ctx, rep.RunID)
		require.NoError(t, err)
		if st.Status == bus.StateCompleted || st.Status == bus.StateFailed || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	require.Equal(t, workerID, st.Worker)
	require.Equal(t, sc.agent, st.Agent)
	require.Equal(t, sc.session, st.SessionID)
	switch last := o.events[len(o.events)-1].(type) {
	case *loop.RunCompleted:
		require.Equal(t, bus.StateCompleted, st.Status, "the record of a run that ended run_completed")
		require.Nil(t, st.Error)
		require.NotNil(t, st.Result)
		assert.Equal(t, jsonOf(t, bus.ResultOf(last)), jsonOf(t, st.Result), "the record's result is the terminal event's")
		require.Equal(t, last.Turns, st.Turns)
		// S67: the resubmission of the completed run replays its result.
		again, err := cl.Submit(ctx, &bus.RunRequest{RunID: rep.RunID, Agent: sc.agent, Input: bus.TextInput(sc.input), SessionID: sc.session})
		require.NoError(t, err)
		require.True(t, again.Replayed, "the resubmission of a completed run is a replay")
		require.NotNil(t, again.Result)
		assert.Equal(t, jsonOf(t, bus.ResultOf(last)), jsonOf(t, again.Result), "the replay's result is the terminal event's")
	case *loop.RunFailed:
		require.Equal(t, bus.StateFailed, st.Status, "the record of a run that ended run_failed")
		require.NotNil(t, st.Error)
		require.Equal(t, last.Error, *st.Error, "the record's error is the terminal event's")
		require.Nil(t, st.Result)
	}
	return o
}

// tail reads a run from its first event to its terminal event (as
// fleettest's Events, failing the subtest, not the fleet's test).
func tail(t *testing.T, cl *client.Client, runID string, timeout time.Duration) []*bus.Envelope {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	tl, err := cl.Tail(ctx, runID, bus.FromStart())
	require.NoError(t, err)
	defer tl.Close(context.Background())
	var out []*bus.Envelope
	for env, err := range tl.All(ctx) {
		require.NoError(t, err, "tail %s after %d events %v", runID, len(out), fleettest.Types(out))
		out = append(out, env)
	}
	return out
}

func requireOneTerminal(t *testing.T, evs []loop.Event) {
	t.Helper()
	require.NotEmpty(t, evs)
	n := 0
	for _, ev := range evs {
		if loop.IsTerminal(ev) {
			n++
		}
	}
	require.Equal(t, 1, n, "exactly one terminal event")
	require.True(t, loop.IsTerminal(evs[len(evs)-1]), "the terminal event is last")
}
