package loop_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/loop/compaction"
	"github.com/lovia-fleet/lovia/pkg/loop/scripted"
)

// Runner-level acceptance tests of the default context policy: cache
// stability, view-only compaction, resume equivalence, the reactive path.

type fetchToolArgs struct {
	N  int    `json:"n"`
	ID string `json:"id"`
}

// fetchTool returns n deterministic characters and records every output.
func fetchTool(outputs *sync.Map) *loop.Tool {
	return loop.NewTool("fetch", "Fetch a document.", func(_ context.Context, _ *loop.RunContext, in fetchToolArgs) (string, error) {
		var b strings.Builder
		for b.Len() < in.N {
			fmt.Fprintf(&b, "%s line %d; ", in.ID, b.Len())
		}
		out := b.String()[:in.N]
		if outputs != nil {
			outputs.Store(in.ID, out)
		}
		return out, nil
	})
}

// fetchSteps calls fetch turns times with outputs of 600–6,000 chars,
// then answers "done". Ids are f0, f1, …
func fetchSteps(turns int) []scripted.Step {
	steps := make([]scripted.Step, 0, turns+1)
	for i := range turns {
		id := fmt.Sprintf("f%d", i)
		steps = append(steps, scripted.CallTool("fetch", fetchToolArgs{N: 600 + (i*1777)%5400, ID: id}, id))
	}
	return append(steps, scripted.Text("done"))
}

// countingModel wraps a scripted model so it reports a real-looking prompt size
// (1.2 × the heuristic estimate of the request) instead of 1, as an
// endpoint would; the policy's calibration converges on 1.2.
type countingModel struct{ *scripted.Provider }

func (c countingModel) Stream(ctx context.Context, req *loop.ModelRequest, emit func(loop.Delta) error) error {
	n := compaction.EstimateTools(req.Tools)
	for i := range req.Entries {
		n += compaction.EstimateEntry(&req.Entries[i], compaction.DefaultImageTokens)
	}
	return c.Provider.Stream(ctx, req, func(d loop.Delta) error {
		if d.Kind == loop.DeltaUsage {
			d.Usage.InputTokens = int64(float64(n) * 1.2)
			d.Usage.TotalTokens = d.Usage.InputTokens + d.Usage.OutputTokens
		}
		return emit(d)
	})
}

// stubSummarizer is a deterministic stand-in for the LLM summarizer.
type stubSummarizer struct{ calls atomic.Int32 }

func (s *stubSummarizer) Summarize(_ context.Context, req *compaction.SummaryRequest) (string, error) {
	s.calls.Add(1)
	return fmt.Sprintf("## Session intent\nfetch documents\n## Current state\n%d more events folded (prior %d chars)",
		len(req.Entries), len(req.Prior)), nil
}

// smallWindowPolicy compacts a fetchSteps run several times.
func smallWindowPolicy(sum compaction.Summarizer, stages ...compaction.Stage) *compaction.Compaction {
	return compaction.New(compaction.Config{ContextWindow: 12000, ReserveOutputTokens: 2000, Summarizer: sum, Stages: stages})
}

