package loop_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/loop/scripted"
)

// §8.1 Basic runs.
var basicScenarios = []scenario{
	{"S1_plain_text", func(t *testing.T) {
		p := scripted.New([]scripted.Step{scripted.Text("Hello!")})
		a := &loop.Agent{Name: "a", Instructions: "be brief", Provider: p}
		evs, res, err := stream(t, a, "hi")
		require.NoError(t, err)
		require.Equal(t, "Hello!", res.Output)
		require.Equal(t, 1, res.Turns)
		require.Equal(t, []string{"In(user,hi)", "Txt(Hello!)"}, entrySigs(res.Entries))
		require.Equal(t, loop.Usage{InputTokens: 1, OutputTokens: 1, TotalTokens: 2}, res.Usage)
		require.EqualValues(t, 1, res.LastInputTokens)
		require.Nil(t, res.FinishReason)
		require.Equal(t, "a", res.FinalAgent)
		require.Equal(t, []string{"RS(a)", "TS(1)", "TD+", "MC[Txt(Hello!)]", "TE(1)", "RC"}, sig(evs))
		require.Equal(t, "Hello!", textOf(t, evs))
		req := p.Requests()[0]
		require.Equal(t, []string{"In(system,be brief)", "In(user,hi)"}, entrySigs(req.Entries))
	}},
	{"S2_tool_round_trip", func(t *testing.T) {
		p := scripted.New([]scripted.Step{
			scripted.CallTool("add", map[string]int{"a": 2, "b": 3}, "c1"),
			scripted.Text("The answer is 5."),
		})
		evs, res, err := stream(t, agentWith(p, addTool()), "add")
		require.NoError(t, err)
		require.Equal(t, "The answer is 5.", res.Output)
		require.Equal(t, 2, res.Turns)
		require.Equal(t, []string{"In(user,add)", `Call(c1,add,{"a":2,"b":3})`, "Res(c1,5)", "Txt(The answer is 5.)"}, entrySigs(res.Entries))
		require.JSONEq(t, "5", string(res.Entries[2].Raw))
		require.Equal(t, loop.Usage{InputTokens: 2, OutputTokens: 2, TotalTokens: 4}, res.Usage)
		require.Equal(t, []string{"RS(a)", "TS(1)", `MC[Call(c1,add,{"a":2,"b":3})]`, "TCS(c1)", "TCC(c1,ok)", "TE(1)",
			"TS(2)", "TD+", "MC[Txt(The answer is 5.)]", "TE(2)", "RC"}, sig(evs))
		tcc := find[*loop.ToolCallCompleted](evs)[0]
		require.Equal(t, 5, tcc.Result)
		require.Equal(t, "5", tcc.Output)
		req2 := p.Requests()[1].Entries
		require.Equal(t, `Call(c1,add,{"a":2,"b":3})`, entrySig(req2[len(req2)-2]))
		require.Equal(t, "Res(c1,5)", entrySig(req2[len(req2)-1]))
	}},
	{"S4_empty_final_message", func(t *testing.T) {
		p := scripted.New([]scripted.Step{{}})
		evs, res, err := stream(t, agentWith(p), "hi")
		require.NoError(t, err)
		require.Equal(t, "", res.Output)
		require.Equal(t, 1, res.Turns)
		require.Equal(t, []string{"RS(a)", "TS(1)", "MC[]", "TE(1)", "RC"}, sig(evs))
	}},
	{"S5_finish_reason", func(t *testing.T) {
		p := scripted.New([]scripted.Step{{Text: "cut off mid-", Finish: "length"}})
		_, res, err := stream(t, agentWith(p), "hi")
		require.NoError(t, err)
		require.Equal(t, "cut off mid-", res.Output)
		require.NotNil(t, res.FinishReason)
		require.Equal(t, "length", *res.FinishReason)
	}},
}

type failIn struct{}

