package loop_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/loop/scripted"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// Standard tools of LOVIA-SEMANTICS §8.0.
type addIn struct {
	A int `json:"a"`
	B int `json:"b"`
}

func addTool() *loop.Tool {
	return loop.NewTool("add", "Add two integers.", func(_ context.Context, _ *loop.RunContext, in addIn) (int, error) {
		return in.A + in.B, nil
	})
}

type empty struct{}

func clockTool(calls *int) *loop.Tool {
	return loop.NewTool("clock", "The time.", func(_ context.Context, _ *loop.RunContext, _ empty) (string, error) {
		if calls != nil {
			*calls++
		}
		return "12:00", nil
	})
}

func sensitiveTool() *loop.Tool {
	return loop.NewTool("sensitive", "Needs approval.", func(_ context.Context, _ *loop.RunContext, _ empty) (string, error) {
		return "did it", nil
	}, loop.RequireApproval())
}

func noopTool() *loop.Tool {
	return loop.NewTool("noop", "Does nothing.", func(_ context.Context, _ *loop.RunContext, _ empty) (string, error) {
		return "ok", nil
	})
}

func agentWith(p loop.Provider, tools ...*loop.Tool) *loop.Agent {
	return &loop.Agent{Name: "a", Provider: p, Tools: tools}
}

func newRunner() *loop.Runner { return loop.NewRunner(loop.RunnerConfig{}) }

// zeroRetry makes k attempts with no backoff.
func zeroRetry(k int) *loop.RetryPolicy {
	return &loop.RetryPolicy{MaxAttempts: k, Sleep: func(context.Context, time.Duration) error { return nil }}
}

// collect iterates a handle to its end.
func collect(h *loop.RunHandle) ([]loop.Event, *loop.RunResult, error) {
	var evs []loop.Event
	for ev := range h.Events() {
		evs = append(evs, ev)
	}
	res, err := h.Result()
	return evs, res, err
}

func stream(t *testing.T, a *loop.Agent, input string, opts ...loop.RunOption) ([]loop.Event, *loop.RunResult, error) {
	t.Helper()
	var in []loop.Entry
	if input != "" {
		in = []loop.Entry{loop.UserText(input)}
	}
	return collect(newRunner().Stream(context.Background(), a, in, opts...))
}

// sig renders events in the notation of LOVIA-SEMANTICS §8.0; consecutive
// deltas of one kind collapse into "TD+" / "RD+".
func sig(evs []loop.Event) []string {
	var out []string
	for _, ev := range evs {
		var s string
		switch e := ev.(type) {
		case *loop.RunStarted:
			s = "RS(" + e.Agent + ")"
		case *loop.TurnStarted:
			s = fmt.Sprintf("TS(%d)", e.TurnNo)
		case *loop.TurnEnded:
			s = fmt.Sprintf("TE(%d)", e.TurnNo)
		case *loop.TextDelta:
			s = "TD+"
		case *loop.ReasoningDelta:
			s = "RD+"
		case *loop.OutputDiscarded:
			s = "OD"
		case *loop.MessageCompleted:
			s = "MC[" + entriesSig(e.Entries) + "]"
		case *loop.UserMessageInjected:
			s = fmt.Sprintf("UMI(%s,%d)", e.Content, e.TurnNo)
		case *loop.ToolCallStarted:
			s = "TCS(" + e.Call.ID + ")"
		case *loop.ToolCallFailed:
			s = "TCF(" + e.Call.ID + ")"
		case *loop.ToolCallCompleted:
			st := "ok"
			if e.IsError {
				st = "err"
			}
			s = fmt.Sprintf("TCC(%s,%s)", e.Call.ID, st)
		case *loop.ApprovalRequired:
			s = "AR(" + e.Call.ID + ")"
		case *loop.ApprovalResolved:
			s = fmt.Sprintf("APR(%s,%s)", e.CallID, e.Decision)
		case *loop.HandoffOccurred:
			s = "HO(" + e.FromAgent + "→" + e.ToAgent + ")"
		case *loop.ContextCompacted:
			s = fmt.Sprintf("CC(%s,%v)", e.Notice.Reason, e.Notice.Reactive)
		case *loop.RunCompleted:
			s = "RC"
		case *loop.RunFailed:
			s = "RF(" + e.Error.Type + ")"
		default:
			s = string(ev.Type())
		}
		if (s == "TD+" || s == "RD+") && len(out) > 0 && out[len(out)-1] == s {
			continue
		}
		out = append(out, s)
	}
	return out
}

