package store

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/loop"
)

func TestControlDecisionsAndCancel(t *testing.T) {
	t.Parallel()
	srv, st := newStore(t, Config{})
	ctx := context.Background()
	c := st.Control()

	got, err := c.Decision(ctx, "r1", "call_1")
	require.NoError(t, err)
	require.Nil(t, got)

	d, created, err := c.Decide(ctx, "r1", "call_1", loop.Approve, "ok")
	require.NoError(t, err)
	require.True(t, created)
	require.Equal(t, loop.Approve, d.Decision)

	// The first decision wins, also across processes.
	other := srv.open(t).Control()
	d, created, err = other.Decide(ctx, "r1", "call_1", loop.Reject, "no")
	require.NoError(t, err)
	require.False(t, created)
	require.Equal(t, loop.Approve, d.Decision)
	require.Equal(t, "ok", d.Reason)

	// Call ids outside the key alphabet still work.
	_, _, err = c.Decide(ctx, "r1", "toolu.01/x y", loop.Reject, "")
	require.NoError(t, err)
	got, err = other.Decision(ctx, "r1", "toolu.01/x y")
	require.NoError(t, err)
	require.Equal(t, loop.Reject, got.Decision)

	_, _, err = c.Decide(ctx, "r1", "c2", "maybe", "")
	require.ErrorIs(t, err, ErrInvalidArgument)
	_, _, err = c.Decide(ctx, "bad id", "c2", loop.Approve, "")
	require.ErrorIs(t, err, ErrInvalidID)

	cr, err := c.CancelRequested(ctx, "r1")
	require.NoError(t, err)
	require.Nil(t, cr)
	created, err = c.RequestCancel(ctx, "r1", "user stop")
	require.NoError(t, err)
	require.True(t, created)
	created, err = other.RequestCancel(ctx, "r1", "again")
	require.NoError(t, err)
	require.False(t, created)
	cr, err = other.CancelRequested(ctx, "r1")
	require.NoError(t, err)
	require.Equal(t, "user stop", cr.Reason)
	require.NoError(t, c.ClearCancel(ctx, "r1"))
	cr, err = c.CancelRequested(ctx, "r1")
	require.NoError(t, err)
	require.Nil(t, cr)
}

func TestClearOtherOwners(t *testing.T) {
	t.Parallel()
	_, st := newStore(t, Config{})
	ctx := context.Background()
	c := st.Control()
	require.NoError(t, c.SetOwner(ctx, "dead", "r1", "$JS.ACK.a"))
	require.NoError(t, c.SetOwner(ctx, "older", "r1", "$JS.ACK.b"))
	require.NoError(t, c.SetOwner(ctx, "me", "r1", "$JS.ACK.c"))
	require.NoError(t, c.SetOwner(ctx, "dead", "r2", "$JS.ACK.d"))
	n, err := c.ClearOtherOwners(ctx, "me", "r1")
	require.NoError(t, err)
	require.Equal(t, 2, n)
	wctx, stop := context.WithCancel(ctx)
	updates, err := c.WatchOwners(wctx)
	require.NoError(t, err)
	defer func() {
		stop()
		for range updates { // closed once the watcher stopped
		}
	}()
	seen := map[string]bool{}
	timeout := time.After(5 * time.Second)
	for len(seen) < 2 {
		select {
		case o := <-updates:
			if !o.Deleted {
				seen[o.Worker+"/"+o.RunID] = true
			}
		case <-timeout:
			t.Fatalf("saw %v", seen)
		}
	}
	require.Equal(t, map[string]bool{"me/r1": true, "dead/r2": true}, seen)
}
