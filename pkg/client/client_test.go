package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/internal/fleettest"
	"github.com/lovia-fleet/lovia/internal/leaktest"
	"github.com/lovia-fleet/lovia/pkg/broker"
	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/catalog"
	"github.com/lovia-fleet/lovia/pkg/client"
	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/service"
	"github.com/lovia-fleet/lovia/pkg/store"
	"github.com/lovia-fleet/lovia/pkg/tools"
	"github.com/lovia-fleet/lovia/pkg/worker"
)

func TestMain(m *testing.M) { leaktest.VerifyTestMain(m) }

// agents are the scripted agents of the tests: every run is deterministic
// and needs no model API.
const agents = `
agents:
  - name: calc
    model: scripted
    tools: [echo]
    script:
      - call: {name: echo, args: {text: "84"}, id: c1}
      - text: The answer is 84.
        finish: stop
  - name: gated
    model: scripted
    tools: [echo]
    approval: [echo]
    script:
      - call: {name: echo, args: {text: "ship it"}, id: c1}
      - text: done
  - name: sleeper
    model: scripted
    tools: [sleep]
    script:
      - call: {name: sleep, args: {ms: 60000}, id: s1}
      - text: woke up
  - name: napper
    model: scripted
    tools: [sleep]
    script:
      - call: {name: sleep, args: {ms: 1000}, id: s1}
      - text: rested
`

// calcTypes are the event types of a calc run.
var calcTypes = []string{"run_started", "turn_started", "message_completed", "tool_call_started", "tool_call_completed", "turn_ended",
	"turn_started", "text_delta", "text_delta", "text_delta", "text_delta", "message_completed", "turn_ended", "run_completed"}

// setup starts a fleet of one worker serving agents; runs still asleep at
// cleanup are cut short.
func setup(t *testing.T) *fleettest.Fleet {
	t.Helper()
	return fleettest.Start(t, fleettest.Options{AgentsYAML: agents, Workers: 1, Worker: func(c *worker.Config) {
		c.ShutdownGrace = 100 * time.Millisecond
	}})
}

// tailAll reads a run's events through c from the first to the terminal
// one.
func tailAll(t *testing.T, c *client.Client, runID string, opts ...bus.TailOption) []*bus.Envelope {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tail, err := c.Tail(ctx, runID, opts...)
	require.NoError(t, err)
	defer tail.Close(context.Background())
	var out []*bus.Envelope
	for env, err := range tail.All(ctx) {
		require.NoError(t, err, "tail %s after %v", runID, fleettest.Types(out))
		out = append(out, env)
	}
	return out
}

// waitEvent follows a run's events until one of type typ and returns it.
func waitEvent(t *testing.T, c *client.Client, runID string, typ loop.EventType) *bus.Envelope {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tail, err := c.Tail(ctx, runID, bus.FromStart(), bus.Follow())
	require.NoError(t, err)
	defer tail.Close(context.Background())
	var seen []string
	for {
		env, err := tail.Next(ctx)
		require.NoError(t, err, "run %s: waiting for %s after %v", runID, typ, seen)
		seen = append(seen, string(env.Type))
		if env.Type == typ {
			return env
		}
	}
}

// waitStatus waits until the run's status is want and returns it.
func waitStatus(t *testing.T, c *client.Client, runID string, want bus.RunState) *bus.StatusReply {
	t.Helper()
	var st *bus.StatusReply
	require.Eventually(t, func() bool {
		var err error
		st, err = c.Status(context.Background(), runID)
		require.NoError(t, err)
		return st.Status == want
	}, 5*time.Second, 10*time.Millisecond, "run %s never became %s", runID, want)
	return st
}

// apiError asserts err is an error reply of type typ and returns it.
func apiError(t *testing.T, err error, typ string) *bus.APIError {
	t.Helper()
	require.Error(t, err)
	var ae *bus.APIError
	require.True(t, errors.As(err, &ae), "want a *bus.APIError, got %T: %v", err, err)
	require.Equal(t, typ, ae.Type, "error: %v", ae)
	return ae
}

