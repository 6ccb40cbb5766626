package loop_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/loop/scripted"
)

// cadenceCheckpointer records every append it passes to a MemoryCheckpointer.
type cadenceCheckpointer struct {
	*loop.MemoryCheckpointer
	mu     sync.Mutex
	writes []loop.CheckpointWrite
}

func (c *cadenceCheckpointer) Append(ctx context.Context, runID string, w loop.CheckpointWrite) (uint64, error) {
	c.mu.Lock()
	cw := w
	cw.Entries = append([]loop.Entry(nil), w.Entries...)
	c.writes = append(c.writes, cw)
	c.mu.Unlock()
	return c.MemoryCheckpointer.Append(ctx, runID, w)
}

// connRefusedSession fails its first Append with a connection error.
type connRefusedSession struct {
	*loop.MemorySession
	mu     sync.Mutex
	failed bool
}

func (s *connRefusedSession) Append(ctx context.Context, id string, seg loop.Segment) (string, error) {
	s.mu.Lock()
	first := !s.failed
	s.failed = true
	s.mu.Unlock()
	if first {
		return "", &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
	}
	return s.MemorySession.Append(ctx, id, seg)
}

// seedSnapshot stores a snapshot as a crashed process would have left it.
func seedSnapshot(t *testing.T, cp loop.Checkpointer, runID string, entries []loop.Entry, head loop.RunHead) {
	t.Helper()
	_, err := cp.Append(context.Background(), runID, loop.CheckpointWrite{Entries: entries, Head: head})
	require.NoError(t, err)
}

// texts projects input and assistant-text entries to their text.
func texts(es []loop.Entry) []string {
	var out []string
	for _, e := range es {
		switch e.Kind {
		case loop.KindInput:
			out = append(out, e.ContentText())
		case loop.KindAssistantText:
			out = append(out, e.Text)
		}
	}
	return out
}

func streamEntries(t *testing.T, a *loop.Agent, input []loop.Entry, opts ...loop.RunOption) ([]loop.Event, *loop.RunResult, error) {
	t.Helper()
	return collect(newRunner().Stream(context.Background(), a, input, opts...))
}