func entriesSig(es []loop.Entry) string {
	parts := make([]string, 0, len(es))
	for _, e := range es {
		parts = append(parts, entrySig(e))
	}
	return strings.Join(parts, " ")
}

func entrySig(e loop.Entry) string {
	switch e.Kind {
	case loop.KindInput:
		return fmt.Sprintf("In(%s,%s)", e.Role, e.ContentText())
	case loop.KindAssistantText:
		return "Txt(" + e.Text + ")"
	case loop.KindReasoning:
		return "Rsn(" + e.Text + ")"
	case loop.KindToolCall:
		return fmt.Sprintf("Call(%s,%s,%s)", e.CallID, e.Name, e.Arguments)
	case loop.KindToolResult:
		if e.IsError {
			return fmt.Sprintf("ResErr(%s,%s)", e.CallID, e.Output)
		}
		return fmt.Sprintf("Res(%s,%s)", e.CallID, e.Output)
	}
	return string(e.Kind)
}

func entrySigs(es []loop.Entry) []string {
	out := make([]string, 0, len(es))
	for _, e := range es {
		out = append(out, entrySig(e))
	}
	return out
}

// find returns the events of type T.
func find[T loop.Event](evs []loop.Event) []T {
	var out []T
	for _, ev := range evs {
		if e, ok := ev.(T); ok {
			out = append(out, e)
		}
	}
	return out
}

func terminal(t *testing.T, evs []loop.Event) loop.Event {
	t.Helper()
	n := 0
	for _, ev := range evs {
		if loop.IsTerminal(ev) {
			n++
		}
	}
	require.Equal(t, 1, n, "exactly one terminal event")
	require.True(t, loop.IsTerminal(evs[len(evs)-1]), "terminal event last")
	return evs[len(evs)-1]
}

func requireErrType(t *testing.T, err error, typ, msgPart string) {
	t.Helper()
	require.Error(t, err)
	info := loop.Describe(err)
	require.Equal(t, typ, info.Type, "error %v", err)
	if msgPart != "" {
		require.Contains(t, err.Error(), msgPart)
	}
}

func textOf(t *testing.T, evs []loop.Event) string {
	var b strings.Builder
	for _, e := range find[*loop.TextDelta](evs) {
		b.WriteString(e.Delta)
	}
	return b.String()
}

var errBoom = errors.New("boom")

func lastReq(p *scripted.Provider) loop.ModelRequest {
	r := p.Requests()
	return r[len(r)-1]
}

// scenario is one conformance scenario of LOVIA-SEMANTICS §8.
type scenario struct {
	name string // "S<number>_<short_name>"
	fn   func(t *testing.T)
}

// TestConformance runs every scenario group as TestConformance/S<n>_<name>.
func TestConformance(t *testing.T) {
	groups := [][]scenario{basicScenarios, toolScenarios, parallelScenarios, approvalScenarios, handoffScenarios}
	groups = append(groups, moreScenarios()...)
	seen := map[string]bool{}
	for _, g := range groups {
		for _, sc := range g {
			require.False(t, seen[sc.name], "duplicate scenario %s", sc.name)
			seen[sc.name] = true
			t.Run(sc.name, func(t *testing.T) {
				t.Parallel()
				sc.fn(t)
			})
		}
	}
}
