package loop_test

import (
	"context"
	"testing"

	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/loop/scripted"
)

// A tool function learns the call it executes from its context (a tool
// that calls another system names the call by its stable id); outside a
// call there is none.
func TestToolCallFrom(t *testing.T) {
	t.Parallel()
	if _, ok := loop.ToolCallFrom(context.Background()); ok {
		t.Fatal("a context outside a tool call names a call")
	}
	var got []loop.ToolCall
	probe := loop.NewTool("probe", "Report the call.", func(ctx context.Context, _ *loop.RunContext, _ struct{}) (string, error) {
		tc, ok := loop.ToolCallFrom(ctx)
		if !ok {
			t.Error("the tool's context names no call")
		}
		got = append(got, tc)
		return "ok", nil
	})
	agent := &loop.Agent{Name: "a", Tools: []*loop.Tool{probe}, Provider: scripted.New([]scripted.Step{
		scripted.CallTool("probe", map[string]any{}, "call-7"),
		scripted.Text("done"),
	})}
	if _, err := loop.NewRunner(loop.RunnerConfig{}).Run(context.Background(), agent, []loop.Entry{loop.UserText("go")}); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].ID != "call-7" || got[0].Name != "probe" {
		t.Fatalf("the tool saw calls %+v, want one probe call-7", got)
	}
}