// §8.11 Checkpoints, resume, replay, sessions.
var persistScenarios = []scenario{
	{"S64_write_cadence", func(t *testing.T) {
		p := scripted.New([]scripted.Step{
			scripted.CallTool("add", map[string]int{"a": 2, "b": 3}, "c1"),
			scripted.Text("The answer is 5."),
		})
		cp := &cadenceCheckpointer{MemoryCheckpointer: loop.NewMemoryCheckpointer()}
		_, res, err := stream(t, agentWith(p, addTool()), "add", loop.WithCheckpoint(cp, "r1"))
		require.NoError(t, err)
		require.Equal(t, "The answer is 5.", res.Output)
		type write struct {
			entries []string
			status  loop.RunStatus
			turns   int
		}
		var got []write
		for _, w := range cp.writes {
			got = append(got, write{entrySigs(w.Entries), w.Head.Status, w.Head.Turns})
		}
		call := `Call(c1,add,{"a":2,"b":3})`
		// Deliberate departures from S64: the turn ends' empty running
		// appends (3) and (5) are not written, since they store no entry
		// and the head they would write is the last one but for its time;
		// a resume from either point is the same. And the final message
		// (4) is written with the completion (6), in one append: a crash
		// between them, before either, calls the model again on resume
		// (TestCrashAtEveryCheckpointPoint).
		require.Equal(t, []write{
			{[]string{"In(user,add)", call}, loop.StatusRunning, 1},
			{[]string{"Res(c1,5)"}, loop.StatusRunning, 1},
			{[]string{"Txt(The answer is 5.)"}, loop.StatusCompleted, 2},
		}, got)
		require.Equal(t, "The answer is 5.", cp.writes[2].Head.Output)
		nonEmpty := 0
		for _, w := range cp.writes {
			if len(w.Entries) > 0 {
				nonEmpty++
			}
		}
		require.Equal(t, 3, nonEmpty, "a one-row-per-non-empty-append store has 3 rows")
		snap := loadSnap(t, cp, "r1")
		require.Equal(t, loop.StatusCompleted, snap.Status)
		require.Equal(t, "The answer is 5.", snap.Output)
		require.Equal(t, []string{"In(user,add)", call, "Res(c1,5)", "Txt(The answer is 5.)"}, entrySigs(snap.Entries))
		require.Equal(t, 2, snap.Turns)
		require.EqualValues(t, 2, snap.Usage.InputTokens)
		require.EqualValues(t, 2, snap.Usage.OutputTokens)
	}},
	{"S65_crash_after_model_turn", func(t *testing.T) {
		cp := loop.NewMemoryCheckpointer()
		seedSnapshot(t, cp, "r1", []loop.Entry{loop.UserText("What is the time?"), loop.ToolCallEntry("c1", "clock", "{}")},
			loop.RunHead{Agent: "a", Turns: 1, Status: loop.StatusRunning, Usage: loop.Usage{InputTokens: 10, OutputTokens: 5, TotalTokens: 15}})
		var runs, seenTurn int
		clock := loop.NewTool("clock", "The time.", func(_ context.Context, rc *loop.RunContext, _ empty) (string, error) {
			runs++
			seenTurn = rc.Turn()
			return "12:00", nil
		})
		// The snapshot already holds a model turn: one step per call.
		p := scripted.New([]scripted.Step{scripted.Text("It is noon.")}, scripted.Sequential())
		evs, res, err := streamEntries(t, agentWith(p, clock), nil, loop.WithCheckpoint(cp, "r1"), loop.WithIfRunExists(loop.ResumeOnly))
		require.NoError(t, err)
		require.Equal(t, []string{"RS(a)", "TS(1)", "TCS(c1)", "TCC(c1,ok)", "TE(1)", "TS(2)", "TD+", "MC[Txt(It is noon.)]", "TE(2)", "RC"}, sig(evs))
		tcc := find[*loop.ToolCallCompleted](evs)[0]
		require.Equal(t, "12:00", tcc.Output)
		require.Equal(t, 1, runs, "clock executed once")
		require.Equal(t, 1, seenTurn, "the drain runs in the restored turn")
		require.Equal(t, "It is noon.", res.Output)
		require.Equal(t, []string{"In(user,What is the time?)", "Call(c1,clock,{})", "Res(c1,12:00)", "Txt(It is noon.)"}, entrySigs(res.Entries))
		require.Equal(t, loop.Usage{InputTokens: 11, OutputTokens: 6, TotalTokens: 17}, res.Usage)
		require.Equal(t, 2, res.Turns)
		require.True(t, find[*loop.RunStarted](evs)[0].FromCheckpoint)
		snap := loadSnap(t, cp, "r1")
		require.Equal(t, loop.StatusCompleted, snap.Status)
		require.Equal(t, entrySigs(res.Entries), entrySigs(snap.Entries))
	}},
	{"S67_replay_of_completed_run", func(t *testing.T) {
		p := scripted.New([]scripted.Step{{Text: "done", Finish: "stop"}})
		var hooked int
		a := agentWith(p)
		a.Hooks = loop.NewHooks().OnAny(func(context.Context, *loop.RunContext, loop.Event) { hooked++ })
		cp := loop.NewMemoryCheckpointer()
		_, first, err := stream(t, a, "do the job", loop.WithCheckpoint(cp, "job"))
		require.NoError(t, err)
		require.Equal(t, "done", first.Output)
		require.Equal(t, "stop", *first.FinishReason)
		require.Equal(t, 1, p.Calls())
		stored := loadSnap(t, cp, "job")

		hooked = 0
		var runHooked int
		parent := &loop.RunContext{}
		evs, res, err := stream(t, a, "different", loop.WithCheckpoint(cp, "job"), loop.WithParent(parent),
			loop.WithHooks(loop.NewHooks().OnAny(func(context.Context, *loop.RunContext, loop.Event) { runHooked++ })))
		require.NoError(t, err)
		require.Equal(t, "done", res.Output)
		require.Equal(t, 1, p.Calls(), "no model call on replay")
		require.Equal(t, []string{"RS(a)", "RC"}, sig(evs))
		require.Zero(t, hooked, "hooks receive nothing")
		require.Zero(t, runHooked, "run hooks receive nothing")
		require.Nil(t, res.FinishReason)
		require.EqualValues(t, 1, res.LastInputTokens)
		require.Equal(t, stored.Usage, res.Usage)
		require.Equal(t, stored.Usage, parent.Usage(), "usage folded into the parent")
		require.Equal(t, 1, res.Turns)
		require.True(t, res.Replayed)
		require.Equal(t, entrySigs(stored.Entries), entrySigs(res.Entries))
	}},
	{"S68_crash_between_finalize_and_session_append", func(t *testing.T) {
		sess := &connRefusedSession{MemorySession: loop.NewMemorySession()}
		cp := loop.NewMemoryCheckpointer()
		p := scripted.New([]scripted.Step{scripted.Text("answer")})
		evs, _, err := stream(t, agentWith(p), "q", loop.WithCheckpoint(cp, "rA"), loop.WithSession(sess, "u1"))
		requireErrType(t, err, "ConnectionError", "connection refused")
		require.Equal(t, []string{"RS(a)", "TS(1)", "TD+", "MC[Txt(answer)]", "TE(1)", "RF(ConnectionError)"}, sig(evs))
		snap := loadSnap(t, cp, "rA")
		require.Equal(t, loop.StatusCompleted, snap.Status)
		require.Equal(t, "answer", snap.Output)
		require.Empty(t, segmentsOf(t, sess, "u1"))

		for i := range 3 {
			empty := scripted.New(nil)
			evs, res, err := stream(t, agentWith(empty), "q", loop.WithCheckpoint(cp, "rA"), loop.WithSession(sess, "u1"))
			require.NoError(t, err, "replay %d", i)
			require.Equal(t, []string{"RS(a)", "RC"}, sig(evs))
			require.Equal(t, "answer", res.Output)
			require.Zero(t, empty.Calls())
			segs := segmentsOf(t, sess, "u1")
			require.Len(t, segs, 1, "replay heals the session once and never duplicates it")
			require.Equal(t, "rA", segs[0].RunID)
			require.Equal(t, snap.Entries, segs[0].Entries)
		}
	}},
	{"S70_if_run_exists", func(t *testing.T) {
		setup := func(t *testing.T) (*loop.MemoryCheckpointer, *scripted.Provider) {
			cp := loop.NewMemoryCheckpointer()
			p := scripted.New([]scripted.Step{scripted.Text("first"), scripted.Text("second")}, scripted.Sequential())
			_, res, err := stream(t, agentWith(p), "one", loop.WithCheckpoint(cp, "job"))
			require.NoError(t, err)
			require.Equal(t, "first", res.Output)
			return cp, p
		}
		t.Run("fail", func(t *testing.T) {
			cp, p := setup(t)
			evs, res, err := stream(t, agentWith(p), "two", loop.WithCheckpoint(cp, "job"), loop.WithIfRunExists(loop.FailRun))
			require.Nil(t, res)
			requireErrType(t, err, "UserError", "already exists")
			require.Empty(t, evs, "zero events")
			require.Equal(t, 1, p.Calls())
		})
		t.Run("restart", func(t *testing.T) {
			cp, p := setup(t)
			evs, res, err := stream(t, agentWith(p), "two", loop.WithCheckpoint(cp, "job"), loop.WithIfRunExists(loop.RestartRun))
			require.NoError(t, err)
			require.Equal(t, "second", res.Output)
			require.Equal(t, 2, p.Calls(), "runs fresh")
			require.Equal(t, []string{"RS(a)", "TS(1)", "TD+", "MC[Txt(second)]", "TE(1)", "RC"}, sig(evs))
			snap := loadSnap(t, cp, "job")
			require.Equal(t, []string{"two", "second"}, texts(snap.Entries), "no old rows")
			require.Len(t, snap.Entries, 2)
			require.Equal(t, 1, snap.Turns)
		})
		t.Run("resume_only_unknown", func(t *testing.T) {
			cp, p := setup(t)
			h := newRunner().Stream(context.Background(), agentWith(p), []loop.Entry{loop.UserText("x")},
				loop.WithCheckpoint(cp, "nope"), loop.WithIfRunExists(loop.ResumeOnly))
			n := 0
			for range h.Events() {
				n++
			}
			require.Zero(t, n, "zero events")
			_, err := h.Result()
			requireErrType(t, err, "UserError", "No snapshot found")
			_, err = cp.Load(context.Background(), "nope")
			require.ErrorIs(t, err, loop.ErrNoSnapshot, "no checkpoint is written")
		})
	}},
	{"S71_resume_after_handoff", func(t *testing.T) {
		specialistOnly := strTool("specialist_only", func(context.Context) (string, error) { return "special", nil })
		spec := &loop.Agent{Name: "Specialist", Tools: []*loop.Tool{specialistOnly},
			Provider: scripted.New([]scripted.Step{scripted.CallTool("specialist_only", nil, "s1"), scripted.Text("done by specialist")}, scripted.Sequential())}
		triageP := scripted.New([]scripted.Step{scripted.CallTool("transfer_to_specialist", nil, "h1")}, scripted.Sequential())
		triage := &loop.Agent{Name: "triage", Provider: triageP, Handoffs: []loop.Handoff{loop.HandoffTo(spec)}}
		cp := loop.NewMemoryCheckpointer()
		evs, _, err := stream(t, triage, "help", loop.WithCheckpoint(cp, "r1"), loop.WithBudget(loop.Budget{MaxToolCalls: 1}))
		requireErrType(t, err, "BudgetExceeded", "tool call count 2 exceeds budget 1")
		require.Equal(t, []string{"RS(triage)", "TS(1)", "MC[Call(h1,transfer_to_specialist,{})]", "TCS(h1)", "TCC(h1,ok)", "TE(1)",
			"HO(triage→Specialist)", "TS(2)", "MC[Call(s1,specialist_only,{})]", "RF(BudgetExceeded)"}, sig(evs))
		snap := loadSnap(t, cp, "r1")
		require.Equal(t, loop.StatusInterrupted, snap.Status)
		require.Equal(t, "Specialist", snap.Agent)
		require.Equal(t, 2, snap.Turns)

		t.Run("unrelated_entry_agent", func(t *testing.T) {
			other := agentWith(scripted.New(nil))
			other.Name = "other"
			evs, _, err := stream(t, other, "x", loop.WithCheckpoint(cp, "r1"))
			requireErrType(t, err, "UserError", "not reachable")
			require.Empty(t, evs, "zero events")
			require.Equal(t, loop.StatusInterrupted, loadSnap(t, cp, "r1").Status, "nothing written")
		})
		t.Run("resume_with_entry_agent", func(t *testing.T) {
			evs, res, err := stream(t, triage, "ignored", loop.WithCheckpoint(cp, "r1"))
			require.NoError(t, err)
			require.Equal(t, []string{"RS(Specialist)", "TS(2)", "TCS(s1)", "TCC(s1,ok)", "TE(2)",
				"TS(3)", "TD+", "MC[Txt(done by specialist)]", "TE(3)", "RC"}, sig(evs))
			require.Equal(t, "special", find[*loop.ToolCallCompleted](evs)[0].Output)
			require.Equal(t, "done by specialist", res.Output)
			require.Equal(t, "Specialist", res.FinalAgent)
			require.Equal(t, 1, triageP.Calls(), "triage is not asked again")
		})
		t.Run("dangling_handoff", func(t *testing.T) {
			target := &loop.Agent{Name: "target", Provider: scripted.New([]scripted.Step{scripted.Text("target here")}, scripted.Sequential())}
			routerP := scripted.New(nil)
			router := &loop.Agent{Name: "router", Provider: routerP, Handoffs: []loop.Handoff{loop.HandoffTo(target)}}
			cp := loop.NewMemoryCheckpointer()
			seedSnapshot(t, cp, "r2", []loop.Entry{loop.UserText("route me"), loop.ToolCallEntry("h1", "transfer_to_target", "{}")},
				loop.RunHead{Agent: "router", Turns: 1, Status: loop.StatusRunning, Usage: loop.Usage{InputTokens: 1, OutputTokens: 1, TotalTokens: 2}})
			evs, res, err := streamEntries(t, router, nil, loop.WithCheckpoint(cp, "r2"), loop.WithIfRunExists(loop.ResumeOnly))
			require.NoError(t, err)
			require.Equal(t, []string{"RS(router)", "TS(1)", "TCS(h1)", "TCC(h1,ok)", "TE(1)", "HO(router→target)",
				"TS(2)", "TD+", "MC[Txt(target here)]", "TE(2)", "RC"}, sig(evs))
			require.Equal(t, "target", res.FinalAgent)
			require.Equal(t, "target here", res.Output)
			require.Zero(t, routerP.Calls())
			require.Equal(t, "target", loadSnap(t, cp, "r2").Agent)
		})
	}},
	{"S73_resume_normalizes_malformed_args", func(t *testing.T) {
		cp := loop.NewMemoryCheckpointer()
		p1 := scripted.New([]scripted.Step{scripted.RawCall("add", `{"a": 1, `, "c1", "")})
		evs, _, err := stream(t, agentWith(p1, addTool()), "go", loop.WithCheckpoint(cp, "r1"), loop.WithMaxTurns(1))
		requireErrType(t, err, "MaxTurnsExceeded", "max_turns=1")
		require.Equal(t, []string{"RS(a)", "TS(1)", `MC[Call(c1,add,{"a": 1, )]`, "TCC(c1,err)", "TE(1)", "RF(MaxTurnsExceeded)"}, sig(evs))
		snap := loadSnap(t, cp, "r1")
		require.Equal(t, `{"a": 1, `, snap.Entries[1].Arguments, "stored arguments are still the raw bytes")

		p2 := scripted.New([]scripted.Step{scripted.Text("done")}, scripted.Sequential())
		evs, res, err := stream(t, agentWith(p2, addTool()), "go", loop.WithCheckpoint(cp, "r1"), loop.WithMaxTurns(3))
		require.NoError(t, err)
		require.Equal(t, "done", res.Output)
		require.Equal(t, []string{"RS(a)", "TS(2)", "TD+", "MC[Txt(done)]", "TE(2)", "RC"}, sig(evs), "no dangling calls")
		req := p2.Requests()[0].Entries
		require.Equal(t, loop.KindToolCall, req[1].Kind)
		require.JSONEq(t, `{"_raw": "{\"a\": 1, "}`, req[1].Arguments)
	}},
	{"S74_sessions", func(t *testing.T) {
		for _, tc := range []struct {
			name, instructions string
			want               []string
		}{
			{"no_instructions", "", []string{"In(user,I'm Mei)", "Txt(hi)", "In(user,my name?)"}},
			{"with_instructions", "be nice", []string{"In(system,be nice)", "In(user,I'm Mei)", "Txt(hi)", "In(user,my name?)"}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				p := scripted.New([]scripted.Step{scripted.Text("hi"), scripted.Text("Mei")})
				a := &loop.Agent{Name: "a", Instructions: tc.instructions, Provider: p}
				s := loop.NewMemorySession()
				_, r1, err := stream(t, a, "I'm Mei", loop.WithSession(s, "u1"))
				require.NoError(t, err)
				_, r2, err := stream(t, a, "my name?", loop.WithSession(s, "u1"))
				require.NoError(t, err)
				require.Equal(t, "Mei", r2.Output)
				require.Len(t, segmentsOf(t, s, "u1"), 2)
				flat, err := loop.LoadSession(context.Background(), s, "u1")
				require.NoError(t, err)
				require.Equal(t, []string{"I'm Mei", "hi", "my name?", "Mei"}, texts(flat))
				require.Equal(t, tc.want, entrySigs(p.Requests()[1].Entries))
				require.Equal(t, []string{"In(user,I'm Mei)", "Txt(hi)"}, entrySigs(r1.Entries))
				require.Equal(t, []string{"In(user,my name?)", "Txt(Mei)"}, entrySigs(r2.Entries))
			})
		}
		t.Run("checkpoint_stores_own_entries", func(t *testing.T) {
			s := loop.NewMemorySession()
			_, err := s.Append(context.Background(), "u1", loop.Segment{RunID: "r0", Entries: []loop.Entry{loop.UserText("hello"), loop.AssistantText("hi")}})
			require.NoError(t, err)
			p := scripted.New([]scripted.Step{scripted.Text("world")}, scripted.Sequential())
			cp := loop.NewMemoryCheckpointer()
			_, res, err := stream(t, agentWith(p), "again", loop.WithSession(s, "u1"), loop.WithCheckpoint(cp, "r1"))
			require.NoError(t, err)
			require.Equal(t, []string{"again", "world"}, texts(loadSnap(t, cp, "r1").Entries))
			require.Equal(t, []string{"again", "world"}, texts(res.Entries))
			segs := segmentsOf(t, s, "u1")
			require.Len(t, segs, 2)
			require.Equal(t, "r1", segs[1].RunID)
		})
	}},
	{"S76_delete_on_success", func(t *testing.T) {
		t.Run("completed_run", func(t *testing.T) {
			cp := loop.NewMemoryCheckpointer()
			p := scripted.New([]scripted.Step{scripted.Text("done")})
			_, res, err := stream(t, agentWith(p), "go", loop.WithCheckpoint(cp, "r1"), loop.WithDeleteOnSuccess())
			require.NoError(t, err)
			require.Equal(t, "done", res.Output)
			_, err = cp.Load(context.Background(), "r1")
			require.ErrorIs(t, err, loop.ErrNoSnapshot)
		})
		t.Run("replay", func(t *testing.T) {
			cp := loop.NewMemoryCheckpointer()
			p := scripted.New([]scripted.Step{scripted.Text("done")})
			_, _, err := stream(t, agentWith(p), "go", loop.WithCheckpoint(cp, "r1"))
			require.NoError(t, err)
			require.Equal(t, loop.StatusCompleted, loadSnap(t, cp, "r1").Status)
			evs, res, err := stream(t, agentWith(p), "go", loop.WithCheckpoint(cp, "r1"), loop.WithDeleteOnSuccess())
			require.NoError(t, err)
			require.Equal(t, []string{"RS(a)", "RC"}, sig(evs))
			require.Equal(t, "done", res.Output)
			require.Equal(t, 1, p.Calls())
			_, err = cp.Load(context.Background(), "r1")
			require.ErrorIs(t, err, loop.ErrNoSnapshot, "deleted after the replay")
		})
	}},
	{"S77_non_serializable_output", func(t *testing.T) {
		t.Run("seeded", func(t *testing.T) {
			cp := loop.NewMemoryCheckpointer()
			seedSnapshot(t, cp, "r1", []loop.Entry{loop.UserText("go"), loop.AssistantText("{}")}, loop.RunHead{
				Agent: "a", Turns: 1, Status: loop.StatusCompleted,
				Error: &loop.ErrorInfo{Type: "OutputNotSerializable", Message: "not JSON-representable"},
			})
			p := scripted.New(nil)
			evs, res, err := stream(t, agentWith(p), "go", loop.WithCheckpoint(cp, "r1"))
			require.Nil(t, res)
			requireErrType(t, err, "UserError", "not JSON-safe")
			require.Empty(t, evs)
			require.Zero(t, p.Calls())
		})
		// End to end: a structured output Go cannot encode as JSON.
		t.Run("produced", func(t *testing.T) {
			cp := loop.NewMemoryCheckpointer()
			p := scripted.New([]scripted.Step{scripted.Text(`{"x": 1}`)})
			a := agentWith(p)
			a.Output = &loop.OutputSpec{Schema: []byte(`{"type":"object"}`), Decode: func(json.RawMessage) (any, error) {
				return make(chan int), nil
			}}
			_, res, err := stream(t, a, "go", loop.WithCheckpoint(cp, "r1"))
			require.NoError(t, err)
			assert.NotNil(t, res.Output)
			snap := loadSnap(t, cp, "r1")
			require.Equal(t, loop.StatusCompleted, snap.Status)
			require.Nil(t, snap.Output)
			require.Equal(t, "OutputNotSerializable", snap.Error.Type)
			_, _, err = stream(t, a, "go", loop.WithCheckpoint(cp, "r1"))
			requireErrType(t, err, "UserError", "not JSON-safe")
			require.Equal(t, 1, p.Calls())
		})
	}},
}
