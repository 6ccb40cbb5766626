package loop_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/loop/compaction"
	"github.com/lovia-fleet/lovia/pkg/loop/scripted"
)

// §8.12 Context compaction and recall. TestConformanceCompaction runs them
// until the group joins moreScenarios().
var compactionScenarios = []scenario{
	{"S79_recall_dispatch", func(t *testing.T) {
		ctx := context.Background()
		big := strings.Repeat("BIG output line\n", 2500) // 40,000 chars
		d := compaction.Digest(big)
		sess := loop.NewMemorySession()
		_, err := sess.Append(ctx, "s79", loop.Segment{RunID: "r0", Entries: []loop.Entry{
			loop.ToolCallEntry("c1", "f", "{}"), loop.ToolResultEntry("c1", "f", big, false)}})
		require.NoError(t, err)
		store := compaction.NewMemoryStore(0)
		policy := compaction.New(compaction.Config{ContextWindow: 8000, ReserveOutputTokens: compaction.None,
			Stages: []compaction.Stage{compaction.Offload{KeepLast: compaction.None}}, Store: store})
		p := scripted.New([]scripted.Step{
			scripted.CallTool(compaction.RecallToolName, map[string]string{"ref": d}, ""),
			scripted.Text("done"),
		}, scripted.Sequential())
		a := &loop.Agent{Name: "a", Provider: p, ContextPolicy: policy} // no user tools

		evs, res, err := stream(t, a, "show me c1 again", loop.WithSession(sess, "s79"))
		require.NoError(t, err)
		require.Equal(t, "done", res.Output)
		require.Equal(t, []string{"RS(a)", "TS(1)", "CC(offload,false)", "MC[Call(call_recall_tool_result,recall_tool_result,{\"ref\":\"" + d + "\"})]",
			"TCS(call_recall_tool_result)", "TCC(call_recall_tool_result,ok)", "TE(1)", "TS(2)", "TD+", "MC[Txt(done)]", "TE(2)", "RC"}, sig(evs))
		// The first view previewed c1 and named its digest; the store has it.
		first := p.Requests()[0].Entries
		require.Equal(t, "c1", first[1].CallID)
		require.Contains(t, first[1].Output, `recall_tool_result("`+d+`")`)
		require.Equal(t, []string{compaction.RecallToolName}, schemaNames(p.Requests()[0].Tools))
		got, ok, err := store.Get(ctx, d)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, big, got)
		// The recall call's stored result is BIG.
		require.Equal(t, loop.ToolResultEntry("call_recall_tool_result", compaction.RecallToolName, big, false), res.Entries[2])

		// Resolution order (unit level).
		tr := []loop.Entry{loop.ToolCallEntry("c1", "f", "{}"), loop.ToolResultEntry("c1", "f", big, false)}
		other := compaction.NewMemoryStore(0)
		require.NoError(t, other.Put(ctx, "c1", "stored"))
		require.Equal(t, "stored", compaction.Recall(ctx, other, tr, "c1"), "store hit wins over the transcript")
		require.Equal(t, big, compaction.Recall(ctx, compaction.NewMemoryStore(0), tr, "c1"), "store miss: transcript by call id")
		require.Equal(t, big, compaction.Recall(ctx, failingResultStore{}, tr, "c1"), "store error: transcript by call id")
		require.Equal(t, big, compaction.Recall(ctx, nil, tr, d), "transcript by digest")
		require.Equal(t, "No tool result found for reference 'zz'.", compaction.Recall(ctx, nil, tr, "zz"))
	}},

	{"S80_reactive_overflow_recovery", func(t *testing.T) {
		dump := loop.NewTool("dump", "Dump everything.", func(context.Context, *loop.RunContext, empty) (string, error) {
			return strings.Repeat("x", 40_000), nil
		})
		var overflowed atomic.Bool
		p := scripted.New([]scripted.Step{
			scripted.CallTool("dump", map[string]any{}, "c1"),
			{Func: func(_ context.Context, _ *loop.ModelRequest, emit func(loop.Delta) error) error {
				if overflowed.CompareAndSwap(false, true) {
					return &loop.ContextOverflowError{Message: "prompt is too long: maximum context length is 8192 tokens", ReportedWindow: 8192}
				}
				if err := emit(loop.Delta{Kind: loop.DeltaText, Text: "recovered"}); err != nil {
					return err
				}
				return emit(loop.Delta{Kind: loop.DeltaUsage, Usage: loop.Usage{InputTokens: 1, OutputTokens: 1, TotalTokens: 2}})
			}},
		})
		a := &loop.Agent{Name: "a", Instructions: "x", Provider: p, Tools: []*loop.Tool{dump}, ContextPolicy: compaction.New(compaction.Config{})}
		cp := loop.NewMemoryCheckpointer()
		sess := loop.NewMemorySession()

		evs, res, err := stream(t, a, "dump it", loop.WithCheckpoint(cp, "r80"), loop.WithSession(sess, "s80"))
		require.NoError(t, err)
		require.Equal(t, "recovered", res.Output)
		require.Equal(t, []string{"RS(a)", "TS(1)", "MC[Call(c1,dump,{})]", "TCS(c1)", "TCC(c1,ok)", "TE(1)", "TS(2)",
			"CC(reactive_offload,true)", "TD+", "MC[Txt(recovered)]", "TE(2)", "RC"}, sig(evs))
		cc := find[*loop.ContextCompacted](evs)[0]
		require.True(t, strings.HasPrefix(cc.Notice.Reason, "reactive_"))
		require.Less(t, cc.Notice.TokensAfter, cc.Notice.TokensBefore)
		require.Equal(t, 3, p.Calls())
		// The retry's view previews c1; the transcript keeps all of it.
		reqs := p.Requests()
		require.Contains(t, reqs[2].Entries[3].Output, "trimmed to a preview")
		require.Equal(t, loop.RoleSystem, reqs[2].Entries[0].Role)
		stored := res.Entries[2]
		require.Equal(t, "c1", stored.CallID)
		require.Len(t, stored.Output, 40_000)
		require.Nil(t, stored.Raw)
		// The learned window travels in the checkpoint head and the session meta.
		snap, err := cp.Load(context.Background(), "r80")
		require.NoError(t, err)
		require.Len(t, snap.Entries[2].Output, 40_000)
		want := map[string]any{"scripted\x00scripted": 8192}
		require.Equal(t, want, snap.ContextState[compaction.StateKey].(map[string]any)["learned_windows"])
		segs, err := sess.Segments(context.Background(), "s80")
		require.NoError(t, err)
		meta := segs[0].Meta
		require.Equal(t, want, meta["context_state"].(map[string]any)[compaction.StateKey].(map[string]any)["learned_windows"])
		require.Equal(t, "reactive_offload", meta["context_notice"].(map[string]any)["reason"])
	}},

	{"S82_carried_sticky_state", func(t *testing.T) {
		ctx := context.Background()
		long := "long output… " + strings.Repeat("z", 5000)
		sess := loop.NewMemorySession()
		_, err := sess.Append(ctx, "s82", loop.Segment{RunID: "r0",
			Entries: []loop.Entry{loop.ToolCallEntry("c1", "f", "{}"), loop.ToolResultEntry("c1", "f", long, false)},
			Meta: map[string]any{"context_state": map[string]any{compaction.StateKey: map[string]any{
				"version": 3, "cleared": []any{"c1"}, "offloaded": map[string]any{}, "summary": nil, "ratio": 1.0,
				"last_view_estimate": 0, "summary_failures": 0, "learned_windows": map[string]any{}}}}})
		require.NoError(t, err)
		p := scripted.New([]scripted.Step{scripted.Text("ok")}, scripted.Sequential())
		a := &loop.Agent{Name: "a", Provider: p, ContextPolicy: compaction.New(compaction.Config{ContextWindow: 100_000})}

		evs, res, err := stream(t, a, "next", loop.WithSession(sess, "s82"))
		require.NoError(t, err)
		require.Equal(t, "ok", res.Output)
		require.Empty(t, find[*loop.ContextCompacted](evs), "sticky replay: no new decision, no event")
		view := p.Requests()[0].Entries
		require.Equal(t, loop.ToolResultEntry("c1", "f", compaction.ClearMarker("c1"), false), view[1])
		require.Contains(t, view[1].Output, `recall_tool_result("c1")`)
		hist, err := loop.LoadSession(ctx, sess, "s82")
		require.NoError(t, err)
		require.Equal(t, long, hist[1].Output, "the session keeps the full output")
		segs, err := sess.Segments(ctx, "s82")
		require.NoError(t, err)
		require.Len(t, segs, 2)
		carried := segs[1].Meta["context_state"].(map[string]any)[compaction.StateKey].(map[string]any)
		require.Equal(t, []any{"c1"}, carried["cleared"], "the decision carries to the next run")
		require.NotContains(t, segs[1].Meta, "context_notice", "no compaction happened in this run")
	}},

	{"S83_policy_view_hygiene", func(t *testing.T) {
		// A policy that drops the system entry: the runner puts it back.
		p := scripted.New([]scripted.Step{scripted.Text("ok")}, scripted.Sequential())
		a := &loop.Agent{Name: "a", Instructions: "be brief", Provider: p, ContextPolicy: dropSystemPolicy{}}
		_, res, err := stream(t, a, "hi", loop.WithExtraInstructions("extra"))
		require.NoError(t, err)
		require.Equal(t, "ok", res.Output)
		view := p.Requests()[0].Entries
		require.Equal(t, loop.RoleSystem, view[0].Role)
		require.Contains(t, view[0].Content, "be brief")
		require.Contains(t, view[0].Content, "extra")
		require.Equal(t, []string{"In(system," + view[0].Content + ")", "In(user,hi)"}, entrySigs(view))

		// A policy that empties its request's entry list: the run is
		// unaffected (the runner keeps its own slice header; the Go
		// contract forbids writing the shared elements).
		p = scripted.New([]scripted.Step{scripted.CallTool("noop", map[string]any{}, "c1"), scripted.Text("done")}, scripted.Sequential())
		a = &loop.Agent{Name: "a", Provider: p, Tools: []*loop.Tool{noopTool()}, ContextPolicy: clearRequestPolicy{}}
		_, res, err = stream(t, a, "go")
		require.NoError(t, err)
		require.Equal(t, "done", res.Output)
		require.Equal(t, []string{"In(user,go)", "Call(c1,noop,{})", "Res(c1,ok)"}, entrySigs(p.Requests()[1].Entries))

		// An explicit user tool named recall_tool_result wins over the policy's.
		userRecall := loop.NewTool(compaction.RecallToolName, "The user's own recall.", func(context.Context, *loop.RunContext, struct {
			Ref string `json:"ref"`
		}) (string, error) {
			return "user recall", nil
		})
		p = scripted.New([]scripted.Step{scripted.CallTool(compaction.RecallToolName, map[string]string{"ref": "x"}, "r1"), scripted.Text("done")}, scripted.Sequential())
		a = &loop.Agent{Name: "a", Provider: p, Tools: []*loop.Tool{userRecall}, ContextPolicy: compaction.New(compaction.Config{})}
		_, res, err = stream(t, a, "go")
		require.NoError(t, err)
		require.Equal(t, loop.ToolResultEntry("r1", compaction.RecallToolName, "user recall", false), res.Entries[2])
		tools := p.Requests()[0].Tools
		require.Len(t, tools, 1)
		require.Equal(t, "The user's own recall.", tools[0].Description)
	}},
}

// dropSystemPolicy returns the transcript without its system entries.
type dropSystemPolicy struct{}

func (dropSystemPolicy) Compact(_ context.Context, req *loop.CompactRequest) (*loop.CompactResult, error) {
	var view []loop.Entry
	for _, e := range req.Entries {
		if e.Kind != loop.KindInput || e.Role != loop.RoleSystem {
			view = append(view, e)
		}
	}
	return &loop.CompactResult{Entries: view, Changed: true}, nil
}

// clearRequestPolicy empties the request's entry list and tool list.
type clearRequestPolicy struct{}

func (clearRequestPolicy) Compact(_ context.Context, req *loop.CompactRequest) (*loop.CompactResult, error) {
	req.Entries = req.Entries[:0]
	req.Tools = nil
	return &loop.CompactResult{}, nil
}

type failingResultStore struct{}

func (failingResultStore) Put(context.Context, string, string) error { return errBoom }
func (failingResultStore) Get(context.Context, string) (string, bool, error) {
	return "", false, errBoom
}

func schemaNames(ts []loop.ToolSchema) []string {
	out := make([]string, len(ts))
	for i := range ts {
		out[i] = ts[i].Name
	}
	return out
}