func TestNew(t *testing.T) {
	t.Parallel()
	_, err := client.New(nil, client.Options{})
	require.ErrorContains(t, err, "NATS connection is required")

	f := setup(t)
	_, err = client.New(f.Conn, client.Options{Prefix: "bad.prefix"})
	require.ErrorIs(t, err, bus.ErrInvalidToken)
	var fe *bus.FieldError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, "prefix", fe.Field)

	c, err := client.New(f.Conn, client.Options{})
	require.NoError(t, err)
	require.Equal(t, "lovia", c.Names().Prefix(), "the default prefix")
}

// TestSubmitAndTail: a submitted run is queued under the id it was given
// (or a new one), and its tail from the start delivers every event in seq
// order to the terminal one; a tail from a seq starts there.
func TestSubmitAndTail(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()

	rep, err := f.Client.Submit(ctx, &bus.RunRequest{Agent: "calc", Input: bus.TextInput("What is 12*7?")})
	require.NoError(t, err)
	require.NoError(t, bus.ValidateID("run_id", rep.RunID), "a generated run id")
	require.Equal(t, "calc", rep.Agent)
	require.Equal(t, bus.StateQueued, rep.Status)
	require.Equal(t, "lovia.events."+rep.RunID, rep.EventsSubject)
	require.False(t, rep.Replayed)

	envs := tailAll(t, f.Client, rep.RunID, bus.FromStart())
	require.Equal(t, calcTypes, fleettest.Types(envs))
	for i, e := range envs {
		require.EqualValues(t, i+1, e.Seq)
		require.Equal(t, rep.RunID, e.RunID)
		require.Equal(t, "calc", e.Agent)
	}
	require.Equal(t, "The answer is 84.", fleettest.Event[*loop.RunCompleted](t, envs[len(envs)-1]).Output)

	last := tailAll(t, f.Client, rep.RunID, bus.FromSeq(uint64(len(envs)-1)))
	require.Equal(t, []string{"turn_ended", "run_completed"}, fleettest.Types(last))

	// A caller-chosen id is kept; submitting the completed run again
	// replays its result instead of running it twice.
	own, err := f.Client.Submit(ctx, &bus.RunRequest{RunID: "order-42", Agent: "calc", Input: bus.TextInput("What is 12*7?")})
	require.NoError(t, err)
	require.Equal(t, "order-42", own.RunID)
	require.Equal(t, "lovia.events.order-42", own.EventsSubject)
	tailAll(t, f.Client, "order-42")
	waitStatus(t, f.Client, "order-42", bus.StateCompleted)
	again, err := f.Client.Submit(ctx, &bus.RunRequest{RunID: "order-42", Agent: "calc", Input: bus.TextInput("again")})
	require.NoError(t, err)
	require.True(t, again.Replayed)
	require.Equal(t, bus.StateCompleted, again.Status)
	require.Equal(t, "The answer is 84.", again.Result.Output)

	_, err = f.Client.Tail(ctx, "bad.id")
	require.ErrorIs(t, err, bus.ErrInvalidToken)
}

// TestStatus: a finished run's status carries its result and usage; an
// unknown run is a NotFound error reply; an id that cannot be a subject
// token is refused before anything is sent.
func TestStatus(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	rep, err := f.Client.Submit(ctx, &bus.RunRequest{Agent: "calc", Input: bus.TextInput("What is 12*7?"), SessionID: "s-status"})
	require.NoError(t, err)
	tailAll(t, f.Client, rep.RunID)

	st := waitStatus(t, f.Client, rep.RunID, bus.StateCompleted)
	require.Equal(t, rep.RunID, st.RunID)
	require.Equal(t, "calc", st.Agent)
	require.Equal(t, "s-status", st.SessionID)
	require.Equal(t, "w1", st.Worker)
	require.Equal(t, 1, st.Attempt)
	require.Equal(t, 2, st.Turns)
	require.Nil(t, st.Error)
	require.NotNil(t, st.Result)
	require.Equal(t, "The answer is 84.", st.Result.Output)
	require.Equal(t, 2, st.Result.Turns)
	require.Equal(t, "calc", st.Result.FinalAgent)
	require.NotNil(t, st.Result.FinishReason)
	require.Equal(t, "stop", *st.Result.FinishReason)
	// The scripted model reports 1 input and 1 output token per call.
	require.Equal(t, loop.Usage{InputTokens: 2, OutputTokens: 2, TotalTokens: 4}, st.Result.Usage)

	_, err = f.Client.Status(ctx, "ghost")
	ae := apiError(t, err, bus.TypeNotFound)
	require.Equal(t, "run ghost not found", ae.Message)
	require.NotEmpty(t, ae.Hint)
	require.Equal(t, 404, ae.Code())
	require.NotErrorIs(t, err, bus.ErrInvalidRequest)

	_, err = f.Client.Status(ctx, "bad.id")
	require.ErrorIs(t, err, bus.ErrInvalidToken)
	var fe *bus.FieldError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, "run_id", fe.Field)
}