func encodeView(t *testing.T, es []loop.Entry) []byte {
	t.Helper()
	var b bytes.Buffer
	for i := range es {
		j, err := json.Marshal(es[i])
		require.NoError(t, err)
		b.Write(j)
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// compactedTurns returns the turns in which a ContextCompacted was emitted.
func compactedTurns(evs []loop.Event) map[int]bool {
	out := map[int]bool{}
	turn := 0
	for _, ev := range evs {
		switch e := ev.(type) {
		case *loop.TurnStarted:
			turn = e.TurnNo
		case *loop.ContextCompacted:
			out[turn] = true
		}
	}
	return out
}

func TestCompactionRunner(t *testing.T) {
	t.Parallel()

	t.Run("CacheStability", func(t *testing.T) {
		t.Parallel()
		for name, stages := range map[string][]compaction.Stage{
			"default":   nil,
			"summarize": {compaction.Summarize{}},
		} {
			sum := &stubSummarizer{}
			p := scripted.New(fetchSteps(40), scripted.Sequential())
			a := &loop.Agent{Name: "a", Instructions: "Fetch.", Provider: countingModel{p}, Tools: []*loop.Tool{fetchTool(nil)},
				ContextPolicy: smallWindowPolicy(sum, stages...)}
			evs, res, err := stream(t, a, "fetch all")
			require.NoError(t, err, name)
			require.Equal(t, "done", res.Output, name)
			reqs := p.Requests()
			require.Len(t, reqs, 41, name)
			cc := compactedTurns(evs)
			require.GreaterOrEqual(t, len(cc), 3, "%s: compacted several times", name)
			if name == "summarize" {
				require.Positive(t, sum.calls.Load(), "summarized")
			}
			checked := 0
			for k := 1; k < len(reqs); k++ {
				if cc[k+1] {
					continue // turn k+1 made new decisions
				}
				prev, next := encodeView(t, reqs[k-1].Entries), encodeView(t, reqs[k].Entries)
				require.True(t, bytes.HasPrefix(next, prev), "%s: turn %d's view is a byte prefix of turn %d's", name, k, k+1)
				if cc[k] {
					checked++ // the turn right after a compaction
				}
			}
			require.Positive(t, checked, name)
		}
	})

	t.Run("StorageKeepsEveryOriginal", func(t *testing.T) {
		t.Parallel()
		var outputs sync.Map
		p := scripted.New(fetchSteps(30), scripted.Sequential())
		a := &loop.Agent{Name: "a", Provider: countingModel{p}, Tools: []*loop.Tool{fetchTool(&outputs)}, ContextPolicy: smallWindowPolicy(&stubSummarizer{})}
		cp, sess := loop.NewMemoryCheckpointer(), loop.NewMemorySession()
		evs, res, err := stream(t, a, "fetch all", loop.WithCheckpoint(cp, "keep"), loop.WithSession(sess, "keep"))
		require.NoError(t, err)
		require.NotEmpty(t, compactedTurns(evs))
		last := p.Requests()[len(p.Requests())-1].Entries
		require.Contains(t, string(encodeView(t, last)), "to save context", "the view was compacted")

		ctx := context.Background()
		snap, err := cp.Load(ctx, "keep")
		require.NoError(t, err)
		hist, err := loop.LoadSession(ctx, sess, "keep")
		require.NoError(t, err)
		for name, stored := range map[string][]loop.Entry{"result": res.Entries, "checkpoint": snap.Entries, "session": hist} {
			require.Len(t, stored, 1+30*2+1, name)
			require.Equal(t, loop.UserText("fetch all"), stored[0], name)
			n := 0
			for _, e := range stored {
				if e.Kind != loop.KindToolResult {
					continue
				}
				want, ok := outputs.Load(e.CallID)
				require.True(t, ok, name)
				require.Equal(t, want, e.Output, "%s keeps %s in full", name, e.CallID)
				n++
			}
			require.Equal(t, 30, n, name)
		}
		require.Equal(t, res.Entries, snap.Entries)
		require.Equal(t, res.Entries, hist)
	})

	t.Run("ResumeOnAFreshRunnerRendersTheSameView", func(t *testing.T) {
		t.Parallel()
		// Offload and clear keep one view entry per transcript entry, so
		// the scripted model can pick its step by counting model turns.
		stages := func() []compaction.Stage { return []compaction.Stage{compaction.Offload{}, compaction.Clear{}} }
		script := fetchSteps(30)

		whole := scripted.New(script)
		a := &loop.Agent{Name: "a", Provider: countingModel{whole}, Tools: []*loop.Tool{fetchTool(nil)}, ContextPolicy: smallWindowPolicy(nil, stages()...)}
		evs, res, err := stream(t, a, "fetch all", loop.WithCheckpoint(loop.NewMemoryCheckpointer(), "whole"))
		require.NoError(t, err)
		require.Equal(t, "done", res.Output)
		cc := compactedTurns(evs)
		before, after := false, false
		for turn := range cc {
			before, after = before || turn <= 12, after || turn > 12
		}
		require.True(t, before && after, "compactions on both sides of the interruption: %v", cc)

		// The same run stopped after 12 turns on one worker…
		cp := &jsonRoundTripCheckpointer{MemoryCheckpointer: loop.NewMemoryCheckpointer()}
		first := scripted.New(script)
		a1 := &loop.Agent{Name: "a", Provider: countingModel{first}, Tools: []*loop.Tool{fetchTool(nil)}, ContextPolicy: smallWindowPolicy(nil, stages()...)}
		_, _, err = stream(t, a1, "fetch all", loop.WithCheckpoint(cp, "split"), loop.WithMaxTurns(12))
		requireErrType(t, err, "MaxTurnsExceeded", "")
		require.Equal(t, 12, first.Calls())

		// …resumed on another: a fresh Runner and policy, the state read
		// back from JSON.
		second := scripted.New(script)
		a2 := &loop.Agent{Name: "a", Provider: countingModel{second}, Tools: []*loop.Tool{fetchTool(nil)}, ContextPolicy: smallWindowPolicy(nil, stages()...)}
		res2, err := loop.NewRunner(loop.RunnerConfig{}).Run(context.Background(), a2, nil, loop.WithCheckpoint(cp, "split"))
		require.NoError(t, err)
		require.Equal(t, "done", res2.Output)

		want, got := whole.Requests(), append(first.Requests(), second.Requests()...)
		require.Len(t, got, len(want))
		for k := range want {
			require.Equal(t, string(encodeView(t, want[k].Entries)), string(encodeView(t, got[k].Entries)), "view of turn %d", k+1)
		}
	})

	t.Run("ReactiveRetryNeedsASmallerView", func(t *testing.T) {
		t.Parallel()
		overflow := func(context.Context, *loop.ModelRequest, func(loop.Delta) error) error {
			return &loop.ContextOverflowError{Message: "too long", ReportedWindow: 8192}
		}
		// Nothing to compact (one huge user message): no retry.
		p := scripted.New([]scripted.Step{{Func: overflow}})
		a := &loop.Agent{Name: "a", Provider: p, ContextPolicy: compaction.New(compaction.Config{})}
		evs, _, err := stream(t, a, strings.Repeat("words ", 20_000))
		requireErrType(t, err, "ContextOverflowError", "too long")
		require.Equal(t, 1, p.Calls())
		require.Empty(t, find[*loop.ContextCompacted](evs))

		// Compacted, but the retry overflows again: the error propagates.
		dump := loop.NewTool("dump", "Dump.", func(context.Context, *loop.RunContext, empty) (string, error) {
			return strings.Repeat("y", 40_000), nil
		})
		p = scripted.New([]scripted.Step{scripted.CallTool("dump", map[string]any{}, "c1"), {Func: overflow}})
		a = &loop.Agent{Name: "a", Provider: p, Tools: []*loop.Tool{dump}, ContextPolicy: compaction.New(compaction.Config{})}
		evs, _, err = stream(t, a, "dump")
		requireErrType(t, err, "ContextOverflowError", "")
		require.Equal(t, 3, p.Calls(), "one compaction, one retry")
		require.Len(t, find[*loop.ContextCompacted](evs), 1)
	})

	t.Run("DefaultPolicyOffersRecall", func(t *testing.T) {
		t.Parallel()
		// LOVIA-SEMANTICS Appendix A item 6.
		p := scripted.New([]scripted.Step{scripted.Text("hi")})
		r := loop.NewRunner(loop.RunnerConfig{ContextPolicy: compaction.New(compaction.Config{})})
		res, err := r.Run(context.Background(), &loop.Agent{Name: "a", Provider: p}, []loop.Entry{loop.UserText("hello")})
		require.NoError(t, err)
		require.Equal(t, "hi", res.Output)
		require.Equal(t, []string{compaction.RecallToolName}, schemaNames(p.Requests()[0].Tools))
	})

	t.Run("ConcurrentRunsShareOnePolicy", func(t *testing.T) {
		t.Parallel()
		policy := smallWindowPolicy(&stubSummarizer{})
		r := loop.NewRunner(loop.RunnerConfig{ContextPolicy: policy})
		tool := fetchTool(nil)
		var wg sync.WaitGroup
		views := make([][]byte, 12)
		errs := make([]error, len(views))
		for g := range views {
			wg.Go(func() {
				p := scripted.New(fetchSteps(25), scripted.Sequential())
				h := r.Stream(context.Background(), &loop.Agent{Name: "a", Provider: countingModel{p}, Tools: []*loop.Tool{tool}},
					[]loop.Entry{loop.UserText("fetch all")})
				evs, _, err := collect(h)
				if err == nil && len(compactedTurns(evs)) == 0 {
					err = fmt.Errorf("run %d never compacted", g)
				}
				errs[g] = err
				if reqs := p.Requests(); len(reqs) > 0 {
					views[g] = encodeView(t, reqs[len(reqs)-1].Entries)
				}
			})
		}
		wg.Wait()
		for g := range views {
			require.NoError(t, errs[g])
			require.Equal(t, string(views[0]), string(views[g]), "run %d rendered like run 0", g)
		}
	})
}

// jsonRoundTripCheckpointer hands snapshots back through JSON, as a store on
// another worker would.
type jsonRoundTripCheckpointer struct {
	*loop.MemoryCheckpointer
}

func (c *jsonRoundTripCheckpointer) Load(ctx context.Context, runID string) (*loop.Snapshot, error) {
	s, err := c.MemoryCheckpointer.Load(ctx, runID)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	var out loop.Snapshot
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
