package memory_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/loop/scripted"
	"github.com/lovia-fleet/lovia/pkg/plugins/memory"
)

// A note remembered in one run is in the system prompt of the session's
// next run.
func Example() {
	p, err := memory.New(memory.Config{Store: memory.NewMemoryStore()})
	if err != nil {
		fmt.Println(err)
		return
	}
	sess := loop.NewMemorySession()
	model := scripted.New([]scripted.Step{
		scripted.CallTool("remember", map[string]string{"text": "Prefers metric units."}, "c1"),
		scripted.Text("Noted."),
		scripted.Text("It is 5 km away."),
	})
	agent := &loop.Agent{Name: "guide", Provider: model}
	memory.Attach(agent, p)
	runner := loop.NewRunner(loop.RunnerConfig{})
	for _, in := range []string{"I use metric.", "How far is it?"} {
		if _, err := runner.Run(context.Background(), agent, []loop.Entry{loop.UserText(in)}, loop.WithSession(sess, "s1"), loop.WithCheckpoint(loop.NewMemoryCheckpointer(), "run-"+in[:1])); err != nil {
			fmt.Println(err)
			return
		}
	}
	system := model.Requests()[2].Entries[0].Content
	fmt.Println(system[strings.Index(system, "Your notes"):])
	// Output:
	// Your notes, oldest first:
	// - [811c85e17d22] Prefers metric units.
}
