package fleet_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/fleet"
)

// A worker id's lease is created once, replaced only at the revision read
// (a takeover, a confirmation), released only by its holder, and created
// again after a release; the members list does not show it.
func TestLease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	reg := setup(t)

	_, _, found, err := reg.ReadLease(ctx, "w1")
	require.NoError(t, err)
	require.False(t, found)
	first := fleet.Lease{Instance: "a", Host: "h", PID: 1}
	rev, err := reg.CreateLease(ctx, "w1", first)
	require.NoError(t, err)
	_, err = reg.CreateLease(ctx, "w1", fleet.Lease{Instance: "b"})
	require.ErrorIs(t, err, fleet.ErrLeaseHeld)
	l, got, found, err := reg.ReadLease(ctx, "w1")
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, rev, got)
	require.Equal(t, first, l)

	taken, err := reg.TakeLease(ctx, "w1", fleet.Lease{Instance: "b"}, rev)
	require.NoError(t, err)
	_, err = reg.TakeLease(ctx, "w1", fleet.Lease{Instance: "c"}, rev)
	require.ErrorIs(t, err, fleet.ErrLeaseChanged, "a second takeover at the same revision loses")
	require.ErrorIs(t, reg.ReleaseLease(ctx, "w1", rev), fleet.ErrLeaseChanged, "a holder that lost the lease cannot release it")
	require.NoError(t, reg.ReleaseLease(ctx, "w1", taken))
	_, _, found, err = reg.ReadLease(ctx, "w1")
	require.NoError(t, err)
	require.False(t, found)
	_, err = reg.CreateLease(ctx, "w1", first)
	require.NoError(t, err, "created again after a release")
	ms, err := reg.Members(ctx)
	require.NoError(t, err)
	require.Empty(t, ms)
}
