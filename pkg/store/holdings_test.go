package store

import (
	"context"
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
