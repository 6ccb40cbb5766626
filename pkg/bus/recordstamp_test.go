package bus_test

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/bus"
)

// TestRecordStamp: a stamp read back from the header it set is the same
// revision and instant, in UTC; a zero stamp sets nothing, and a missing or
// malformed header reads as none.
func TestRecordStamp(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 1, 14, 28, 19, 123456789, time.FixedZone("x", 3600))
	h := nats.Header{}
	bus.RecordStamp{Revision: 42, Created: at}.Set(h)
	got, ok := bus.RecordStampOf(h)
	require.True(t, ok, "header %v", h)
	require.Equal(t, bus.RecordStamp{Revision: 42, Created: at.UTC()}, got)

	h = nats.Header{}
	bus.RecordStamp{}.Set(h)
	require.Empty(t, h)
	for _, v := range []string{"", "42", "x 1", "0 1", "42 x", "42 0", "42 -5", "-1 5"} {
		_, ok := bus.RecordStampOf(nats.Header{bus.HeaderRecord: []string{v}})
		require.False(t, ok, "%q read as a stamp", v)
	}
	_, ok = bus.RecordStampOf(nil)
	require.False(t, ok)
}
