package worker

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/bus"
)

// TestOfRequest: whether the last event belongs to a request is decided by
// its Lovia-Request stamp when it has one — whatever the storage times of
// two streams' leaders say (their clocks may differ) — and by storage time
// only for unstamped events.
func TestOfRequest(t *testing.T) {
	t.Parallel()
	req := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	stored := func(at time.Time, request uint64) *bus.StoredEvent {
		return &bus.StoredEvent{Envelope: &bus.Envelope{Seq: 3}, Stored: at, Request: request}
	}
	require.False(t, ofRequest(nil, 7, req))
	require.True(t, ofRequest(stored(req.Add(-time.Millisecond), 7), 7, req), "stamped by this request, though stored 'before' it by a skewed clock")
	require.False(t, ofRequest(stored(req.Add(time.Second), 6), 7, req), "stamped by another request, though stored after this one")
	require.True(t, ofRequest(stored(req.Add(time.Second), 0), 7, req), "unstamped: stored after the request")
	require.False(t, ofRequest(stored(req.Add(-time.Second), 0), 7, req), "unstamped: stored before the request")
}
