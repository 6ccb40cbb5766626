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

	got, err := c.Decision(ctx, "r1", 1, "call_1")
	require.NoError(t, err)
	require.Nil(t, got)

	d, created, err := c.Decide(ctx, "r1", 1, "call_1", loop.Approve, "ok")
	require.NoError(t, err)
	require.True(t, created)
	require.Equal(t, loop.Approve, d.Decision)

	// The first decision wins, also across processes.
	other := srv.open(t).Control()
	d, created, err = other.Decide(ctx, "r1", 1, "call_1", loop.Reject, "no")
	require.NoError(t, err)
	require.False(t, created)
	require.Equal(t, loop.Approve, d.Decision)
	require.Equal(t, "ok", d.Reason)

	// Call ids outside the key alphabet still work.
	_, _, err = c.Decide(ctx, "r1", 1, "toolu.01/x y", loop.Reject, "")
	require.NoError(t, err)
	got, err = other.Decision(ctx, "r1", 1, "toolu.01/x y")
	require.NoError(t, err)
	require.Equal(t, loop.Reject, got.Decision)

	_, _, err = c.Decide(ctx, "r1", 1, "c2", "maybe", "")
	require.ErrorIs(t, err, ErrInvalidArgument)
	_, _, err = c.Decide(ctx, "bad id", 1, "c2", loop.Approve, "")
	require.ErrorIs(t, err, ErrInvalidID)

	cr, err := c.CancelRequested(ctx, "r1", 1)
	require.NoError(t, err)
	require.Nil(t, cr)
	created, err = c.RequestCancel(ctx, "r1", 1, "user stop")
	require.NoError(t, err)
	require.True(t, created)
	created, err = other.RequestCancel(ctx, "r1", 1, "again")
	require.NoError(t, err)
	require.False(t, created)
	cr, err = other.CancelRequested(ctx, "r1", 1)
	require.NoError(t, err)
	require.Equal(t, "user stop", cr.Reason)
	require.NoError(t, c.ClearCancel(ctx, "r1"))
	cr, err = c.CancelRequested(ctx, "r1", 1)
	require.NoError(t, err)
	require.Nil(t, cr)
}

// TestControlRecordsPerSubmission: a cancel, a decision and an approval
// deadline of an earlier submission are invisible to a later one, and
// replaced by its first write; a later submission's record is not
// replaced by an earlier one's writer.
func TestControlRecordsPerSubmission(t *testing.T) {
	t.Parallel()
	_, st := newStore(t, Config{})
	ctx := context.Background()
	c := st.Control()

	_, err := c.RequestCancel(ctx, "r1", 1, "stop the first")
	require.NoError(t, err)
	_, _, err = c.Decide(ctx, "r1", 1, "c1", loop.Reject, "no")
	require.NoError(t, err)
	first := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	got, err := c.ApprovalDeadline(ctx, "r1", 1, "c1", first)
	require.NoError(t, err)
	require.Equal(t, first, got)

	cr, err := c.CancelRequested(ctx, "r1", 2)
	require.NoError(t, err)
	require.Nil(t, cr, "the first submission's cancel")
	d, err := c.Decision(ctx, "r1", 2, "c1")
	require.NoError(t, err)
	require.Nil(t, d, "the first submission's decision")

	created, err := c.RequestCancel(ctx, "r1", 2, "stop the second")
	require.NoError(t, err)
	require.True(t, created)
	cr, err = c.CancelRequested(ctx, "r1", 2)
	require.NoError(t, err)
	require.Equal(t, "stop the second", cr.Reason)
	dd, created, err := c.Decide(ctx, "r1", 2, "c1", loop.Approve, "yes")
	require.NoError(t, err)
	require.True(t, created)
	require.Equal(t, loop.Approve, dd.Decision)
	second := first.Add(time.Hour)
	got, err = c.ApprovalDeadline(ctx, "r1", 2, "c1", second)
	require.NoError(t, err)
	require.Equal(t, second, got, "a new deadline for the new submission")

	// A late writer of the first submission changes nothing.
	created, err = c.RequestCancel(ctx, "r1", 1, "late")
	require.NoError(t, err)
	require.False(t, created)
	dd, created, err = c.Decide(ctx, "r1", 1, "c1", loop.Reject, "late")
	require.NoError(t, err)
	require.False(t, created)
	require.Equal(t, loop.Approve, dd.Decision)
}

func TestClearOtherOwners(t *testing.T) {
	t.Parallel()
	_, st := newStore(t, Config{})
	ctx := context.Background()
	c := st.Control()
	setOwner(t, c, ctx, "dead", "r1", "$JS.ACK.a")
	setOwner(t, c, ctx, "older", "r1", "$JS.ACK.b")
	setOwner(t, c, ctx, "me", "r1", "$JS.ACK.c")
	setOwner(t, c, ctx, "dead", "r2", "$JS.ACK.d")
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

func setOwner(t *testing.T, c *Control, ctx context.Context, worker, run, ack string) uint64 {
	t.Helper()
	rev, err := c.SetOwner(ctx, worker, run, ack)
	require.NoError(t, err)
	return rev
}

// TestClearOwnerAt: an execution clears its own ownership record only; a
// later execution of the run on the same worker keeps the one it set.
func TestClearOwnerAt(t *testing.T) {
	t.Parallel()
	_, st := newStore(t, Config{})
	ctx := context.Background()
	c := st.Control()
	old := setOwner(t, c, ctx, "w1", "r1", "$JS.ACK.old")
	setOwner(t, c, ctx, "w1", "r1", "$JS.ACK.new")
	require.NoError(t, c.ClearOwnerAt(ctx, "w1", "r1", old))
	owned, err := c.Owned(ctx, "r1")
	require.NoError(t, err)
	require.True(t, owned, "the later execution's record stays")
	require.NoError(t, c.ClearOwner(ctx, "w1", "r1"))
	owned, err = c.Owned(ctx, "r1")
	require.NoError(t, err)
	require.False(t, owned)
}
