package compaction_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/loop/compaction"
)

// transcript2000 is a 2,000-entry agentic transcript: a system entry, a
// request, then tool turns with outputs of 400–6,000 characters and now
// and then a remark and a user message (about 720k estimated tokens).
func transcript2000() []loop.Entry {
	es := []loop.Entry{sys("You are a test agent."), user("Go.")}
	for i := 0; len(es) < 2000; i++ {
		id := fmt.Sprintf("c%d", i)
		es = append(es, call(id), res(id, payload(id, 400+(i*997)%5600)))
		if i%7 == 6 && len(es) < 1998 {
			es = append(es, text(payload("a"+id, 300)), user(payload("u"+id, 120)))
		}
	}
	return es[:2000]
}

// BenchmarkCompact2000 measures the policy's cost per model turn on a
// 2,000-entry transcript in steady state: the first compaction is done
// (outside the timer) and every turn replays the sticky decisions —
// state load, summary validation, pruning, calibration, render, estimate,
// state save. "cleared": a 200k window, the view keeps every entry with
// ~1,000 markers; "summarized": a 32k window, most history is in the
// summary.
func BenchmarkCompact2000(b *testing.B) {
	for _, tc := range []struct {
		name   string
		window int
	}{{"cleared", 200_000}, {"summarized", 32_000}} {
		b.Run(tc.name, func(b *testing.B) {
			es := transcript2000()
			c := compaction.New(compaction.Config{ContextWindow: tc.window, Summarizer: &fakeSummarizer{}})
			p := newProvider()
			state := map[string]any{}
			ctx := context.Background()
			first, err := c.Compact(ctx, &loop.CompactRequest{Entries: es, Provider: p, Model: "m1", State: state})
			if err != nil || !first.Compacted {
				b.Fatalf("first compaction: %v %+v", err, first)
			}
			last := int64(first.Estimate)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				r, err := c.Compact(ctx, &loop.CompactRequest{Entries: es, Provider: p, Model: "m1", State: state, LastInputTokens: last})
				if err != nil || r.Compacted {
					b.Fatalf("steady state: %v %+v", err, r.Reason)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/turn")
			b.ReportMetric(float64(len(first.Entries)), "view_entries")
		})
	}
}

// BenchmarkCompact2000First measures one compaction from a fresh state on
// the same transcript (offload + clear, and the summary with a
// zero-cost summarizer for the 32k window).
func BenchmarkCompact2000First(b *testing.B) {
	for _, window := range []int{200_000, 32_000} {
		b.Run(fmt.Sprint(window), func(b *testing.B) {
			es := transcript2000()
			c := compaction.New(compaction.Config{ContextWindow: window, Summarizer: &fakeSummarizer{}})
			p := newProvider()
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				r, err := c.Compact(ctx, &loop.CompactRequest{Entries: es, Provider: p, Model: "m1", State: map[string]any{}})
				if err != nil || !r.Compacted {
					b.Fatal(err)
				}
			}
		})
	}
}
