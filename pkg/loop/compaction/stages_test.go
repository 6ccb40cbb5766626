package compaction_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/loop/compaction"
)

// only returns a policy with the given stages, no reserve and a window
// whose trigger the transcript's estimate reaches: the window is sized so
// that est is at share of the usable window.
func only(est int, share float64, cfg compaction.Config, stages ...compaction.Stage) *compaction.Compaction {
	cfg.ContextWindow = int(float64(est) / share)
	cfg.ReserveOutputTokens = compaction.None
	cfg.Stages = stages
	return compaction.New(cfg)
}

func estimateOf(t *testing.T, es []loop.Entry) int {
	t.Helper()
	return compact(t, compaction.New(compaction.Config{}), request(newProvider(), es)).Estimate
}

// results returns the outputs of the rendered tool results in order.
func resultOutputs(es []loop.Entry) []string {
	var out []string
	for _, e := range es {
		if e.Kind == loop.KindToolResult {
			out = append(out, e.Output)
		}
	}
	return out
}

func markerKinds(es []loop.Entry) string {
	var b strings.Builder
	for _, o := range resultOutputs(es) {
		switch {
		case strings.HasPrefix(o, "[Earlier tool result cleared"):
			b.WriteByte('C')
		case strings.HasPrefix(o, "[Tool result ("):
			b.WriteByte('O')
		default:
			b.WriteByte('.')
		}
	}
	return b.String()
}

// turns builds user + one call per output size.
func turns(sizes ...int) []loop.Entry {
	es := []loop.Entry{user("go")}
	for i, n := range sizes {
		id := "c" + string(rune('a'+i))
		es = append(es, call(id), res(id, payload(id, n)))
	}
	return es
}

func TestOffload(t *testing.T) {
	t.Parallel()

	t.Run("OldestFirstUntilTheTarget", func(t *testing.T) {
		t.Parallel()
		es := turns(8000, 8000, 8000, 8000, 8000, 100)
		c := only(estimateOf(t, es), 0.9, compaction.Config{KeepRecentTokens: 1}, compaction.Offload{})
		r := compact(t, c, request(newProvider(), es))
		require.Equal(t, "offload", r.Reason)
		require.Equal(t, "O....."[:0]+"OO....", markerKinds(r.Entries), "two offloads reach 60% of the window")
	})

	t.Run("SizeKeepLastAndTail", func(t *testing.T) {
		t.Parallel()
		es := turns(3999, 8000, 8000, 8000, 8000)
		eager := compaction.Config{KeepRecentTokens: 1, CompactAt: compaction.Fraction(0.5), CompactTo: compaction.Fraction(0.05)}
		c := only(estimateOf(t, es), 0.86, eager, compaction.Offload{MinChars: 4000})
		require.Equal(t, ".OO..", markerKinds(compact(t, c, request(newProvider(), es)).Entries),
			"short results stay, the newest two stay")
		c = only(estimateOf(t, es), 0.86, eager, compaction.Offload{KeepLast: compaction.None, MinChars: compaction.None})
		require.Equal(t, "OOOO.", markerKinds(compact(t, c, request(newProvider(), es)).Entries),
			"the protected tail (the newest call and result) stays")
	})

	t.Run("ContentPartsAreLeftToClear", func(t *testing.T) {
		t.Parallel()
		es := turns(8000, 8000, 8000, 10)
		es[2].Parts = []loop.Part{{Type: loop.PartText, Text: es[2].Output}}
		c := only(estimateOf(t, es), 0.9, compaction.Config{KeepRecentTokens: 1}, compaction.Offload{KeepLast: compaction.None})
		require.Equal(t, ".OO.", markerKinds(compact(t, c, request(newProvider(), es)).Entries))
	})

	t.Run("ArchivesInTheStore", func(t *testing.T) {
		t.Parallel()
		es := turns(8000, 8000, 10)
		store := compaction.NewMemoryStore(0)
		c := only(estimateOf(t, es), 0.9, compaction.Config{KeepRecentTokens: 1, Store: store}, compaction.Offload{KeepLast: compaction.None})
		r := compact(t, c, request(newProvider(), es))
		require.Equal(t, "O..", markerKinds(r.Entries))
		got, ok, err := store.Get(context.Background(), compaction.Digest(es[2].Output))
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, es[2].Output, got)
		require.Equal(t, 1, store.Len())
	})

	t.Run("StoreFailureStillOffloads", func(t *testing.T) {
		t.Parallel()
		es := turns(8000, 8000, 10)
		var logs bytes.Buffer
		c := only(estimateOf(t, es), 0.9, compaction.Config{KeepRecentTokens: 1, Store: brokenStore{},
			Logger: slog.New(slog.NewTextHandler(&syncWriter{w: &logs}, nil))}, compaction.Offload{KeepLast: compaction.None})
		r := compact(t, c, request(newProvider(), es))
		require.Equal(t, "O..", markerKinds(r.Entries))
		require.Contains(t, logs.String(), "result store put failed")
	})

	t.Run("ReactiveOversizedLosesProtection", func(t *testing.T) {
		t.Parallel()
		es := turns(100, 40000)
		proactive := only(estimateOf(t, es), 0.9, compaction.Config{}, compaction.Offload{})
		r := compact(t, proactive, request(newProvider(), es))
		require.False(t, r.Compacted, "the newest result is protected")

		req := request(newProvider(), es)
		req.Overflow, req.ReportedWindow = true, 8192
		r = compact(t, compaction.New(compaction.Config{Stages: []compaction.Stage{compaction.Offload{}}}), req)
		require.Equal(t, "reactive_offload", r.Reason)
		require.Equal(t, ".O", markerKinds(r.Entries))
	})
}

