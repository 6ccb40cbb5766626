package subagents_test

import (
	"fmt"

	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/plugins/subagents"
)

// The children of a run are read from its transcript, so the worker that
// resumes a parent knows which children to watch.
func ExampleChildren() {
	transcript := []loop.Entry{
		loop.UserText("research this"),
		loop.ToolCallEntry("s1", subagents.SpawnTool, `{"agent":"researcher","task":"find the paper"}`),
		loop.ToolResultEntry("s1", subagents.SpawnTool, "Subagent 01jrun7 (agent researcher) started. Its report will arrive as a message when it ends; continue meanwhile, or call wait_subagents.", false),
	}
	fmt.Println(subagents.Children(transcript))
	// Output: [01jrun7]
}