// TestSubmitErrors: an unknown agent is an UnknownAgent error naming the
// agents there are; a request that breaks the wire contract is an
// InvalidRequest error naming the field; neither enqueues a run.
func TestSubmitErrors(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()

	_, err := f.Client.Submit(ctx, &bus.RunRequest{Agent: "nobody", Input: bus.TextInput("hi")})
	ae := apiError(t, err, bus.TypeUnknownAgent)
	require.Equal(t, `unknown agent "nobody"`, ae.Message)
	require.Equal(t, "use one of the agents the fleet serves: calc, gated, napper, sleeper; or start a worker whose agents file defines nobody", ae.Hint)
	require.Equal(t, 404, ae.Code())

	_, err = f.Client.Submit(ctx, &bus.RunRequest{RunID: "bad id", Agent: "calc", Input: bus.TextInput("hi")})
	ae = apiError(t, err, bus.TypeInvalidRequest)
	require.ErrorIs(t, err, bus.ErrInvalidRequest)
	require.Contains(t, ae.Message, "run_id")
	require.Contains(t, ae.Message, "white space")

	_, err = f.Client.Submit(ctx, &bus.RunRequest{Input: bus.TextInput("hi")})
	ae = apiError(t, err, bus.TypeInvalidRequest)
	require.Equal(t, "invalid request: agent: is required", ae.Message)

	_, err = f.Client.Submit(ctx, &bus.RunRequest{Agent: "calc", IfRunExists: "sometimes"})
	require.Contains(t, apiError(t, err, bus.TypeInvalidRequest).Message, "if_run_exists")

	// A new run needs an input: the client names the run it submits, and
	// a named run without input is a resubmission (issue 25, item 4).
	for _, in := range []bus.Input{{}, bus.TextInput(""), bus.MessagesInput()} {
		_, err = f.Client.Submit(ctx, &bus.RunRequest{Agent: "calc", Input: in})
		msg := apiError(t, err, bus.TypeInvalidRequest).Message
		require.Contains(t, msg, "input: is required", "input %+v", in)
		require.NotContains(t, msg, "does not exist", "refused without naming a run id the caller never chose")
	}
	_, err = f.Client.Submit(ctx, &bus.RunRequest{RunID: "fresh-1", Agent: "calc"})
	require.Contains(t, apiError(t, err, bus.TypeInvalidRequest).Message, "input: is required: run fresh-1 does not exist")
	_, err = f.Client.Status(ctx, "fresh-1")
	apiError(t, err, bus.TypeNotFound)

	_, err = f.Client.Status(ctx, "bad-id-never-run")
	apiError(t, err, bus.TypeNotFound)
}

