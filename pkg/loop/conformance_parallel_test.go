package loop_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/loop/scripted"
)

func strTool(name string, fn func(ctx context.Context) (string, error), opts ...loop.ToolOption) *loop.Tool {
	return loop.NewTool(name, name, func(ctx context.Context, _ *loop.RunContext, _ empty) (string, error) { return fn(ctx) }, opts...)
}

func waitOr(ctx context.Context, ch <-chan struct{}, d time.Duration) error {
	select {
	case <-ch:
		return nil
	case <-time.After(d):
		return context.DeadlineExceeded
	case <-ctx.Done():
		return ctx.Err()
	}
}

// §8.3 Parallel execution.
var parallelScenarios = []scenario{
	{"S17_overlap", func(t *testing.T) {
		gate := make(chan struct{})
		gated := strTool("gated", func(ctx context.Context) (string, error) {
			if err := waitOr(ctx, gate, time.Second); err != nil {
				return "", err
			}
			return "gated ok", nil
		})
		opener := strTool("opener", func(context.Context) (string, error) { close(gate); return "opened", nil })
		p := scripted.New([]scripted.Step{scripted.Batch(scripted.Call{Name: "gated"}, scripted.Call{Name: "opener"}), scripted.Text("done")})
		_, res, err := stream(t, agentWith(p, gated, opener), "go")
		require.NoError(t, err)
		for _, e := range res.Entries {
			if e.Kind == loop.KindToolResult {
				require.False(t, e.IsError, e.Output)
			}
		}
	}},
	{"S19_all_barrier_batch", func(t *testing.T) {
		s1 := strTool("s1", func(context.Context) (string, error) { return "one", nil }, loop.Sequential())
		s2 := strTool("s2", func(context.Context) (string, error) { return "two", nil }, loop.Sequential())
		p := scripted.New([]scripted.Step{scripted.Batch(scripted.Call{ID: "c1", Name: "s1"}, scripted.Call{ID: "c2", Name: "s2"}), scripted.Text("done")})
		evs, _, err := stream(t, agentWith(p, s1, s2), "go")
		require.NoError(t, err)
		require.Equal(t, []string{"TCS(c1)", "TCC(c1,ok)", "TCS(c2)", "TCC(c2,ok)"}, toolSig(evs))
	}},
	{"S20_completion_order", func(t *testing.T) {
		gate := make(chan struct{})
		first := strTool("first_listed", func(ctx context.Context) (string, error) {
			if err := waitOr(ctx, gate, 2*time.Second); err != nil {
				return "", err
			}
			return "first result", nil
		})
		second := strTool("second_listed", func(context.Context) (string, error) { close(gate); return "second result", nil })
		p := scripted.New([]scripted.Step{scripted.Batch(scripted.Call{ID: "c1", Name: "first_listed"}, scripted.Call{ID: "c2", Name: "second_listed"}), scripted.Text("done")})
		evs, res, err := stream(t, agentWith(p, first, second), "go")
		require.NoError(t, err)
		var order []string
		for _, e := range find[*loop.ToolCallCompleted](evs) {
			order = append(order, e.Call.ID)
		}
		require.Equal(t, []string{"c2", "c1"}, order)
		require.Equal(t, []string{"Res(c2,second result)", "Res(c1,first result)"}, entrySigs(res.Entries[3:5]))
		req2 := p.Requests()[1].Entries
		byID := map[string]string{}
		for _, e := range req2 {
			if e.Kind == loop.KindToolResult {
				byID[e.CallID] = e.Output
			}
		}
		require.Equal(t, map[string]string{"c1": "first result", "c2": "second result"}, byID)
	}},
	{"S22_two_parallel_failures", func(t *testing.T) {
		f1 := strTool("f1", func(context.Context) (string, error) { return "", errBoom })
		f2 := strTool("f2", func(context.Context) (string, error) { return "", emptyErr{} })
		p := scripted.New([]scripted.Step{scripted.Batch(scripted.Call{ID: "c1", Name: "f1"}, scripted.Call{ID: "c2", Name: "f2"}), scripted.Text("model saw both")})
		evs, res, err := stream(t, agentWith(p, f1, f2), "go")
		require.NoError(t, err)
		require.Equal(t, "model saw both", res.Output)
		outs := map[string]string{}
		for _, e := range find[*loop.ToolCallCompleted](evs) {
			require.True(t, e.IsError)
			outs[e.Call.ID] = e.Output
		}
		require.Equal(t, map[string]string{"c1": "Tool error: boom", "c2": "Tool error: emptyErr"}, outs)
	}},
	{"S23_rejection_at_preflight", func(t *testing.T) {
		p := scripted.New([]scripted.Step{scripted.Batch(
			scripted.Call{ID: "c1", Name: "add", Args: map[string]int{"a": 1, "b": 2}},
			scripted.Call{ID: "c2", Name: "ghost"}), scripted.Text("done")})
		evs, res, err := stream(t, agentWith(p, addTool()), "go")
		require.NoError(t, err)
		ts := toolSig(evs)
		require.NotContains(t, ts, "TCS(c2)")
		require.Less(t, indexOf(ts, "TCS(c1)"), indexOf(ts, "TCC(c1,ok)"))
		require.GreaterOrEqual(t, indexOf(ts, "TCC(c2,err)"), 0)
		results := 0
		for _, e := range res.Entries {
			if e.Kind == loop.KindToolResult {
				results++
			}
		}
		require.Equal(t, 2, results)
	}},
}

