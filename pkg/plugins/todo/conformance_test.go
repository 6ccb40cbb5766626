package todo_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/loop/scripted"
	"github.com/lovia-fleet/lovia/pkg/plugins/todo"
)

func collect(t *testing.T, h *loop.RunHandle) ([]loop.Event, *loop.RunResult) {
	t.Helper()
	var evs []loop.Event
	for ev := range h.Events() {
		evs = append(evs, ev)
	}
	res, err := h.Result()
	require.NoError(t, err)
	return evs, res
}

func types(evs []loop.Event) []loop.EventType {
	out := make([]loop.EventType, len(evs))
	for i, e := range evs {
		out[i] = e.Type()
	}
	return out
}

func items(pairs ...string) []todo.Item {
	var out []todo.Item
	for i := 0; i+1 < len(pairs); i += 2 {
		out = append(out, todo.Item{Content: pairs[i], Status: todo.Status(pairs[i+1])})
	}
	return out
}

// anyReminder reports whether an entry holds a system reminder.
func anyReminder(es []loop.Entry) bool {
	for _, e := range es {
		if strings.HasPrefix(e.ContentText(), "<system-reminder>") || strings.Contains(e.Output, "<system-reminder>") {
			return true
		}
	}
	return false
}

func TestTodo(t *testing.T) {
	t.Parallel()

	t.Run("reminder_in_the_next_request_never_persisted", func(t *testing.T) {
		t.Parallel()
		model := scripted.New([]scripted.Step{
			scripted.CallTool(todo.ToolName, map[string]any{"todos": items("Read the code", "in_progress", "Write tests", "pending")}, "c1"),
			scripted.Text("done"),
		})
		agent := &loop.Agent{Name: "a", Instructions: "Be brief.", Provider: model, Plugins: []loop.Plugin{todo.New()}}
		cp, sess := loop.NewMemoryCheckpointer(), loop.NewMemorySession()
		evs, res := collect(t, loop.NewRunner(loop.RunnerConfig{}).Stream(context.Background(), agent,
			[]loop.Entry{loop.UserText("plan it")}, loop.WithCheckpoint(cp, "r1"), loop.WithSession(sess, "s1")))
		require.Equal(t, "done", res.Output)
		require.Equal(t, []loop.EventType{
			loop.EventRunStarted, loop.EventTurnStarted, loop.EventMessageCompleted, loop.EventToolCallStarted,
			loop.EventToolCallCompleted, loop.EventTurnEnded, loop.EventTurnStarted, loop.EventTextDelta,
			loop.EventMessageCompleted, loop.EventTurnEnded, loop.EventRunCompleted,
		}, compact(types(evs)))

		// The tool's result is the list, recognisable on the wire.
		var done *loop.ToolCallCompleted
		for _, e := range evs {
			if c, ok := e.(*loop.ToolCallCompleted); ok {
				done = c
			}
		}
		require.NotNil(t, done)
		require.Equal(t, todo.Result{Todos: []todo.Item{
			{Content: "Read the code", Status: todo.InProgress, ActiveForm: "Read the code"},
			{Content: "Write tests", Status: todo.Pending, ActiveForm: "Write tests"},
		}}, done.Result)
		require.Contains(t, done.Output, "[>] Read the code")
		wire, err := json.Marshal(done)
		require.NoError(t, err)
		require.Contains(t, string(wire), `"result":{"todos":[{"content":"Read the code","status":"in_progress","active_form":"Read the code"}`)

		reqs := model.Requests()
		require.Len(t, reqs, 2)
		require.False(t, anyReminder(reqs[0].Entries), "no reminder before the first todo_write")
		require.Contains(t, reqs[0].Entries[0].Content, todo.Instructions, "the plugin's instructions are in the system prompt")
		last := reqs[1].Entries[len(reqs[1].Entries)-1]
		require.Equal(t, loop.RoleUser, last.Role, "the reminder is the tail of the second request")
		require.Equal(t, "<system-reminder>\nYour current todo list (update it with todo_write as you go):\n[>] Read the code (in progress: Read the code)\n[ ] Write tests\n</system-reminder>", last.Content)
		require.True(t, strings.Contains(reqs[1].Entries[0].Content, todo.Instructions))
		var toolNames []string
		for _, s := range reqs[0].Tools {
			toolNames = append(toolNames, s.Name)
		}
		require.Equal(t, []string{todo.ToolName}, toolNames)

		require.False(t, anyReminder(res.Entries), "transcript")
		snap, err := cp.Load(context.Background(), "r1")
		require.NoError(t, err)
		require.False(t, anyReminder(snap.Entries), "checkpoint")
		segs, err := sess.Segments(context.Background(), "s1")
		require.NoError(t, err)
		require.Len(t, segs, 1)
		require.False(t, anyReminder(segs[0].Entries), "session")
	})

	t.Run("extra_in_progress_demoted", func(t *testing.T) {
		t.Parallel()
		model := scripted.New([]scripted.Step{
			scripted.CallTool(todo.ToolName, map[string]any{"todos": []map[string]string{
				{"content": "A", "status": "in_progress", "active_form": "Doing A"},
				{"content": "B", "status": "in_progress"},
				{"content": "C", "status": "completed"},
			}}, "c1"),
			scripted.Text("ok"),
		})
		agent := &loop.Agent{Name: "a", Provider: model, Plugins: []loop.Plugin{todo.New()}}
		_, res := collect(t, loop.NewRunner(loop.RunnerConfig{}).Stream(context.Background(), agent, []loop.Entry{loop.UserText("go")}))
		var out string
		for _, e := range res.Entries {
			if e.Kind == loop.KindToolResult {
				out = e.Output
			}
		}
		require.Equal(t, "Todo list updated (3 items):\n[>] A (in progress: Doing A)\n[ ] B\n[x] C\n\nOnly one item may be in_progress: 1 later one(s) set to pending.", out)
		last := model.Requests()[1].Entries
		require.Contains(t, last[len(last)-1].Content, "[ ] B\n[x] C")
	})

	t.Run("missing_status_is_pending", func(t *testing.T) {
		t.Parallel()
		// Models often leave status out; lovia reads it as pending.
		model := scripted.New([]scripted.Step{
			scripted.RawCall(todo.ToolName, `{"todos":[{"content":"Plan","status":"in_progress"},{"content":"Ship"}]}`, "c1", ""),
			scripted.Text("ok"),
		})
		agent := &loop.Agent{Name: "a", Provider: model, Plugins: []loop.Plugin{todo.New()}}
		_, res := collect(t, loop.NewRunner(loop.RunnerConfig{}).Stream(context.Background(), agent, []loop.Entry{loop.UserText("go")}))
		var out []loop.Entry
		for _, e := range res.Entries {
			if e.Kind == loop.KindToolResult {
				out = append(out, e)
			}
		}
		require.Len(t, out, 1)
		require.False(t, out[0].IsError, out[0].Output)
		require.Equal(t, "Todo list updated (2 items):\n[>] Plan (in progress: Plan)\n[ ] Ship", out[0].Output)
		last := model.Requests()[1].Entries
		require.Contains(t, last[len(last)-1].Content, "[ ] Ship", "the reminder lists it as pending")
		got, ok := todo.FromEntries(res.Entries)
		require.True(t, ok)
		require.Equal(t, todo.Pending, got[1].Status)
	})

	t.Run("invalid_newest_call_keeps_the_previous_list", func(t *testing.T) {
		t.Parallel()
		model := scripted.New([]scripted.Step{
			scripted.CallTool(todo.ToolName, map[string]any{"todos": items("First", "pending")}, "c1"),
			scripted.RawCall(todo.ToolName, `{"todos":[{"content":"","status":"pending"}]}`, "c2", ""),
			scripted.RawCall(todo.ToolName, `{"todos": not json`, "c3", ""),
			scripted.Text("ok"),
		})
		agent := &loop.Agent{Name: "a", Provider: model, Plugins: []loop.Plugin{todo.New()}}
		_, res := collect(t, loop.NewRunner(loop.RunnerConfig{}).Stream(context.Background(), agent, []loop.Entry{loop.UserText("go")}))
		var errs []string
		for _, e := range res.Entries {
			if e.Kind == loop.KindToolResult && e.IsError {
				errs = append(errs, e.Output)
			}
		}
		require.Len(t, errs, 2)
		require.Contains(t, errs[0], "todos[0] has no content")
		reqs := model.Requests()
		for _, i := range []int{1, 2, 3} {
			tail := reqs[i].Entries[len(reqs[i].Entries)-1]
			require.Contains(t, tail.Content, "[ ] First", "request %d", i)
		}
	})

	t.Run("resume_on_another_worker_rebuilds_from_the_checkpoint", func(t *testing.T) {
		t.Parallel()
		// Worker 1 wrote the list and crashed after saving the tool result.
		cp := loop.NewMemoryCheckpointer()
		args, _ := json.Marshal(map[string]any{"todos": items("Step one", "completed", "Step two", "in_progress")})
		_, err := cp.Append(context.Background(), "r2", loop.CheckpointWrite{
			Entries: []loop.Entry{
				loop.UserText("work"),
				loop.ToolCallEntry("c1", todo.ToolName, string(args)),
				loop.ToolResultEntry("c1", todo.ToolName, "Todo list updated (2 items)", false),
			},
			Head: loop.RunHead{Agent: "a", Turns: 1, Status: loop.StatusRunning},
		})
		require.NoError(t, err)
		// Worker 2: its own runner, provider and plugin value.
		// The script is indexed by model turn: the first was worker 1's.
		model := scripted.New([]scripted.Step{scripted.Text("unused"), scripted.Text("resumed")})
		agent := &loop.Agent{Name: "a", Provider: model, Plugins: []loop.Plugin{todo.New()}}
		evs, res := collect(t, loop.NewRunner(loop.RunnerConfig{}).Stream(context.Background(), agent, nil,
			loop.WithCheckpoint(cp, "r2"), loop.WithIfRunExists(loop.ResumeOnly)))
		require.Equal(t, "resumed", res.Output)
		require.Equal(t, loop.EventRunStarted, evs[0].Type())
		first := model.Requests()[0].Entries
		require.Equal(t, "<system-reminder>\nYour current todo list (update it with todo_write as you go):\n[x] Step one\n[>] Step two (in progress: Step two)\n</system-reminder>", first[len(first)-1].Content)
		snap, err := cp.Load(context.Background(), "r2")
		require.NoError(t, err)
		require.False(t, anyReminder(snap.Entries))
	})

	t.Run("handoff_keeps_the_list", func(t *testing.T) {
		t.Parallel()
		p := todo.New()
		// Indexed by model turn: a's two turns come first.
		second := scripted.New([]scripted.Step{scripted.Text("unused"), scripted.Text("unused"), scripted.Text("from b")})
		b := &loop.Agent{Name: "b", Provider: second, Plugins: []loop.Plugin{p}}
		first := scripted.New([]scripted.Step{
			scripted.CallTool(todo.ToolName, map[string]any{"todos": items("Hand over", "in_progress")}, "c1"),
			scripted.CallTool(loop.HandoffToolName("b"), map[string]any{}, "c2"),
		})
		a := &loop.Agent{Name: "a", Provider: first, Plugins: []loop.Plugin{p}, Handoffs: []loop.Handoff{loop.HandoffTo(b)}}
		_, res := collect(t, loop.NewRunner(loop.RunnerConfig{}).Stream(context.Background(), a, []loop.Entry{loop.UserText("go")}))
		require.Equal(t, "b", res.FinalAgent)
		view := second.Requests()[0].Entries
		require.Contains(t, view[len(view)-1].Content, "[>] Hand over")
	})

	t.Run("concurrent_runs_share_one_plugin", func(t *testing.T) {
		t.Parallel()
		p := todo.New()
		runner := loop.NewRunner(loop.RunnerConfig{})
		handles := make([]*loop.RunHandle, 4)
		models := make([]*scripted.Provider, 4)
		for i := range handles {
			name := string(rune('A' + i))
			models[i] = scripted.New([]scripted.Step{
				scripted.CallTool(todo.ToolName, map[string]any{"todos": items("Task "+name, "pending")}, "c1"),
				scripted.Text("ok"),
			})
			handles[i] = runner.Stream(context.Background(), &loop.Agent{Name: "a", Provider: models[i], Plugins: []loop.Plugin{p}}, []loop.Entry{loop.UserText("go")})
		}
		for i, h := range handles {
			collect(t, h)
			view := models[i].Requests()[1].Entries
			require.Contains(t, view[len(view)-1].Content, "[ ] Task "+string(rune('A'+i)))
		}
	})
}

// compact folds runs of text deltas into one.
func compact(ts []loop.EventType) []loop.EventType {
	var out []loop.EventType
	for _, t := range ts {
		if t == loop.EventTextDelta && len(out) > 0 && out[len(out)-1] == t {
			continue
		}
		out = append(out, t)
	}
	return out
}

func TestFromEntriesWithoutACall(t *testing.T) {
	t.Parallel()
	_, ok := todo.FromEntries([]loop.Entry{loop.UserText("hi")})
	require.False(t, ok)
	require.Equal(t, "<system-reminder>\nYour todo list is empty.\n</system-reminder>", todo.Reminder(nil))
}