func TestClear(t *testing.T) {
	t.Parallel()

	t.Run("KeepLastMinCharsAndParts", func(t *testing.T) {
		t.Parallel()
		es := turns(199, 2000, 2000, 2000, 2000, 2000, 2000)
		es[2].Parts = []loop.Part{{Type: loop.PartImage, URL: "https://x/y.png"}}
		es = append(es, text("done"), user("next"))
		c := only(estimateOf(t, es), 0.9, compaction.Config{KeepRecentTokens: 1, CompactAt: compaction.Fraction(0.5),
			CompactTo: compaction.Fraction(0.05)}, compaction.Clear{MinChars: 200})
		r := compact(t, c, request(newProvider(), es))
		require.Equal(t, "clear", r.Reason)
		require.Equal(t, "CCCC...", markerKinds(r.Entries),
			"a result with parts qualifies however short; the newest three stay")
	})

	t.Run("StopsAtTheTargetUnlessAskedForMore", func(t *testing.T) {
		t.Parallel()
		es := append(turns(2000, 2000, 2000, 2000, 2000, 2000, 2000, 2000, 2000, 2000), user("next"))
		c := only(estimateOf(t, es), 0.86, compaction.Config{KeepRecentTokens: 1}, compaction.Clear{KeepLast: 1})
		r := compact(t, c, request(newProvider(), es))
		atTarget := strings.Count(markerKinds(r.Entries), "C")
		require.LessOrEqual(t, r.TokensAfter, int(float64(estimateOf(t, es))/0.86*0.6))
		require.Greater(t, r.TokensAfter, int(float64(estimateOf(t, es))/0.86*0.6)-500, "stops once at the target")
		c = only(estimateOf(t, es), 0.86, compaction.Config{KeepRecentTokens: 1}, compaction.Clear{KeepLast: 1, ClearAtLeastTokens: 4000})
		r = compact(t, c, request(newProvider(), es))
		require.Greater(t, strings.Count(markerKinds(r.Entries), "C"), atTarget)
		require.GreaterOrEqual(t, r.TokensBefore-r.TokensAfter, 4000, "keeps clearing until 4,000 tokens are freed")
	})

	t.Run("ReactiveKeepsOnlyTheNewest", func(t *testing.T) {
		t.Parallel()
		es := append(turns(150, 150, 150, 150, 150), user("next"))
		req := request(newProvider(), es)
		req.Overflow, req.ReportedWindow = true, 1024
		c := compaction.New(compaction.Config{ReserveOutputTokens: compaction.None, Stages: []compaction.Stage{compaction.Clear{}}})
		r := compact(t, c, req)
		require.Equal(t, "reactive_clear", r.Reason)
		require.Equal(t, "CCCC.", markerKinds(r.Entries), "min chars and keep-last relax to 0 and 1")
	})

	t.Run("ClearsAnOffloadedResultLater", func(t *testing.T) {
		t.Parallel()
		es := turns(8000, 100, 100, 100, 100)
		req := request(newProvider(), es)
		req.State[compaction.StateKey] = map[string]any{"version": 3, "offloaded": map[string]any{
			"ca": map[string]any{"preview": "p", "chars": 8000, "digest": compaction.Digest(es[2].Output)}}}
		c := compaction.New(compaction.Config{ContextWindow: 100, ReserveOutputTokens: compaction.None, KeepRecentTokens: 1,
			Stages: []compaction.Stage{compaction.Clear{KeepLast: 1, MinChars: compaction.None}}})
		r := compact(t, c, req)
		require.Equal(t, "CCCC.", markerKinds(r.Entries))
		require.Contains(t, stateOf(t, req)["offloaded"], "ca", "decisions are never undone")
	})
}

