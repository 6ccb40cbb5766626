package compaction_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/loop/compaction"
	"github.com/lovia-fleet/lovia/pkg/loop/scripted"
)

// An agent whose tool outputs outgrow a small window: the policy offloads
// the older output to the store (the view shows a preview), the model
// recalls it in full, and the transcript keeps everything.
func Example() {
	type query struct {
		Service string `json:"service"`
	}
	logs := loop.NewTool("fetch_logs", "Fetch a service's logs.", func(_ context.Context, _ *loop.RunContext, q query) (string, error) {
		return strings.Repeat(q.Service+": request served in 12ms\n", 600), nil // ~16,000 chars
	})
	policy := compaction.New(compaction.Config{
		ContextWindow:       9000,
		ReserveOutputTokens: 1000,
		Stages:              []compaction.Stage{compaction.Offload{KeepLast: 1}, compaction.Clear{KeepLast: 1}},
		Store:               compaction.NewMemoryStore(0),
	})
	agent := &loop.Agent{
		Name:          "sre",
		Tools:         []*loop.Tool{logs},
		ContextPolicy: policy,
		// A scripted model stands in for an LLM. It reports no token
		// counts, so the policy's estimates stay uncalibrated.
		Provider: scripted.New(uncounted(
			scripted.CallTool("fetch_logs", query{"api"}, "c1"),
			scripted.CallTool("fetch_logs", query{"db"}, "c2"),
			scripted.CallTool(compaction.RecallToolName, map[string]string{"ref": "c1"}, "r1"),
			scripted.Text("Both services are healthy."),
		)),
	}
	h := loop.NewRunner(loop.RunnerConfig{}).Stream(context.Background(), agent, []loop.Entry{loop.UserText("Check api and db.")})
	for ev := range h.Events() {
		switch e := ev.(type) {
		case *loop.ContextCompacted:
			fmt.Printf("compacted (%s): %s\n", e.Notice.Reason, strings.Join(e.Notice.Detail, "; "))
		case *loop.ToolCallCompleted:
			fmt.Printf("%s returned %d chars\n", e.Call.Name, len(e.Output))
		case *loop.RunCompleted:
			fmt.Println("answer:", e.Output)
		}
	}
	res, _ := h.Result()
	fmt.Println("transcript keeps", len(outputs(res.Entries)["c1"]), "chars of c1")
	// Output:
	// fetch_logs returned 16800 chars
	// fetch_logs returned 16200 chars
	// compacted (offload): context was 105% full; 1 tool result(s) offloaded in total
	// recall_tool_result returned 16800 chars
	// compacted (offload): context was 107% full; 2 tool result(s) offloaded in total
	// answer: Both services are healthy.
	// transcript keeps 16800 chars of c1
}

// uncounted makes steps report no usage.
func uncounted(steps ...scripted.Step) []scripted.Step {
	for i := range steps {
		steps[i].Usage = &loop.Usage{}
	}
	return steps
}

// Compact called directly: a view for a transcript with one huge result.
func ExampleCompaction_Compact() {
	big := strings.Repeat("0123456789", 2000)
	transcript := []loop.Entry{
		loop.UserText("Compare the files."),
		loop.ToolCallEntry("c1", "read_file", `{"path":"data.txt"}`),
		loop.ToolResultEntry("c1", "read_file", big, false),
		loop.ToolCallEntry("c2", "stat", `{"path":"a.txt"}`),
		loop.ToolResultEntry("c2", "stat", "12 bytes", false),
		loop.ToolCallEntry("c3", "stat", `{"path":"b.txt"}`),
		loop.ToolResultEntry("c3", "stat", "14 bytes", false),
		loop.AssistantText("data.txt holds digits; a.txt and b.txt are tiny."),
		loop.UserText("Thanks. And now?"),
	}
	policy := compaction.New(compaction.Config{ContextWindow: 4000, ReserveOutputTokens: compaction.None})
	state := map[string]any{} // carried by the runner in checkpoints and session meta
	res, err := policy.Compact(context.Background(), &loop.CompactRequest{Entries: transcript, State: state})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Reason, res.TokensBefore, "→", res.TokensAfter)
	fmt.Println(strings.SplitN(res.Entries[2].Output, "\n", 2)[0])
	fmt.Println(len(transcript[2].Output), "chars still in the transcript")
	// Output:
	// offload 5113 → 248
	// [Tool result (20,000 chars) trimmed to a preview to save context.
	// 20000 chars still in the transcript
}