// TestApprove: a decision sent while a run waits for approval is accepted
// and applied (the gated tool runs, the run completes); a second decision
// for the call does not replace it; a bad decision or an unknown run is
// an error reply.
func TestApprove(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	rep, err := f.Client.Submit(ctx, &bus.RunRequest{Agent: "gated", Input: bus.TextInput("deploy")})
	require.NoError(t, err)
	req := fleettest.Event[*loop.ApprovalRequired](t, waitEvent(t, f.Client, rep.RunID, loop.EventApprovalRequired))
	require.Equal(t, "c1", req.Call.ID)

	_, err = f.Client.Approve(ctx, rep.RunID, "c1", "maybe", "")
	require.Contains(t, apiError(t, err, bus.TypeInvalidRequest).Message, "decision")

	ar, err := f.Client.Approve(ctx, rep.RunID, "c1", loop.Approve, "looks good")
	require.NoError(t, err)
	require.Equal(t, bus.ApproveReply{RunID: rep.RunID, CallID: "c1", Decision: loop.Approve, Reason: "looks good", Accepted: true}, *ar)

	// The same decision sent again (a client that lost the reply) is
	// answered as the first was, also once the run has moved on or ended.
	repeat, err := f.Client.Approve(ctx, rep.RunID, "c1", loop.Approve, "looks good")
	require.NoError(t, err)
	require.Equal(t, *ar, *repeat)
	ended := tailAll(t, f.Client, rep.RunID)
	require.True(t, ended[len(ended)-1].IsTerminal())
	repeat, err = f.Client.Approve(ctx, rep.RunID, "c1", loop.Approve, "looks good")
	require.NoError(t, err, "the repeat of the decision in force after the run ended")
	require.Equal(t, *ar, *repeat)

	again, err := f.Client.Approve(ctx, rep.RunID, "c1", loop.Reject, "too late")
	if err == nil {
		require.False(t, again.Accepted, "a second decision replaced the first")
		require.Equal(t, loop.Approve, again.Decision, "the decision in force")
	} else {
		require.Contains(t, apiError(t, err, bus.TypeInvalidRequest).Message, "completed", "the run is over")
	}

	envs := tailAll(t, f.Client, rep.RunID)
	res := fleettest.OfType(envs, loop.EventApprovalResolved)
	require.Len(t, res, 1)
	require.Equal(t, loop.Approve, fleettest.Event[*loop.ApprovalResolved](t, res[0]).Decision)
	require.Equal(t, "looks good", fleettest.Event[*loop.ApprovalResolved](t, res[0]).Reason)
	require.Len(t, fleettest.OfType(envs, loop.EventToolCallStarted), 1, "the approved tool ran")
	require.Equal(t, "done", fleettest.Event[*loop.RunCompleted](t, envs[len(envs)-1]).Output)

	_, err = f.Client.Approve(ctx, "ghost", "c1", loop.Approve, "")
	apiError(t, err, bus.TypeNotFound)
	_, err = f.Client.Approve(ctx, "bad.id", "c1", loop.Approve, "")
	require.ErrorIs(t, err, bus.ErrInvalidToken)
}

// TestCancel: cancelling a run asleep in a tool ends it with one run_failed
// RunCancelled carrying the reason, and its status is failed; cancelling
// it again is harmless and says so.
func TestCancel(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	rep, err := f.Client.Submit(ctx, &bus.RunRequest{Agent: "sleeper", Input: bus.TextInput("nap")})
	require.NoError(t, err)
	waitEvent(t, f.Client, rep.RunID, loop.EventToolCallStarted)

	cr, err := f.Client.Cancel(ctx, rep.RunID, "user pressed stop")
	require.NoError(t, err)
	require.Equal(t, bus.CancelReply{RunID: rep.RunID, Cancelled: true, Status: "running"}, *cr)

	envs := tailAll(t, f.Client, rep.RunID)
	require.Len(t, fleettest.OfType(envs, loop.EventRunFailed), 1, "types %v", fleettest.Types(envs))
	failed := fleettest.Event[*loop.RunFailed](t, envs[len(envs)-1])
	require.Equal(t, "RunCancelled", failed.Error.Type)
	require.Contains(t, failed.Error.Message, "user pressed stop")

	st := waitStatus(t, f.Client, rep.RunID, bus.StateFailed)
	require.NotNil(t, st.Error)
	require.Equal(t, "RunCancelled", st.Error.Type)
	require.Nil(t, st.Result)

	again, err := f.Client.Cancel(ctx, rep.RunID, "again")
	require.NoError(t, err)
	require.Equal(t, bus.CancelReply{RunID: rep.RunID, Cancelled: false, Status: "failed"}, *again)

	_, err = f.Client.Cancel(ctx, "ghost", "")
	apiError(t, err, bus.TypeNotFound)
}

