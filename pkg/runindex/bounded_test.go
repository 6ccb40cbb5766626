package runindex_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/runindex"
	"github.com/lovia-fleet/lovia/pkg/store"
)

// TestBoundedIndex: an index with a cap holds at most an eighth more
// ended runs than it; the oldest leave first, live ones (queued, running,
// parked) never; filters, counts and pages agree with what it holds, and
// the page says from when on ended runs may be missing.
func TestBoundedIndex(t *testing.T) {
	t.Parallel()
	const max = 80
	x := runindex.NewBounded(max)
	statuses := []store.RunStatus{store.RunCompleted, store.RunFailed, store.RunCompleted, store.RunRunning, store.RunCompleted}
	for i := range 1000 {
		st := statuses[i%len(statuses)]
		x.Apply(rec(fmt.Sprintf("r%04d", i), t0.Add(time.Duration(i)*time.Second), st, func(r *store.RunRecord) {
			r.Agent = fmt.Sprintf("agent-%d", i%3)
			r.Worker = fmt.Sprintf("w%d", i%7)
		}))
		require.LessOrEqual(t, x.Len(), max+max/8+(i+1)/5+1, "the cap (plus the live runs)")
	}
	// Every running run (200 of 1000) is held; the ended ones kept are the newest.
	for i := 3; i < 1000; i += 5 {
		_, ok := x.Get(fmt.Sprintf("r%04d", i), t0)
		require.True(t, ok, "live run r%04d was dropped", i)
	}
	_, ok := x.Get("r0999", t0)
	require.True(t, ok, "the newest ended run is held")
	_, ok = x.Get("r0000", t0)
	require.False(t, ok, "the oldest ended run left")
	require.Positive(t, x.Evicted())

	p, err := x.Query(runindex.Query{Limit: 2000}, t0)
	require.NoError(t, err)
	require.Len(t, p.Runs, x.Len())
	total := 0
	for _, n := range p.Counts {
		total += n
	}
	require.Equal(t, x.Len(), total, "counts are of the runs held")
	require.False(t, p.Horizon.IsZero(), "the page says ended runs before a time may be missing")
	for _, r := range p.Runs {
		if r.Record.Status.Ended() {
			require.True(t, r.Record.CreatedAt.After(p.Horizon), "an ended run at or before the horizon is held: %s", r.Record.RunID)
		}
	}
	// A filtered listing holds the same runs as the whole one.
	p1, err := x.Query(runindex.Query{Agent: "agent-1", Worker: "w2", Limit: 2000}, t0)
	require.NoError(t, err)
	for _, r := range p1.Runs {
		_, ok := x.Get(r.Record.RunID, t0)
		require.True(t, ok)
		require.Equal(t, "agent-1", r.Record.Agent)
	}
	// Every dropped run is still reachable by a later update (it comes back).
	x.Apply(rec("r0000", t0, store.RunQueued))
	_, ok = x.Get("r0000", t0)
	require.True(t, ok)
}

// TestFeedLookupReadsDroppedRunsFromTheBucket: a feed with a small cap
// drops old ended runs from memory; Lookup still answers them from the
// run index bucket.
func TestFeedLookupReadsDroppedRunsFromTheBucket(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := openStore(t)
	for i := range 40 {
		_, err := st.Runs().Create(ctx, store.RunRecord{RunID: fmt.Sprintf("old-%02d", i), Agent: "a", Status: store.RunCompleted,
			CreatedAt: t0.Add(time.Duration(i) * time.Second)})
		require.NoError(t, err)
	}
	f, err := runindex.NewFeed(runindex.FeedConfig{Runs: st.Runs(), MaxRuns: 8})
	require.NoError(t, err)
	require.NoError(t, f.Start(ctx))
	t.Cleanup(func() { require.NoError(t, f.Stop(context.Background())) })
	x, err := f.Index(ctx)
	require.NoError(t, err)
	require.LessOrEqual(t, x.Len(), 9, "the cap")
	_, held := x.Get("old-00", time.Now())
	require.False(t, held)
	r, ok, err := f.Lookup(ctx, "old-00", time.Now())
	require.NoError(t, err)
	require.True(t, ok, "the dropped run is read from the bucket")
	require.Equal(t, store.RunCompleted, r.Record.Status)
	_, ok, err = f.Lookup(ctx, "never", time.Now())
	require.NoError(t, err)
	require.False(t, ok)
}
