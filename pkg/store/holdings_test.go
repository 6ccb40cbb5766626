package store

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestHoldings: a worker's holdings record is replaced as a whole,
// watched by revision (its runs read when needed), counted by Owned, and
// removed only at the revision its taker saw (a survivor that read an
// older record takes nothing).
func TestHoldings(t *testing.T) {
	t.Parallel()
	_, st := newStore(t, Config{})
	ctx := context.Background()
	c := st.Control()
	first, err := c.SetHoldings(ctx, "w1", []Holding{{RunID: "r1", Ack: "$JS.ACK.a", Seq: 3, Attempt: 1}})
	require.NoError(t, err)
	_, err = c.SetHoldings(ctx, "w1", []Holding{{RunID: "r2", Ack: "$JS.ACK.b", Seq: 4, Attempt: 2}})
	require.NoError(t, err)
	owned, err := c.Owned(ctx, "r1")
	require.NoError(t, err)
	require.False(t, owned, "r1 left the record with the next write")
	owned, err = c.Owned(ctx, "r2")
	require.NoError(t, err)
	require.True(t, owned)

	wctx, stop := context.WithCancel(ctx)
	updates, err := c.WatchHoldings(wctx)
	require.NoError(t, err)
	defer func() {
		stop()
		for range updates { // closed once the watcher stopped
		}
	}()
	var h Holdings
	select {
	case h = <-updates:
	case <-time.After(10 * time.Second):
		t.Fatal("waited 10s for the current holdings record")
	}
	require.Equal(t, "w1", h.Worker)
	require.Empty(t, h.Runs, "the watch streams revisions, not runs")
	read, err := c.ReadHoldings(ctx, "w1")
	require.NoError(t, err)
	require.Equal(t, h.Revision, read.Revision)
	require.Equal(t, []Holding{{RunID: "r2", Ack: "$JS.ACK.b", Seq: 4, Attempt: 2}}, read.Runs)

	won, err := c.ClearHoldings(ctx, "w1", first)
	require.NoError(t, err)
	require.False(t, won, "a stale revision takes nothing")
	won, err = c.ClearHoldings(ctx, "w1", h.Revision)
	require.NoError(t, err)
	require.True(t, won)
	won, err = c.ClearHoldings(ctx, "w1", h.Revision)
	require.NoError(t, err)
	require.False(t, won, "taken once")
	select {
	case h = <-updates:
		require.True(t, h.Deleted)
	case <-time.After(10 * time.Second):
		t.Fatal("waited 10s for the removal")
	}
	owned, err = c.Owned(ctx, "r2")
	require.NoError(t, err)
	require.False(t, owned)
	read, err = c.ReadHoldings(ctx, "w1")
	require.NoError(t, err)
	require.True(t, read.Deleted, "a removed record reads as deleted")

	_, err = c.SetHoldings(ctx, "bad.worker", nil)
	require.ErrorIs(t, err, ErrInvalidID)
}

// TestHeldKeys: a worker's run keys are written one a run and removed one
// a run; ReadHoldings lists them with the marker's revision, Owned counts
// them, and the survivor that takes the marker removes them with it (a
// stale revision takes nothing).
func TestHeldKeys(t *testing.T) {
	t.Parallel()
	_, st := newStore(t, Config{})
	ctx := context.Background()
	c := st.Control()
	stale, err := c.AnnounceHoldings(ctx, "w1")
	require.NoError(t, err)
	rev, err := c.AnnounceHoldings(ctx, "w1")
	require.NoError(t, err)
	r1 := Holding{RunID: "r1", Ack: "$JS.ACK.RUNS.c.1.3.3.1.0", Seq: 3, Attempt: 1}
	r2 := Holding{RunID: "r2", Ack: "$JS.ACK.RUNS.c.1.4.4.1.0", Seq: 4, Attempt: 2}
	require.NoError(t, c.Hold(ctx, "w1", []Holding{r1, r2}))
	h, err := c.ReadHoldings(ctx, "w1")
	require.NoError(t, err)
	require.Equal(t, rev, h.Revision, "run keys leave the marker alone")
	require.ElementsMatch(t, []Holding{r1, r2}, h.Runs)

	require.NoError(t, c.Unhold(ctx, "w1", []string{"r1"}))
	owned, err := c.Owned(ctx, "r1")
	require.NoError(t, err)
	require.False(t, owned, "r1's key was removed")
	owned, err = c.Owned(ctx, "r2")
	require.NoError(t, err)
	require.True(t, owned)

	won, err := c.ClearHoldings(ctx, "w1", stale)
	require.NoError(t, err)
	require.False(t, won, "a stale revision takes nothing")
	h, err = c.ReadHoldings(ctx, "w1")
	require.NoError(t, err)
	require.Equal(t, []Holding{r2}, h.Runs)
	won, err = c.ClearHoldings(ctx, "w1", rev)
	require.NoError(t, err)
	require.True(t, won)
	h, err = c.ReadHoldings(ctx, "w1")
	require.NoError(t, err)
	require.True(t, h.Deleted)
	require.Empty(t, h.Runs, "the run keys went with the marker")

	require.ErrorIs(t, c.Hold(ctx, "w1", []Holding{{RunID: "bad.run"}}), ErrInvalidID)
	require.ErrorIs(t, c.Unhold(ctx, "bad.worker", []string{"r1"}), ErrInvalidID)
}

