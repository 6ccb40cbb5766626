package loop_test

import (
	"context"
	"strings"
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

// An error's hint is for people, not for the model: a tool that fails with
// a hinted error gives the model the message alone; the hint stays on the
// tool_call_failed event.
func TestToolErrorHintIsNotForTheModel(t *testing.T) {
	t.Parallel()
	fail := loop.NewTool("fail", "Fail.", func(context.Context, *loop.RunContext, struct{}) (string, error) {
		return "", &loop.ToolError{Tool: "fail", Message: "the disk is full", Hint: "free some space and run again"}
	})
	model := scripted.New([]scripted.Step{scripted.CallTool("fail", map[string]any{}, "c1"), scripted.Text("ok")})
	agent := &loop.Agent{Name: "a", Tools: []*loop.Tool{fail}, Provider: model}
	h := loop.NewRunner(loop.RunnerConfig{}).Stream(context.Background(), agent, []loop.Entry{loop.UserText("go")})
	var failed *loop.ToolCallFailed
	var seen string
	for ev := range h.Events() {
		switch e := ev.(type) {
		case *loop.ToolCallFailed:
			failed = e
		case *loop.ToolCallCompleted:
			seen = e.Output
		}
	}
	if _, err := h.Result(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(seen, "the disk is full") || strings.Contains(seen, "hint") || strings.Contains(seen, "free some space") {
		t.Fatalf("the model saw %q, want the message without the hint", seen)
	}
	if failed == nil || failed.Error.Hint != "free some space and run again" {
		t.Fatalf("the hint is not on the tool_call_failed event: %+v", failed)
	}
}
