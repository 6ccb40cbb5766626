package lifecycle_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/lifecycle"
	"github.com/lovia-fleet/lovia/pkg/store"
)

// TestStaleRequest: which requests a claim refuses without running them.
func TestStaleRequest(t *testing.T) {
	t.Parallel()
	rec := func(status store.RunStatus, submissions int, requestSeq uint64) *store.RunRecord {
		return &store.RunRecord{Status: status, Submissions: submissions, RequestSeq: requestSeq}
	}
	tests := []struct {
		name       string
		r          *store.RunRecord
		submission int
		seq        uint64
		stale      bool
	}{
		{"the recorded request", rec(store.RunRunning, 1, 10), 1, 10, false},
		{"its redelivery after the run ended", rec(store.RunFailed, 1, 10), 1, 10, false},
		{"a raw publish", rec(store.RunRunning, 1, 10), 0, 12, false},
		{"a raw publish resubmitting a failed run", rec(store.RunFailed, 1, 10), 0, 12, false},
		{"an older request than the recorded one (a parked run's parking request after its wake)", rec(store.RunRunning, 1, 12), 1, 10, true},
		{"an older raw request than the recorded one", rec(store.RunParked, 1, 12), 0, 10, true},
		{"an earlier submission's request", rec(store.RunQueued, 2, 0), 1, 10, true},
		{"a second request of a submission that ended under another", rec(store.RunFailed, 1, 10), 1, 12, true},
		{"the current submission, queued", rec(store.RunQueued, 2, 0), 2, 12, false},
		{"nothing recorded yet", rec(store.RunQueued, 1, 0), 1, 12, false},
	}
	for _, tc := range tests {
		require.Equal(t, tc.stale, lifecycle.IsStale(*tc.r, tc.submission, tc.seq), tc.name)
	}
}

// TestInFlight: a delivery finds a run in flight while another request
// executes it, or while it is parked — except a redelivery of the run's
// own request, and the wake of the park in place.
func TestInFlight(t *testing.T) {
	t.Parallel()
	running := &store.RunRecord{Status: store.RunRunning, RequestSeq: 10}
	require.False(t, lifecycle.IsInFlight(*running, 10, 0), "its own request, redelivered (a takeover)")
	require.True(t, lifecycle.IsInFlight(*running, 12, 0), "another request of the run")
	parked := &store.RunRecord{Status: store.RunParked, RequestSeq: 7, Parked: &store.Parking{Continues: 7}}
	require.True(t, lifecycle.IsInFlight(*parked, 12, 0), "a duplicate of a parked run")
	require.True(t, lifecycle.IsInFlight(*parked, 12, 5), "the wake of an earlier park")
	require.False(t, lifecycle.IsInFlight(*parked, 12, 7), "the wake of this park")
	require.False(t, lifecycle.IsInFlight(*parked, 7, 0), "the parking request, redelivered")
	require.False(t, lifecycle.IsInFlight(store.RunRecord{Status: store.RunQueued}, 12, 0))
	require.False(t, lifecycle.IsInFlight(store.RunRecord{Status: store.RunFailed}, 12, 0))
}