// TestInjectUninject: messages injected while a run sleeps get distinct
// tokens; one withdrawn before the next turn never reaches the run and
// cannot be withdrawn twice; the other is folded into the next turn.
func TestInjectUninject(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	rep, err := f.Client.Submit(ctx, &bus.RunRequest{Agent: "napper", Input: bus.TextInput("nap")})
	require.NoError(t, err)
	waitEvent(t, f.Client, rep.RunID, loop.EventToolCallStarted)

	keep, err := f.Client.Inject(ctx, rep.RunID, "also check the logs")
	require.NoError(t, err)
	require.NotEmpty(t, keep)
	drop, err := f.Client.Inject(ctx, rep.RunID, "never mind this")
	require.NoError(t, err)
	require.NotEqual(t, keep, drop)
	removed, err := f.Client.Uninject(ctx, rep.RunID, drop)
	require.NoError(t, err)
	require.True(t, removed)
	removed, err = f.Client.Uninject(ctx, rep.RunID, drop)
	require.NoError(t, err)
	require.False(t, removed, "a message is withdrawn once")

	envs := tailAll(t, f.Client, rep.RunID)
	inj := fleettest.OfType(envs, loop.EventUserMessageInjected)
	require.Len(t, inj, 1, "types %v", fleettest.Types(envs))
	require.Equal(t, "also check the logs", fleettest.Event[*loop.UserMessageInjected](t, inj[0]).Content)
	require.Equal(t, loop.EventRunCompleted, envs[len(envs)-1].Type)

	removed, err = f.Client.Uninject(ctx, rep.RunID, keep)
	require.NoError(t, err)
	require.False(t, removed, "a drained message cannot be withdrawn")

	waitStatus(t, f.Client, rep.RunID, bus.StateCompleted)
	_, err = f.Client.Inject(ctx, rep.RunID, "too late")
	require.Contains(t, apiError(t, err, bus.TypeInvalidRequest).Message, "completed")
	_, err = f.Client.Inject(ctx, "ghost", "hello")
	apiError(t, err, bus.TypeNotFound)
	_, err = f.Client.Uninject(ctx, rep.RunID, "")
	require.Contains(t, apiError(t, err, bus.TypeInvalidRequest).Message, "token")
}

// TestSessionAndRewind: a run with a session id leaves one segment of its
// entries in the session; rewinding keeps the first entries and reports
// how many went; a negative count is refused, an unknown session is empty.
func TestSessionAndRewind(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	rep, err := f.Client.Submit(ctx, &bus.RunRequest{Agent: "calc", Input: bus.TextInput("What is 12*7?"), SessionID: "s-1"})
	require.NoError(t, err)
	tailAll(t, f.Client, rep.RunID)

	var sess *bus.SessionReply
	require.Eventually(t, func() bool {
		sess, err = f.Client.Session(ctx, "s-1")
		var ae *bus.APIError
		if errors.As(err, &ae) && ae.Type == bus.TypeNotFound {
			return false // the segment is appended after the run's end
		}
		require.NoError(t, err)
		return len(sess.Segments) == 1
	}, 5*time.Second, 10*time.Millisecond)
	require.Equal(t, "s-1", sess.SessionID)
	seg := sess.Segments[0]
	require.Equal(t, rep.RunID, seg.RunID)
	require.Greater(t, len(seg.Entries), 1)
	require.Equal(t, loop.UserText("What is 12*7?"), seg.Entries[0])

	removed, err := f.Client.Rewind(ctx, "s-1", 1)
	require.NoError(t, err)
	require.Equal(t, len(seg.Entries)-1, removed)
	sess, err = f.Client.Session(ctx, "s-1")
	require.NoError(t, err)
	require.Len(t, sess.Segments, 1)
	require.Equal(t, []loop.Entry{loop.UserText("What is 12*7?")}, sess.Segments[0].Entries)
	removed, err = f.Client.Rewind(ctx, "s-1", 1)
	require.NoError(t, err)
	require.Zero(t, removed, "nothing more to remove")

	_, err = f.Client.Rewind(ctx, "s-1", -1)
	require.Contains(t, apiError(t, err, bus.TypeInvalidRequest).Message, "keep_entries")

	// A session no run has completed in does not exist (issue 25, item 10).
	_, err = f.Client.Session(ctx, "never-used")
	ae := apiError(t, err, bus.TypeNotFound)
	require.Equal(t, "session never-used not found", ae.Message)
	require.Contains(t, ae.Hint, "session_id")

	_, err = f.Client.Session(ctx, "bad.id")
	require.ErrorIs(t, err, bus.ErrInvalidToken)
	_, err = f.Client.Rewind(ctx, "bad.id", 0)
	require.ErrorIs(t, err, bus.ErrInvalidToken)
}