// BenchmarkHoldRelease: a claim's and a release's holdings writes (one
// run key put, then purged) beside n runs the worker already holds: the
// time and the bytes written stay flat in n.
func BenchmarkHoldRelease(b *testing.B) {
	for _, n := range []int{0, 1000, 10000, 50000} {
		b.Run(fmt.Sprintf("held=%d", n), func(b *testing.B) {
			ctx := context.Background()
			js := startServer(b, Config{}).connect(b)
			st, err := Open(ctx, js, Config{})
			require.NoError(b, err)
			nc := js.Conn()
			c := st.Control()
			_, err = c.AnnounceHoldings(ctx, "w1")
			require.NoError(b, err)
			held := make([]Holding, n)
			for i := range held {
				held[i] = Holding{RunID: fmt.Sprintf("held%07d", i), Ack: fmt.Sprintf("$JS.ACK.LOVIA_RUNS.agent-a.1.%d.%d.1775000000000000000.0", i+1, i+1), Seq: uint64(i + 1), Attempt: 1}
			}
			for chunk := range slices.Chunk(held, 1000) {
				require.NoError(b, c.Hold(ctx, "w1", chunk))
			}
			out := nc.Stats().OutBytes
			b.ResetTimer()
			for i := range b.N {
				h := Holding{RunID: fmt.Sprintf("run%09d", i), Ack: fmt.Sprintf("$JS.ACK.LOVIA_RUNS.agent-a.1.%d.%d.1775000000000000000.0", n+i+1, n+i+1), Seq: uint64(n + i + 1), Attempt: 1}
				if err := c.Hold(ctx, "w1", []Holding{h}); err != nil {
					b.Fatal(err)
				}
				if err := c.Unhold(ctx, "w1", []string{h.RunID}); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(nc.Stats().OutBytes-out)/float64(b.N), "B-written/op")
		})
	}
}

// BenchmarkHoldingsRecordRewrite is the earlier releases' cost of a claim
// beside n held runs, for comparison: the whole record rewritten.
func BenchmarkHoldingsRecordRewrite(b *testing.B) {
	for _, n := range []int{0, 1000, 10000} {
		b.Run(fmt.Sprintf("held=%d", n), func(b *testing.B) {
			ctx := context.Background()
			js := startServer(b, Config{}).connect(b)
			st, err := Open(ctx, js, Config{})
			require.NoError(b, err)
			nc := js.Conn()
			held := make([]Holding, n+1)
			for i := range held {
				held[i] = Holding{RunID: fmt.Sprintf("held%07d", i), Ack: fmt.Sprintf("$JS.ACK.LOVIA_RUNS.agent-a.1.%d.%d.1775000000000000000.0", i+1, i+1), Seq: uint64(i + 1), Attempt: 1}
			}
			out := nc.Stats().OutBytes
			b.ResetTimer()
			for range b.N {
				if _, err := st.Control().SetHoldings(ctx, "w1", held); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(nc.Stats().OutBytes-out)/float64(b.N), "B-written/op")
		})
	}
}