// §8.2 Tool outcomes.
var toolScenarios = []scenario{
	{"S7_unknown_tool", func(t *testing.T) {
		p := scripted.New([]scripted.Step{scripted.CallTool("does_not_exist", nil, "c1"), scripted.Text("ok, gave up")})
		evs, res, err := stream(t, agentWith(p), "go")
		require.NoError(t, err)
		require.Equal(t, "ok, gave up", res.Output)
		require.Equal(t, []string{"RS(a)", "TS(1)", "MC[Call(c1,does_not_exist,{})]", "TCC(c1,err)", "TE(1)", "TS(2)", "TD+", "MC[Txt(ok, gave up)]", "TE(2)", "RC"}, sig(evs))
		require.Equal(t, "Tool 'does_not_exist' is not available.", find[*loop.ToolCallCompleted](evs)[0].Output)
	}},
	{"S8_tool_exception", func(t *testing.T) {
		for _, tc := range []struct {
			name   string
			err    error
			render bool
			want   string
		}{
			{"message", errBoom, false, "Tool error: boom"},
			{"empty_message", emptyErr{}, false, "Tool error: emptyErr"},
			{"renderer_bypassed", errBoom, true, "Tool error: boom"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				var opts []loop.ToolOption
				if tc.render {
					opts = append(opts, loop.WithRenderer(func(any) (string, error) { return "rendered", nil }))
				}
				fail := loop.NewTool("fail_tool", "fails", func(context.Context, *loop.RunContext, failIn) (string, error) {
					return "", tc.err
				}, opts...)
				p := scripted.New([]scripted.Step{scripted.CallTool("fail_tool", nil, "c1"), scripted.Text("noted")})
				evs, res, err := stream(t, agentWith(p, fail), "go")
				require.NoError(t, err)
				require.Equal(t, "noted", res.Output)
				require.Equal(t, []string{"TCS(c1)", "TCF(c1)", "TCC(c1,err)"}, toolSig(evs))
				require.Equal(t, tc.want, find[*loop.ToolCallCompleted](evs)[0].Output)
			})
		}
	}},
	{"S10_truncated_call_finish_length", func(t *testing.T) {
		p := scripted.New([]scripted.Step{scripted.RawCall("add", `{"a": 1`, "c1", "length"), scripted.Text("ok")})
		evs, res, err := stream(t, agentWith(p, addTool()), "go")
		require.NoError(t, err)
		require.Equal(t, "ok", res.Output)
		out := find[*loop.ToolCallCompleted](evs)[0].Output
		require.Contains(t, out, "output token limit")
		require.Contains(t, out, "finish_reason=length")
		require.NotContains(t, out, "Invalid JSON")
	}},
	{"S11_non_object_arguments", func(t *testing.T) {
		p := scripted.New([]scripted.Step{scripted.RawCall("add", "[1,2]", "c1", ""), scripted.Text("let me retry")})
		evs, res, err := stream(t, agentWith(p, addTool()), "go")
		require.NoError(t, err)
		require.Contains(t, find[*loop.ToolCallCompleted](evs)[0].Output, "expected a JSON object")
		require.JSONEq(t, `{"_raw":"[1,2]"}`, res.Entries[1].Arguments)
		// The MessageCompleted copy keeps the original bytes.
		require.Equal(t, "[1,2]", find[*loop.MessageCompleted](evs)[0].Entries[0].Arguments)
	}},
	{"S13_tool_retries_and_timeouts", func(t *testing.T) {
		t.Run("retries_then_fails", func(t *testing.T) {
			n := 0
			tool := loop.NewTool("flaky", "", func(context.Context, *loop.RunContext, failIn) (string, error) {
				n++
				return "", errBoom
			}, loop.WithRetries(1))
			p := scripted.New([]scripted.Step{scripted.CallTool("flaky", nil, "c1"), scripted.Text("done")})
			evs, _, err := stream(t, agentWith(p, tool), "go")
			require.NoError(t, err)
			require.Equal(t, 2, n)
			require.Equal(t, []string{"TCS(c1)", "TCF(c1)", "TCC(c1,err)"}, toolSig(evs))
			require.Equal(t, "Tool error: boom", find[*loop.ToolCallCompleted](evs)[0].Output)
		})
		t.Run("timeout_then_ok", func(t *testing.T) {
			n := 0
			tool := loop.NewTool("slow", "", func(ctx context.Context, _ *loop.RunContext, _ failIn) (string, error) {
				n++
				if n == 1 {
					select {
					case <-time.After(time.Second):
					case <-ctx.Done():
						return "", ctx.Err()
					}
				}
				return "ok", nil
			}, loop.WithTimeout(50*time.Millisecond), loop.WithRetries(1))
			p := scripted.New([]scripted.Step{scripted.CallTool("slow", nil, "c1"), scripted.Text("done")})
			evs, _, err := stream(t, agentWith(p, tool), "go")
			require.NoError(t, err)
			require.Equal(t, []string{"TCS(c1)", "TCC(c1,ok)"}, toolSig(evs))
			require.Equal(t, "ok", find[*loop.ToolCallCompleted](evs)[0].Output)
		})
		t.Run("timeout_no_retry", func(t *testing.T) {
			tool := loop.NewTool("slow", "", func(ctx context.Context, _ *loop.RunContext, _ failIn) (string, error) {
				<-ctx.Done()
				return "", ctx.Err()
			}, loop.WithTimeout(50*time.Millisecond))
			p := scripted.New([]scripted.Step{scripted.CallTool("slow", nil, "c1"), scripted.Text("done")})
			evs, _, err := stream(t, agentWith(p, tool), "go")
			require.NoError(t, err)
			require.Equal(t, []string{"TCS(c1)", "TCF(c1)", "TCC(c1,err)"}, toolSig(evs))
			require.True(t, strings.HasPrefix(find[*loop.ToolCallCompleted](evs)[0].Output, "Tool error"))
			require.Equal(t, "TimeoutError", find[*loop.ToolCallFailed](evs)[0].Error.Type)
		})
		t.Run("agent_default_retries", func(t *testing.T) {
			n := 0
			tool := loop.NewTool("once", "", func(context.Context, *loop.RunContext, failIn) (string, error) {
				n++
				if n == 1 {
					return "", errBoom
				}
				return "ok", nil
			})
			p := scripted.New([]scripted.Step{scripted.CallTool("once", nil, "c1"), scripted.Text("done")})
			a := agentWith(p, tool)
			a.DefaultToolRetries = 1
			evs, _, err := stream(t, a, "go")
			require.NoError(t, err)
			require.Equal(t, 2, n)
			require.Equal(t, []string{"TCS(c1)", "TCC(c1,ok)"}, toolSig(evs))
		})
	}},
	{"S14_output_cap", func(t *testing.T) {
		big := strings.Repeat("x", 1000)
		tool := loop.NewTool("big", "", func(context.Context, *loop.RunContext, failIn) (string, error) { return big, nil })
		p := scripted.New([]scripted.Step{scripted.CallTool("big", nil, "c1"), scripted.Text("done")})
		a := agentWith(p, tool)
		a.MaxToolOutputChars = 100
		evs, res, err := stream(t, a, "go")
		require.NoError(t, err)
		out := res.Entries[2].Output
		require.True(t, strings.HasPrefix(out, strings.Repeat("x", 80)+"\n"))
		require.True(t, strings.HasSuffix(out, "\n"+strings.Repeat("x", 20)))
		require.Contains(t, out, "tool output truncated: kept 100 of 1,000 chars")
		require.Nil(t, res.Entries[2].Raw)
		tcc := find[*loop.ToolCallCompleted](evs)[0]
		require.Equal(t, big, tcc.Result)
		require.Equal(t, out, tcc.Output)

		t.Run("tool_cap_overrides_agent", func(t *testing.T) {
			tool := loop.NewTool("big", "", func(context.Context, *loop.RunContext, failIn) (string, error) { return big, nil }, loop.WithMaxOutputChars(500))
			p := scripted.New([]scripted.Step{scripted.CallTool("big", nil, "c1"), scripted.Text("done")})
			a := agentWith(p, tool)
			a.MaxToolOutputChars = 100
			_, res, err := stream(t, a, "go")
			require.NoError(t, err)
			require.Contains(t, res.Entries[2].Output, "kept 500 of 1,000 chars")
		})
		t.Run("unlimited", func(t *testing.T) {
			huge := strings.Repeat("y", 250_000)
			tool := loop.NewTool("huge", "", func(context.Context, *loop.RunContext, failIn) (string, error) { return huge, nil })
			p := scripted.New([]scripted.Step{scripted.CallTool("huge", nil, "c1"), scripted.Text("done")})
			a := agentWith(p, tool)
			a.MaxToolOutputChars = -1
			_, res, err := stream(t, a, "go")
			require.NoError(t, err)
			require.Equal(t, huge, res.Entries[2].Output)
		})
		t.Run("raw_dropped_over_16000", func(t *testing.T) {
			for _, n := range []int{100, 20_000} {
				v := map[string]string{"k": strings.Repeat("z", n)}
				tool := loop.NewTool("dict", "", func(context.Context, *loop.RunContext, failIn) (map[string]string, error) { return v, nil })
				p := scripted.New([]scripted.Step{scripted.CallTool("dict", nil, "c1"), scripted.Text("done")})
				_, res, err := stream(t, agentWith(p, tool), "go")
				require.NoError(t, err)
				require.Contains(t, res.Entries[2].Output, strings.Repeat("z", n))
				if n > 16_000 {
					require.Nil(t, res.Entries[2].Raw)
				} else {
					require.NotNil(t, res.Entries[2].Raw)
				}
			}
		})
	}},
	{"S16_parts_result", func(t *testing.T) {
		tool := loop.NewTool("shot", "", func(context.Context, *loop.RunContext, failIn) ([]loop.Part, error) {
			return []loop.Part{{Type: loop.PartText, Text: "shot.png"}, {Type: loop.PartImage, Data: "aGVsbG8=", MimeType: "image/png"}}, nil
		})
		p := scripted.New([]scripted.Step{scripted.CallTool("shot", nil, "c1"), scripted.Text("done")})
		_, res, err := stream(t, agentWith(p, tool), "go")
		require.NoError(t, err)
		r := res.Entries[2]
		require.Len(t, r.Parts, 2)
		require.Equal(t, "shot.png\n[image: image/png, 5 B]", r.Output)
		require.Nil(t, r.Raw)
		b, err := json.Marshal(r)
		require.NoError(t, err)
		require.Contains(t, string(b), `"parts"`)
		var back loop.Entry
		require.NoError(t, json.Unmarshal(b, &back))
		require.Equal(t, r, back)
	}},
}

type emptyErr struct{}

func (emptyErr) Error() string { return "" }

// toolSig is sig restricted to tool events.
func toolSig(evs []loop.Event) []string {
	var out []string
	for _, s := range sig(evs) {
		if strings.HasPrefix(s, "TC") || strings.HasPrefix(s, "AR") || strings.HasPrefix(s, "APR") {
			out = append(out, s)
		}
	}
	return out
}

var _ = errors.New