func TestAgents(t *testing.T) {
	t.Parallel()
	f := setup(t)
	rep, err := f.Client.Agents(context.Background())
	require.NoError(t, err)
	agents := normalize(rep.Agents)
	var schemas [][]string
	for i := range agents {
		var names []string
		for _, s := range agents[i].Schemas {
			require.NotEmpty(t, s.Parameters, "agent %s tool %s has a schema", agents[i].Name, s.Name)
			names = append(names, s.Name)
		}
		schemas = append(schemas, names)
		agents[i].Schemas = nil
	}
	require.Equal(t, []bus.AgentInfo{
		{Name: "calc", Model: "scripted", Tools: []string{"echo"}},
		{Name: "gated", Model: "scripted", Tools: []string{"echo"}},
		{Name: "napper", Model: "scripted", Tools: []string{"sleep"}},
		{Name: "sleeper", Model: "scripted", Tools: []string{"sleep"}},
	}, agents)
	require.Equal(t, [][]string{{"echo"}, {"echo"}, {"sleep"}, {"sleep"}}, schemas, "each agent's resolved tools come with their schemas")
}

// normalize turns empty slices into nil, so agent infos compare whatever
// the decoder made of an empty list.
func normalize(in []bus.AgentInfo) []bus.AgentInfo {
	for i := range in {
		if len(in[i].Tools) == 0 {
			in[i].Tools = nil
		}
		if len(in[i].Handoffs) == 0 {
			in[i].Handoffs = nil
		}
	}
	return in
}

// TestMsgpack: a client that speaks msgpack gets its replies, its error
// replies and its run's events in msgpack, and decodes them all.
func TestMsgpack(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	c, err := client.New(f.Conn, client.Options{Encoding: bus.Msgpack})
	require.NoError(t, err)

	rep, err := c.Submit(ctx, &bus.RunRequest{Agent: "calc", Input: bus.TextInput("What is 12*7?")})
	require.NoError(t, err)
	require.Equal(t, bus.StateQueued, rep.Status)
	envs := tailAll(t, c, rep.RunID)
	require.Equal(t, calcTypes, fleettest.Types(envs))
	str, err := f.JS.Stream(ctx, "LOVIA_EVENTS")
	require.NoError(t, err)
	msg, err := str.GetLastMsgForSubject(ctx, rep.EventsSubject)
	require.NoError(t, err)
	require.Equal(t, bus.ContentTypeMsgpack, msg.Header.Get(bus.HeaderContentType))

	st := waitStatus(t, c, rep.RunID, bus.StateCompleted)
	require.Equal(t, "The answer is 84.", st.Result.Output)
	_, err = c.Status(ctx, "ghost")
	require.Equal(t, "run ghost not found", apiError(t, err, bus.TypeNotFound).Message)
}

// TestPrefix: a client with a prefix talks to the fleet serving that
// prefix — submit, tail, status and agents — while a client with another
// prefix on the same connection finds nobody serving it and says so at
// once.
func TestPrefix(t *testing.T) {
	t.Parallel()
	nc := startPrefixedFleet(t, "acme")
	ctx := context.Background()
	c, err := client.New(nc, client.Options{Prefix: "acme"})
	require.NoError(t, err)
	require.Equal(t, "acme", c.Names().Prefix())

	rep, err := c.Submit(ctx, &bus.RunRequest{Agent: "calc", Input: bus.TextInput("What is 12*7?")})
	require.NoError(t, err)
	require.Equal(t, "acme.events."+rep.RunID, rep.EventsSubject)
	envs := tailAll(t, c, rep.RunID)
	require.Equal(t, calcTypes, fleettest.Types(envs))
	require.Equal(t, "The answer is 84.", waitStatus(t, c, rep.RunID, bus.StateCompleted).Result.Output)
	agents, err := c.Agents(ctx)
	require.NoError(t, err)
	require.Len(t, agents.Agents, 4)

	other, err := client.New(nc, client.Options{})
	require.NoError(t, err)
	t0 := time.Now()
	_, err = other.Agents(ctx)
	require.ErrorIs(t, err, nats.ErrNoResponders)
	require.ErrorContains(t, err, "lovia.api.agents: no worker or gateway is serving the lovia API")
	_, err = other.Status(ctx, rep.RunID)
	require.ErrorIs(t, err, nats.ErrNoResponders)
	require.Less(t, time.Since(t0), time.Second, "no responders is known at once")
}

// startPrefixedFleet starts a server, the API service and one worker, all
// under prefix, and returns a connection to it; everything stops at
// cleanup.
func startPrefixedFleet(t *testing.T, prefix string) *nats.Conn {
	t.Helper()
	nc := startServer(t)
	serveFleet(t, nc, prefix)
	return nc
}