func TestSummarize(t *testing.T) {
	t.Parallel()
	stage := func(s compaction.Summarize) []compaction.Stage { return []compaction.Stage{s} }

	t.Run("FoldsRenderedHistoryIncrementally", func(t *testing.T) {
		t.Parallel()
		sum := &fakeSummarizer{}
		es := chatty(20)
		req := request(newProvider(), es)
		req.State[compaction.StateKey] = map[string]any{"version": 3, "cleared": []any{"c1"}}
		c := only(estimateOf(t, es), 0.9, compaction.Config{Summarizer: sum}, stage(compaction.Summarize{})...)
		r := compact(t, c, req)
		require.Equal(t, "summary", r.Reason)
		k := sum.n()
		require.Positive(t, k)
		first := sum.calls[0]
		require.Empty(t, first.Prior)
		require.Same(t, req.Provider, first.Provider)
		require.Equal(t, "m1", first.Model)
		require.Equal(t, es[1 : 1+len(first.Entries)][0], first.Entries[0])
		require.Equal(t, compaction.ClearMarker("c1"), first.Entries[6].Output, "the span is rendered: markers, not payloads")
		covered := 0
		for i, call := range sum.calls {
			covered += len(call.Entries)
			if i > 0 {
				require.NotEmpty(t, call.Prior, "chunk %d folds into the previous one", i)
			}
		}
		require.Equal(t, covered, toInt(t, stateOf(t, req)["summary"].(map[string]any)["covered"]))
		require.NotNil(t, r.Summary)
		require.Equal(t, es[0], r.Entries[0])
		require.Equal(t, loop.UserText(compaction.SummaryText(*r.Summary)), r.Entries[1])
		require.Equal(t, es[1+covered:], r.Entries[2:], "the rest verbatim")
		require.NotEqual(t, loop.KindToolResult, es[1+covered].Kind, "the cut keeps calls with results")

		// Later: fold the new events into the prior summary.
		es = append(es, chatty(30)[81:]...)
		req.Entries = es
		probe := request(newProvider(), es)
		probe.State = jsonRoundTrip(t, req.State)
		viewEstimate := compact(t, compaction.New(compaction.Config{}), probe).Estimate
		c = only(viewEstimate, 0.9, compaction.Config{Summarizer: sum}, stage(compaction.Summarize{})...)
		r2 := compact(t, c, req)
		require.Equal(t, "summary", r2.Reason)
		require.Greater(t, sum.n(), k)
		require.Equal(t, *r.Summary, sum.calls[k].Prior)
		require.Equal(t, r.Entries[2], sum.calls[k].Entries[0], "continues where the summary ended")
		require.Greater(t, toInt(t, stateOf(t, req)["summary"].(map[string]any)["covered"]), covered)
	})

	t.Run("SkippedWhenSavingsAreSmall", func(t *testing.T) {
		t.Parallel()
		sum := &fakeSummarizer{}
		// Most tokens sit in the protected tail: summarizing the rest saves < 10%.
		es := append(turns(3000, 3000), text("x"), user(payload("u", 40000)))
		c := only(estimateOf(t, es), 0.9, compaction.Config{Summarizer: sum}, stage(compaction.Summarize{})...)
		r := compact(t, c, request(newProvider(), es))
		require.False(t, r.Compacted)
		require.Zero(t, sum.n())
		c = only(estimateOf(t, es), 0.9, compaction.Config{Summarizer: sum}, stage(compaction.Summarize{MinSavingsRatio: -1})...)
		require.True(t, compact(t, c, request(newProvider(), es)).Compacted)
	})

	t.Run("ChunksEndOnPairSafeCuts", func(t *testing.T) {
		t.Parallel()
		sum := &fakeSummarizer{}
		es := chatty(30)
		// A small usable window: chunks of at most half of it.
		c := only(estimateOf(t, es), 4, compaction.Config{Summarizer: sum, KeepRecentTokens: 1, CompactAt: compaction.Fraction(0.1),
			CompactTo: compaction.Fraction(0.05)}, stage(compaction.Summarize{})...)
		r := compact(t, c, request(newProvider(), es))
		require.Equal(t, "summary", r.Reason)
		require.Greater(t, sum.n(), 3)
		at := 1
		for i, call := range sum.calls {
			at += len(call.Entries)
			require.NotEqual(t, loop.KindToolResult, es[min(at, len(es)-1)].Kind, "chunk %d ends on a pair-safe cut", i)
			if i > 0 {
				require.NotEmpty(t, call.Prior, "chunk %d folds into the previous one", i)
			}
		}
	})

	t.Run("CircuitBreaker", func(t *testing.T) {
		t.Parallel()
		sum := &fakeSummarizer{fail: 4}
		es := chatty(20)
		c := only(estimateOf(t, es), 0.9, compaction.Config{Summarizer: sum}, stage(compaction.Summarize{})...)
		req := request(newProvider(), es)
		for i := 1; i <= 3; i++ {
			r := compact(t, c, req)
			require.False(t, r.Compacted)
			require.Equal(t, i, toInt(t, stateOf(t, req)["summary_failures"]))
		}
		require.Equal(t, 3, sum.n())
		compact(t, c, req)
		require.Equal(t, 3, sum.n(), "tripped: no more proactive attempts")

		req.Overflow, req.ReportedWindow = true, 0
		r := compact(t, c, req)
		require.Equal(t, 4, sum.n(), "the reactive path probes")
		require.False(t, r.Compacted)
		require.Equal(t, 4, toInt(t, stateOf(t, req)["summary_failures"]))
		r = compact(t, c, req)
		require.Equal(t, "reactive_summary", r.Reason)
		require.Equal(t, 0, toInt(t, stateOf(t, req)["summary_failures"]), "a success closes the breaker")
	})

	t.Run("RejectsEmptyAndOversizedSummaries", func(t *testing.T) {
		t.Parallel()
		es := chatty(20)
		for name, answer := range map[string]string{"empty": "  \n", "too long": strings.Repeat("s", 101)} {
			sum := &fakeSummarizer{text: func(*compaction.SummaryRequest) string { return answer }}
			c := only(estimateOf(t, es), 0.9, compaction.Config{Summarizer: sum}, stage(compaction.Summarize{MaxSummaryChars: 100})...)
			req := request(newProvider(), es)
			r := compact(t, c, req)
			require.False(t, r.Compacted, name)
			require.Equal(t, 1, toInt(t, stateOf(t, req)["summary_failures"]), name)
		}
	})

	t.Run("CancellationIsNotAFailure", func(t *testing.T) {
		t.Parallel()
		es := chatty(20)
		ctx, cancel := context.WithCancel(context.Background())
		sum := &fakeSummarizer{text: func(*compaction.SummaryRequest) string { cancel(); return "" }}
		c := only(estimateOf(t, es), 0.9, compaction.Config{Summarizer: sum}, stage(compaction.Summarize{})...)
		req := request(newProvider(), es)
		r, err := c.Compact(ctx, req)
		require.NoError(t, err)
		require.False(t, r.Compacted)
		require.Equal(t, 0, toInt(t, stateOf(t, req)["summary_failures"]))
	})

	t.Run("RewrittenHistoryDropsTheSummary", func(t *testing.T) {
		t.Parallel()
		es := chatty(20)
		req := request(newProvider(), es)
		c := only(estimateOf(t, es), 0.9, compaction.Config{Summarizer: &fakeSummarizer{}}, stage(compaction.Summarize{})...)
		require.True(t, compact(t, c, req).Compacted)
		// Trimming a stored output keeps it (result lengths are not part of the fingerprint)…
		trimmed := append([]loop.Entry(nil), es...)
		trimmed[3].Output = "trimmed"
		req.Entries = trimmed
		r := compaction.New(compaction.Config{})
		require.Equal(t, "sticky_replay", compact(t, r, req).Reason)
		// …rewriting a message drops it.
		rewritten := append([]loop.Entry(nil), es...)
		rewritten[1].Content += "!"
		req.Entries = rewritten
		got := compact(t, r, req)
		require.False(t, got.Changed)
		require.Nil(t, stateOf(t, req)["summary"])
	})

	t.Run("CoverageThatSplitsAPairIsRewound", func(t *testing.T) {
		t.Parallel()
		es := []loop.Entry{user("a"), text("b"), call("c1"), user("steer"), res("c1", "late"), text("ok")}
		req := request(newProvider(), es)
		c := compaction.New(compaction.Config{})
		// A summary made while c1 was dangling covered its call.
		req.State[compaction.StateKey] = map[string]any{"version": 3, "summary": map[string]any{
			"text": "S", "covered": 4, "fingerprint": fingerprintOf(t, es[:4])}}
		r := compact(t, c, req)
		sum := stateOf(t, req)["summary"].(map[string]any)
		require.Equal(t, 2, sum["covered"])
		require.Equal(t, fingerprintOf(t, es[:2]), sum["fingerprint"])
		require.Equal(t, []loop.Entry{user(compaction.SummaryText("S")), call("c1"), user("steer"), res("c1", "late"), text("ok")}, r.Entries)
	})
}

// fingerprintOf obtains the fingerprint the policy computes for a prefix,
// by summarizing exactly that prefix with a custom stage.
func fingerprintOf(t *testing.T, prefix []loop.Entry) string {
	t.Helper()
	es := append(append([]loop.Entry(nil), prefix...), text("tail"))
	c := compaction.New(compaction.Config{ContextWindow: 10, ReserveOutputTokens: compaction.None, KeepRecentTokens: 1,
		Stages: []compaction.Stage{setSummary{covered: len(prefix)}}})
	req := request(newProvider(), es)
	compact(t, c, req)
	return stateOf(t, req)["summary"].(map[string]any)["fingerprint"].(string)
}

type setSummary struct{ covered int }

func (setSummary) Name() string { return "set" }
func (s setSummary) Plan(_ context.Context, pc *compaction.PlanContext) (bool, error) {
	return true, pc.SetSummary("S", s.covered)
}

type brokenStore struct{}

func (brokenStore) Put(context.Context, string, string) error { return errors.New("store down") }
func (brokenStore) Get(context.Context, string) (string, bool, error) {
	return "", false, errors.New("store down")
}

type syncWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}
