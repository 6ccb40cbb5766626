package loop_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/loop/scripted"
)

// hookPlugin contributes hooks.
type hookPlugin struct{ hooks *loop.Hooks }

func (p *hookPlugin) Name() string       { return "hook_plugin" }
func (p *hookPlugin) Hooks() *loop.Hooks { return p.hooks }

// syncBuffer is a bytes.Buffer safe for a logger used across goroutines.
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

// s2Script is the script of S2 (tool round trip).
func s2Script() []scripted.Step {
	return []scripted.Step{
		scripted.CallTool("add", map[string]int{"a": 2, "b": 3}, "c1"),
		scripted.Text("The answer is 5."),
	}
}

// §8.13 Plugins, hooks, stream contract.
var streamScenarios = []scenario{
	{"S85_hooks", func(t *testing.T) {
		type seen struct {
			ev        loop.Event
			sessionID string
			agent     string
			usage     loop.Usage
		}
		var (
			catchAll []seen
			typed    []string
			order    []string // dispatch order: typed handlers, catch-alls, plugin, run hooks, consumer
		)
		hooks := loop.NewHooks()
		// Typed handlers are registered first, yet catch-alls run first.
		hooks.On(func(_ context.Context, _ *loop.RunContext, ev loop.Event) {
			typed = append(typed, "start:"+ev.(*loop.ToolCallStarted).Call.Name)
			order = append(order, "typed:"+string(ev.Type()))
		}, loop.EventToolCallStarted)
		hooks.On(func(_ context.Context, _ *loop.RunContext, ev loop.Event) {
			typed = append(typed, "end:"+ev.(*loop.ToolCallCompleted).Call.Name)
			order = append(order, "typed:"+string(ev.Type()))
		}, loop.EventToolCallCompleted)
		hooks.OnAny(func(_ context.Context, rc *loop.RunContext, ev loop.Event) {
			catchAll = append(catchAll, seen{ev, rc.SessionID, rc.Agent().Name, rc.Usage()})
			order = append(order, "agent:"+string(ev.Type()))
		})
		// A raising handler is logged and swallowed.
		hooks.On(func(context.Context, *loop.RunContext, loop.Event) { panic("hook exploded") }, loop.EventTurnStarted)
		plugin := &hookPlugin{loop.NewHooks().OnAny(func(_ context.Context, _ *loop.RunContext, ev loop.Event) {
			order = append(order, "plugin:"+string(ev.Type()))
		})}
		runHooks := loop.NewHooks().OnAny(func(_ context.Context, _ *loop.RunContext, ev loop.Event) {
			order = append(order, "run:"+string(ev.Type()))
		})

		p := scripted.New(s2Script())
		a := agentWith(p, addTool())
		a.Hooks = hooks
		a.Plugins = []loop.Plugin{plugin}
		logs := &syncBuffer{}
		runner := loop.NewRunner(loop.RunnerConfig{Logger: slog.New(slog.NewTextHandler(logs, nil))})
		h := runner.Stream(context.Background(), a, []loop.Entry{loop.UserText("add")},
			loop.WithSession(loop.NewMemorySession(), "u1"), loop.WithHooks(runHooks))
		var evs []loop.Event
		for ev := range h.Events() {
			evs = append(evs, ev)
			order = append(order, "consumer:"+string(ev.Type()))
		}
		res, err := h.Result()
		require.NoError(t, err, "the run completes despite the raising handler")
		require.Equal(t, "The answer is 5.", res.Output)
		require.Contains(t, logs.String(), "hook exploded")

		// The catch-all sees every event of the stream, in order, RS and RC included.
		require.Len(t, catchAll, len(evs))
		for i := range evs {
			require.Same(t, evs[i], catchAll[i].ev, "event %d", i)
		}
		require.Equal(t, loop.EventRunStarted, catchAll[0].ev.Type())
		require.Equal(t, loop.EventRunCompleted, catchAll[len(catchAll)-1].ev.Type())
		require.Equal(t, []string{"start:add", "end:add"}, typed)

		// Handlers receive the live context.
		for _, s := range catchAll {
			require.Equal(t, "u1", s.sessionID)
			require.Equal(t, "a", s.agent)
		}
		require.Equal(t, loop.Usage{}, catchAll[0].usage, "nothing used at RunStarted")
		var firstMC *seen
		for i := range catchAll {
			if catchAll[i].ev.Type() == loop.EventMessageCompleted {
				firstMC = &catchAll[i]
				break
			}
		}
		require.Equal(t, loop.Usage{InputTokens: 1, OutputTokens: 1, TotalTokens: 2}, firstMC.usage)
		require.Equal(t, res.Usage, catchAll[len(catchAll)-1].usage)

		// Per event: catch-alls, typed handlers, plugin hooks, run hooks, then the consumer.
		var want []string
		for _, ev := range evs {
			ty := string(ev.Type())
			want = append(want, "agent:"+ty)
			if ev.Type() == loop.EventToolCallStarted || ev.Type() == loop.EventToolCallCompleted {
				want = append(want, "typed:"+ty)
			}
			want = append(want, "plugin:"+ty, "run:"+ty, "consumer:"+ty)
		}
		require.Equal(t, want, order)
	}},
	{"S86_stream_contract", func(t *testing.T) {
		// lovia raises on a second iteration; here a handle iterated twice
		// yields no events the second time and Result still reports the
		// first run.
		t.Run("iterate_twice", func(t *testing.T) {
			p := scripted.New(s2Script())
			h := newRunner().Stream(context.Background(), agentWith(p, addTool()), []loop.Entry{loop.UserText("add")})
			evs, res, err := collect(h)
			require.NoError(t, err)
			s := sig(evs)
			require.Equal(t, "RC", s[len(s)-1])
			n := 0
			for range h.Events() {
				n++
			}
			require.Zero(t, n, "second iteration yields no events")
			res2, err := h.Result()
			require.NoError(t, err)
			require.Same(t, res, res2)
			require.Equal(t, 2, p.Calls(), "the run executed once")
		})
		t.Run("iterate_then_result", func(t *testing.T) {
			p := scripted.New(s2Script())
			h := newRunner().Stream(context.Background(), agentWith(p, addTool()), []loop.Entry{loop.UserText("add")})
			var last loop.Event
			for ev := range h.Events() {
				last = ev
			}
			res, err := h.Result()
			require.NoError(t, err)
			require.Equal(t, "The answer is 5.", res.Output)
			require.Same(t, res, last.(*loop.RunCompleted).Result)
		})
		t.Run("result_without_iterating", func(t *testing.T) {
			p := scripted.New(s2Script())
			res, err := newRunner().Stream(context.Background(), agentWith(p, addTool()), []loop.Entry{loop.UserText("add")}).Result()
			require.NoError(t, err)
			require.Equal(t, "The answer is 5.", res.Output)
		})
		// Abandoning = breaking out of the range loop before RC.
		t.Run("abandon", func(t *testing.T) {
			p := scripted.New(s2Script())
			cp := loop.NewMemoryCheckpointer()
			h := newRunner().Stream(context.Background(), agentWith(p, addTool()), []loop.Entry{loop.UserText("add")}, loop.WithCheckpoint(cp, "r1"))
			var got []loop.Event
			for ev := range h.Events() {
				got = append(got, ev)
				if ev.Type() == loop.EventToolCallStarted {
					break
				}
			}
			require.Equal(t, []string{"RS(a)", "TS(1)", `MC[Call(c1,add,{"a":2,"b":3})]`, "TCS(c1)"}, sig(got))
			res, err := h.Result()
			require.Nil(t, res)
			require.ErrorIs(t, err, loop.ErrAbandoned)
			require.Contains(t, err.Error(), "abandoned")
			// No terminal snapshot: the last running one stands.
			snap := loadSnap(t, cp, "r1")
			require.Equal(t, loop.StatusRunning, snap.Status)
			require.Equal(t, 1, snap.Turns)
			require.Equal(t, []string{"In(user,add)", `Call(c1,add,{"a":2,"b":3})`}, entrySigs(snap.Entries))
			require.Equal(t, 1, p.Calls())
		})
		t.Run("tool_name_conflict", func(t *testing.T) {
			p := scripted.New(s2Script())
			h := newRunner().Stream(context.Background(), agentWith(p, addTool(), addTool()), []loop.Entry{loop.UserText("add")})
			n := 0
			for range h.Events() {
				n++
			}
			require.Zero(t, n, "zero events")
			_, err := h.Result()
			requireErrType(t, err, "UserError", "Tool name conflict")
			require.Zero(t, p.Calls())
		})
		// lovia raises at stream() call time; Stream records the error
		// synchronously (nothing runs) and the handle reports it with zero
		// events.
		t.Run("session_without_id", func(t *testing.T) {
			p := scripted.New(s2Script())
			h := newRunner().Stream(context.Background(), agentWith(p, addTool()), []loop.Entry{loop.UserText("add")},
				loop.WithSession(loop.NewMemorySession(), ""))
			_, err := h.Result()
			requireErrType(t, err, "UserError", "session")
			var ue *loop.UserError
			require.True(t, errors.As(err, &ue))
			n := 0
			for range h.Events() {
				n++
			}
			require.Zero(t, n)
			require.Zero(t, p.Calls())
		})
	}},
}
