package todo_test

import (
	"context"
	"fmt"

	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/loop/scripted"
	"github.com/lovia-fleet/lovia/pkg/plugins/todo"
)

// An agent with the Todo plugin: the model writes a list, and its next
// request ends with the list as a reminder.
func Example() {
	model := scripted.New([]scripted.Step{
		scripted.CallTool("todo_write", map[string]any{"todos": []map[string]string{
			{"content": "Find the bug", "status": "in_progress"},
			{"content": "Fix it", "status": "pending"},
		}}, "c1"),
		scripted.Text("On it."),
	})
	agent := &loop.Agent{Name: "fixer", Provider: model, Plugins: []loop.Plugin{todo.New()}}
	res, err := loop.NewRunner(loop.RunnerConfig{}).Run(context.Background(), agent, []loop.Entry{loop.UserText("fix the bug")})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Output)
	view := model.Requests()[1].Entries
	fmt.Println(view[len(view)-1].Content)
	// Output:
	// On it.
	// <system-reminder>
	// Your current todo list (update it with todo_write as you go):
	// [>] Find the bug (in progress: Find the bug)
	// [ ] Fix it
	// </system-reminder>
}