// startServer starts an embedded server and returns a connection to it.
func startServer(t *testing.T) *nats.Conn {
	t.Helper()
	srv, err := broker.StartEmbedded(broker.EmbeddedConfig{StoreDir: t.TempDir(), Port: -1})
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	nc, err := srv.Connect()
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	return nc
}

// serveFleet provisions prefix on nc's server and starts the API service
// and one worker on nc.
func serveFleet(t *testing.T, nc *nats.Conn, prefix string) {
	t.Helper()
	ctx := context.Background()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	_, err = bus.Provision(ctx, js, bus.ProvisionConfig{Prefix: prefix})
	require.NoError(t, err)
	names, err := bus.NewNames(prefix)
	require.NoError(t, err)
	st, err := store.Open(ctx, js, store.Config{
		CheckpointBucket: names.CheckpointsBucket(), SessionBucket: names.SessionsBucket(),
		MailboxBucket: names.MailboxBucket(), RunBucket: names.RunsBucket(),
	})
	require.NoError(t, err)
	ts, err := tools.Builtin(tools.Config{Workspace: t.TempDir()})
	require.NoError(t, err)
	cat, err := catalog.Parse([]byte(agents), catalog.Options{Tools: ts, Registry: &loop.Registry{}})
	require.NoError(t, err)
	api, err := service.NewAPI(service.Config{Conn: nc, Store: st, Prefix: prefix, Catalog: cat})
	require.NoError(t, err)
	svc := service.New(api)
	require.NoError(t, svc.Start(ctx))
	t.Cleanup(func() { _ = svc.Stop(context.Background()) })
	w, err := worker.New(worker.Config{Conn: nc, Catalog: cat, Prefix: prefix, ID: "w1", SkipProvision: true, ShutdownGrace: 100 * time.Millisecond})
	require.NoError(t, err)
	require.NoError(t, w.Start(ctx))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = w.Stop(ctx)
	})
}

// TestNothingServes: with no service on the connection a request fails at
// once with nats.ErrNoResponders; with a subscriber that never answers it
// fails when Options.Timeout (or the caller's deadline) ends, naming the
// subject, instead of hanging.
func TestNothingServes(t *testing.T) {
	t.Parallel()
	srv, err := broker.StartEmbedded(broker.EmbeddedConfig{StoreDir: t.TempDir(), Port: -1})
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	nc, err := srv.Connect()
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	ctx := context.Background()

	c, err := client.New(nc, client.Options{Timeout: 300 * time.Millisecond})
	require.NoError(t, err)
	_, err = c.Submit(ctx, &bus.RunRequest{Agent: "calc", Input: bus.TextInput("hi")})
	require.ErrorIs(t, err, nats.ErrNoResponders)
	require.ErrorContains(t, err, "lovia.api.submit: no worker or gateway is serving the lovia API (start `lovia worker` or `lovia dev`)")

	// Something listens but never answers.
	sub, err := nc.SubscribeSync("lovia.api.>")
	require.NoError(t, err)
	t.Cleanup(func() { _ = sub.Unsubscribe() })

	// A context without a deadline gets Options.Timeout. The call runs
	// aside so that a client without the timeout fails the test instead
	// of hanging it.
	t0 := time.Now()
	done := make(chan error, 1)
	go func() {
		_, err := c.Agents(ctx)
		done <- err
	}()
	select {
	case err = <-done:
	case <-time.After(2 * time.Second):
		t.Fatal("Agents without a deadline still waits after 2s: Options.Timeout was not applied")
	}
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorContains(t, err, "lovia.api.agents")
	require.GreaterOrEqual(t, time.Since(t0), 250*time.Millisecond, "gave up before Options.Timeout")

	// The caller's deadline wins over Options.Timeout.
	slow, err := client.New(nc, client.Options{Timeout: time.Minute})
	require.NoError(t, err)
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	t0 = time.Now()
	_, err = slow.Cancel(short, "r1", "stop")
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorContains(t, err, "lovia.api.run.r1.cancel")
	require.Less(t, time.Since(t0), 2*time.Second, "the caller's deadline was not kept")
}

