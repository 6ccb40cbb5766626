package compaction_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/loop/compaction"
)

func TestWindow(t *testing.T) {
	t.Parallel()
	// About 7,600 tokens of tool output.
	es := agentic(10, 3000)
	key := "https://api.example\x00m1"

	t.Run("UnknownMeansReactiveOnly", func(t *testing.T) {
		t.Parallel()
		r := compact(t, compaction.New(compaction.Config{}), request(newProvider(), es))
		require.False(t, r.Compacted)
		require.False(t, r.Changed)
		require.Empty(t, r.Reason)
		require.Equal(t, es, r.Entries)
		require.Positive(t, r.Estimate, "the estimate is there for the reactive comparison")
	})

	t.Run("Configured", func(t *testing.T) {
		t.Parallel()
		r := compact(t, compaction.New(compaction.Config{ContextWindow: 8000, ReserveOutputTokens: 1000}), request(newProvider(), es))
		require.True(t, r.Compacted)
	})

	t.Run("DiscoveredOncePerEndpointAndModel", func(t *testing.T) {
		t.Parallel()
		c := compaction.New(compaction.Config{ReserveOutputTokens: 1000})
		d := &discoverer{provider: *newProvider(), window: 8000}
		var wg sync.WaitGroup
		for range 32 {
			wg.Go(func() {
				r, err := c.Compact(context.Background(), request(d, es))
				if err == nil && !r.Compacted {
					err = errors.New("not compacted")
				}
				require.NoError(t, err)
			})
		}
		wg.Wait()
		require.EqualValues(t, 1, d.asked.Load())
		other := &discoverer{provider: provider{endpoint: "https://api.example", model: "m2"}, window: 8000}
		compact(t, c, request(other, es))
		compact(t, c, request(other, es))
		require.EqualValues(t, 1, other.asked.Load(), "another model is asked once too")
	})

	t.Run("DiscoveryErrorsAreNotMemoized", func(t *testing.T) {
		t.Parallel()
		c := compaction.New(compaction.Config{ReserveOutputTokens: 1000})
		d := &discoverer{provider: *newProvider(), err: errors.New("endpoint down")}
		require.False(t, compact(t, c, request(d, es)).Compacted)
		d.err, d.window = nil, 8000
		require.True(t, compact(t, c, request(d, es)).Compacted)
		require.EqualValues(t, 2, d.asked.Load())
	})

	t.Run("LearnedWindowCapsConfigured", func(t *testing.T) {
		t.Parallel()
		c := compaction.New(compaction.Config{ContextWindow: 1_000_000, ReserveOutputTokens: 1000})
		req := request(newProvider(), es)
		require.False(t, compact(t, c, req).Compacted)
		req.State[compaction.StateKey] = map[string]any{"version": 3, "learned_windows": map[string]any{key: 8000}}
		require.True(t, compact(t, c, req).Compacted)
		other := request(&provider{endpoint: "elsewhere", model: "m1"}, es)
		other.State = req.State
		require.False(t, compact(t, c, other).Compacted, "learned windows are per endpoint")
	})

	t.Run("ReactiveLearnsTheReportedWindow", func(t *testing.T) {
		t.Parallel()
		c := compaction.New(compaction.Config{})
		req := request(newProvider(), es)
		first := compact(t, c, req)
		require.False(t, first.Compacted)

		req.Overflow, req.ReportedWindow = true, 8192
		r := compact(t, c, req)
		require.True(t, r.Compacted)
		require.Equal(t, "reactive_clear", r.Reason, "3,000-char outputs are below the offload size")
		require.Less(t, float64(r.Estimate), 0.95*float64(first.Estimate))
		require.Equal(t, map[string]any{key: 8192}, stateOf(t, req)["learned_windows"])

		// The next proactive call knows the window: the view stays put.
		req.Overflow, req.ReportedWindow = false, 0
		next := compact(t, c, req)
		require.False(t, next.Compacted)
		require.Equal(t, "sticky_replay", next.Reason)
		require.Equal(t, viewBytes(t, r.Entries), viewBytes(t, next.Entries))
	})

	t.Run("ReactiveWithoutReportedWindow", func(t *testing.T) {
		t.Parallel()
		// The failed prompt bounds the window: tokens + reserve; the target
		// is a quarter of what is usable.
		c := compaction.New(compaction.Config{})
		req := request(newProvider(), es)
		before := compact(t, c, req).Estimate
		req.Overflow, req.ReportedWindow = true, 100 // implausible: not learned
		r := compact(t, c, req)
		require.True(t, r.Compacted)
		require.LessOrEqual(t, r.Estimate, before/4)
		require.Equal(t, map[string]any{}, stateOf(t, req)["learned_windows"])
	})

	t.Run("ReactiveWithNothingToDo", func(t *testing.T) {
		t.Parallel()
		req := request(newProvider(), []loop.Entry{user("hello")})
		req.Overflow, req.ReportedWindow = true, 4096
		r := compact(t, compaction.New(compaction.Config{}), req)
		require.False(t, r.Compacted, "the runner will not retry")
	})
}