func indexOf(xs []string, s string) int {
	for i, x := range xs {
		if x == s {
			return i
		}
	}
	return -1
}

// §8.4 Approvals.
var approvalScenarios = []scenario{
	{"S25_in_band_reject", func(t *testing.T) {
		p := scripted.New([]scripted.Step{scripted.CallTool("sensitive", nil, "c1"), scripted.Text("fine")})
		h := newRunner().Stream(context.Background(), agentWith(p, sensitiveTool()), []loop.Entry{loop.UserText("do it")})
		var evs []loop.Event
		for ev := range h.Events() {
			if ar, ok := ev.(*loop.ApprovalRequired); ok {
				ar.Reject("no")
			}
			evs = append(evs, ev)
		}
		res, err := h.Result()
		require.NoError(t, err)
		require.Equal(t, "fine", res.Output)
		require.Equal(t, []string{"AR(c1)", "APR(c1,reject)", "TCC(c1,err)"}, toolSig(evs))
		require.Equal(t, "Tool sensitive was not approved.", find[*loop.ToolCallCompleted](evs)[0].Output)
		req2 := p.Requests()[1].Entries
		require.Equal(t, "ResErr(c1,Tool sensitive was not approved.)", entrySig(req2[len(req2)-1]))
	}},
	{"S25b_in_band_approve", func(t *testing.T) {
		p := scripted.New([]scripted.Step{scripted.CallTool("sensitive", nil, "c1"), scripted.Text("fine")})
		h := newRunner().Stream(context.Background(), agentWith(p, sensitiveTool()), []loop.Entry{loop.UserText("do it")})
		var evs []loop.Event
		for ev := range h.Events() {
			if ar, ok := ev.(*loop.ApprovalRequired); ok {
				ar.Approve("yes")
			}
			evs = append(evs, ev)
		}
		_, err := h.Result()
		require.NoError(t, err)
		require.Equal(t, []string{"AR(c1)", "APR(c1,approve)", "TCS(c1)", "TCC(c1,ok)"}, toolSig(evs))
	}},
	{"S26_nobody_decides", func(t *testing.T) {
		p := scripted.New([]scripted.Step{scripted.CallTool("sensitive", nil, "c1"), scripted.Text("fine")})
		evs, res, err := stream(t, agentWith(p, sensitiveTool()), "do it")
		require.NoError(t, err)
		require.Equal(t, "fine", res.Output)
		require.Equal(t, []string{"AR(c1)", "APR(c1,reject)", "TCC(c1,err)"}, toolSig(evs))
		require.Equal(t, "Tool sensitive was not approved.", find[*loop.ToolCallCompleted](evs)[0].Output)
	}},
	{"S26b_out_of_band_and_handler", func(t *testing.T) {
		// Out-of-band decision by call id, made before the call asks.
		p := scripted.New([]scripted.Step{scripted.CallTool("sensitive", nil, "c1"), scripted.Text("fine")})
		h := newRunner().Stream(context.Background(), agentWith(p, sensitiveTool()), []loop.Entry{loop.UserText("do it")})
		h.Approvals().Approve("c1", "ops said yes")
		evs, _, err := collect(h)
		require.NoError(t, err)
		require.Equal(t, []string{"AR(c1)", "APR(c1,approve)", "TCS(c1)", "TCC(c1,ok)"}, toolSig(evs))
		// The agent's handler: allow, deny and ask.
		for verdict, want := range map[loop.ApprovalVerdict]string{loop.Allow: "TCC(c1,ok)", loop.Deny: "TCC(c1,err)", loop.Ask: "TCC(c1,err)"} {
			p := scripted.New([]scripted.Step{scripted.CallTool("sensitive", nil, "c1"), scripted.Text("fine")})
			a := agentWith(p, sensitiveTool())
			a.ApprovalHandler = func(context.Context, *loop.RunContext, loop.ToolCall) (loop.ApprovalVerdict, string, error) {
				return verdict, "", nil
			}
			evs, _, err := stream(t, a, "do it")
			require.NoError(t, err)
			ts := toolSig(evs)
			require.Equal(t, want, ts[len(ts)-1], "verdict %s", verdict)
		}
	}},
	{"S28_handler_raises", func(t *testing.T) {
		p := scripted.New([]scripted.Step{scripted.CallTool("sensitive", nil, "c1"), scripted.Text("fine")})
		a := agentWith(p, sensitiveTool())
		a.ApprovalHandler = func(context.Context, *loop.RunContext, loop.ToolCall) (loop.ApprovalVerdict, string, error) {
			return "", "", errBoom
		}
		evs, res, err := stream(t, a, "do it")
		require.NoError(t, err)
		require.Equal(t, "fine", res.Output)
		require.Equal(t, []string{"AR(c1)", "TCF(c1)", "APR(c1,reject)", "TCC(c1,err)"}, toolSig(evs))
		require.Equal(t, "Tool sensitive was not approved.", find[*loop.ToolCallCompleted](evs)[0].Output)
	}},
	{"S29_predicate_raises", func(t *testing.T) {
		ran := false
		guarded := loop.NewTool("guarded", "", func(context.Context, *loop.RunContext, empty) (string, error) {
			ran = true
			return "ran", nil
		}, loop.ApprovalWhen(func(context.Context, *loop.RunContext, map[string]any) (bool, error) { return false, errBoom }))
		p := scripted.New([]scripted.Step{scripted.CallTool("guarded", nil, "g1"), scripted.Text("fine")})
		evs, res, err := stream(t, agentWith(p, guarded), "go")
		require.NoError(t, err)
		require.False(t, ran)
		require.Equal(t, []string{"TCF(g1)", "TCC(g1,err)"}, toolSig(evs))
		require.Equal(t, "Tool guarded was not approved (approval check failed).", find[*loop.ToolCallCompleted](evs)[0].Output)
		calls, results := 0, 0
		for _, e := range res.Entries {
			switch e.Kind {
			case loop.KindToolCall:
				calls++
			case loop.KindToolResult:
				results++
			}
		}
		require.Equal(t, 1, calls)
		require.Equal(t, 1, results)
	}},
	{"S31_predicate_on_args", func(t *testing.T) {
		type refundIn struct {
			OrderID     string `json:"order_id"`
			AmountCents int    `json:"amount_cents"`
		}
		refund := loop.NewTool("refund", "", func(context.Context, *loop.RunContext, refundIn) (string, error) { return "refunded", nil },
			loop.ApprovalWhen(func(_ context.Context, _ *loop.RunContext, args map[string]any) (bool, error) {
				amt, _ := args["amount_cents"].(float64)
				return amt > 5000, nil
			}))
		for amount, wantAR := range map[int]bool{100: false, 6000: true} {
			p := scripted.New([]scripted.Step{scripted.CallTool("refund", map[string]any{"order_id": "o1", "amount_cents": amount}, "c1"), scripted.Text("ok")})
			evs, _, err := stream(t, agentWith(p, refund), "refund")
			require.NoError(t, err)
			require.Equal(t, wantAR, len(find[*loop.ApprovalRequired](evs)) == 1, "amount %d", amount)
		}
	}},
	{"S32_backpressure_mid_batch", func(t *testing.T) {
		slow := strTool("slow_par", func(ctx context.Context) (string, error) {
			select {
			case <-time.After(50 * time.Millisecond):
			case <-ctx.Done():
			}
			return "slow done", nil
		})
		p := scripted.New([]scripted.Step{scripted.Batch(scripted.Call{ID: "c1", Name: "slow_par"}, scripted.Call{ID: "c2", Name: "sensitive"}), scripted.Text("ok")})
		h := newRunner().Stream(context.Background(), agentWith(p, slow, sensitiveTool()), []loop.Entry{loop.UserText("go")})
		var evs []loop.Event
		for ev := range h.Events() {
			if ar, ok := ev.(*loop.ApprovalRequired); ok {
				ar.Approve("")
			}
			evs = append(evs, ev)
		}
		_, err := h.Result()
		require.NoError(t, err)
		ts := toolSig(evs)
		require.Less(t, indexOf(ts, "AR(c2)"), indexOf(ts, "TCC(c1,ok)"))
		for _, e := range find[*loop.ToolCallCompleted](evs) {
			if e.Call.ID == "c2" {
				require.False(t, e.IsError)
				require.Equal(t, "did it", e.Output)
			}
		}
	}},
}
