package todo_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/internal/fleettest"
	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/loop/scripted"
)

// TestTodoThroughTheFleet: an agents-file agent with `plugins: {todo: {}}`
// run by a real worker on embedded NATS. The second model request ends
// with the reminder; the stored checkpoint and session hold none; the
// tool_call_completed event carries the list as result.todos.
func TestTodoThroughTheFleet(t *testing.T) {
	const agents = `
agents:
  - name: planner
    model: scripted
    plugins:
      todo: {}
    script:
      - call: {name: todo_write, id: t1, args: {todos: [{content: Draft, status: in_progress, active_form: Drafting}, {content: Review, status: pending}]}}
      - text: planned
`
	f := fleettest.Start(t, fleettest.Options{AgentsYAML: agents})
	ctx := context.Background()
	rep, err := f.Client.Submit(ctx, &bus.RunRequest{Agent: "planner", SessionID: "s1", Input: bus.TextInput("plan")})
	require.NoError(t, err)
	envs := f.Events(rep.RunID, 30*time.Second)
	require.Equal(t, loop.EventRunCompleted, envs[len(envs)-1].Type, "%v", fleettest.Types(envs))

	done := fleettest.OfType(envs, loop.EventToolCallCompleted)
	require.Len(t, done, 1)
	var wire struct {
		Call   loop.ToolCall `json:"call"`
		Result struct {
			Todos []map[string]string `json:"todos"`
		} `json:"result"`
	}
	require.NoError(t, json.Unmarshal(done[0].Data, &wire), "%s", done[0].Data)
	require.Equal(t, "todo_write", wire.Call.Name)
	require.Equal(t, []map[string]string{
		{"content": "Draft", "status": "in_progress", "active_form": "Drafting"},
		{"content": "Review", "status": "pending", "active_form": "Review"},
	}, wire.Result.Todos)

	a, _ := f.Catalog.Get("planner")
	model := a.Provider.(*scripted.Provider)
	reqs := model.Requests()
	require.Len(t, reqs, 2)
	tail := reqs[1].Entries[len(reqs[1].Entries)-1]
	require.True(t, strings.HasPrefix(tail.Content, "<system-reminder>"), "the second request ends with the reminder: %q", tail.Content)
	require.Contains(t, tail.Content, "[>] Draft (in progress: Drafting)")

	snap, err := f.Store.Checkpointer().Load(ctx, rep.RunID)
	require.NoError(t, err)
	require.NotEmpty(t, snap.Entries)
	require.False(t, anyReminder(snap.Entries), "the checkpoint holds no reminder")
	segs, err := f.Store.Session().Segments(ctx, "s1")
	require.NoError(t, err)
	require.Len(t, segs, 1)
	require.False(t, anyReminder(segs[0].Entries), "the session holds no reminder")
}