// TestSubmitSentAgainWhenItsProcessDies: the process a submit reaches dies
// with it (here: a member of the API's queue group that takes the request
// and vanishes without answering). The client sends it again, a live
// process answers, and the run — named by the client, so the retry cannot
// start a second one — runs once. Operations whose repetition would answer
// differently (inject) are sent once.
func TestSubmitSentAgainWhenItsProcessDies(t *testing.T) {
	t.Parallel()
	nc := startServer(t)
	ctx := context.Background()

	// The dying process: it takes one request and is gone.
	var taken atomic.Int32
	swallowed := make(chan *nats.Msg, 8)
	blackHole := func(subject string) {
		var sub *nats.Subscription
		sub, err := nc.QueueSubscribe(subject, "q", func(m *nats.Msg) {
			_ = sub.Unsubscribe()
			taken.Add(1)
			swallowed <- m
		})
		require.NoError(t, err)
		require.NoError(t, nc.Flush())
	}
	blackHole("retry.api.>")

	c, err := client.New(nc, client.Options{Prefix: "retry", Timeout: 6 * time.Second})
	require.NoError(t, err)
	done := make(chan error, 1)
	var rep *bus.SubmitReply
	go func() {
		var err error
		rep, err = c.Submit(ctx, &bus.RunRequest{Agent: "calc", Input: bus.TextInput("What is 12*7?")})
		done <- err
	}()
	var lost bus.RunRequest
	require.NoError(t, json.Unmarshal((<-swallowed).Data, &lost))
	require.NotEmpty(t, lost.RunID, "the client names the run before sending it")

	// A live fleet comes up while the client waits for the lost reply.
	serveFleet(t, nc, "retry")
	require.NoError(t, <-done, "the submit was not sent again")
	require.Equal(t, lost.RunID, rep.RunID)
	require.Equal(t, calcTypes, fleettest.Types(tailAll(t, c, rep.RunID)))

	// Inject is sent once: its lost reply is an error, not a second message.
	once, err := client.New(nc, client.Options{Prefix: "once"})
	require.NoError(t, err)
	blackHole("once.api.>")
	short, cancel := context.WithTimeout(ctx, 2500*time.Millisecond)
	defer cancel()
	_, err = once.Inject(short, "r1", "hello")
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.EqualValues(t, 2, taken.Load(), "one submit lost, one inject lost, nothing sent again")
}

// TestReplayOfAnotherInput: a completed run submitted again is replayed
// (nothing runs); the reply says when the request's input is not the one
// the run completed with (issue 25, item 10).
func TestReplayOfAnotherInput(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	rep, err := f.Client.Submit(ctx, &bus.RunRequest{RunID: "once", Agent: "calc", Input: bus.TextInput("What is 12*7?")})
	require.NoError(t, err)
	tailAll(t, f.Client, rep.RunID)
	waitStatus(t, f.Client, "once", bus.StateCompleted)

	same, err := f.Client.Submit(ctx, &bus.RunRequest{RunID: "once", Agent: "calc", Input: bus.TextInput("What is 12*7?")})
	require.NoError(t, err)
	require.True(t, same.Replayed)
	require.False(t, same.InputDiffers, "a retry with the same input")
	none, err := f.Client.Submit(ctx, &bus.RunRequest{RunID: "once", Agent: "calc"})
	require.NoError(t, err)
	require.True(t, none.Replayed)
	require.False(t, none.InputDiffers, "a resubmission without input")

	other, err := f.Client.Submit(ctx, &bus.RunRequest{RunID: "once", Agent: "calc", Input: bus.TextInput("What is 2+2?")})
	require.NoError(t, err)
	require.True(t, other.Replayed)
	require.True(t, other.InputDiffers)
	require.Equal(t, "The answer is 84.", other.Result.Output)
	list, err := f.Client.Submit(ctx, &bus.RunRequest{RunID: "once", Agent: "calc", Input: bus.MessagesInput(bus.InputMessage{Role: "user", Content: "What is 12*7?"})})
	require.NoError(t, err)
	require.False(t, list.InputDiffers, "a list of the same user message is the same input")
	two, err := f.Client.Submit(ctx, &bus.RunRequest{RunID: "once", Agent: "calc", Input: bus.MessagesInput(
		bus.InputMessage{Role: "system", Content: "Be brief."}, bus.InputMessage{Role: "user", Content: "What is 12*7?"})})
	require.NoError(t, err)
	require.True(t, two.InputDiffers, "another list")
}
