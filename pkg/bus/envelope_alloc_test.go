package bus

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/loop"
)

// TestEncodeAllocations: a run publisher's envelope writer reuses its
// buffer and encoders, so an event's envelope costs no allocation once
// warm (the published copy is the caller's); Marshal costs its result.
func TestEncodeAllocations(t *testing.T) { // not parallel: AllocsPerRun
	slack := 0.0
	if raceEnabled {
		slack = 3 // pooled encoder states dropped at random
	}
	at := time.Date(2025, 6, 1, 12, 0, 0, 5, time.UTC)
	ev := &loop.ToolCallStarted{EventHeader: loop.EventHeader{Agent: "calc", Turn: 1},
		Call: loop.ToolCall{ID: "c1", Name: "echo", Arguments: `{"text":"hi"}`}}
	for _, enc := range []Encoding{JSON, Msgpack} {
		var w envelopeWriter
		got := testing.AllocsPerRun(200, func() {
			if _, err := w.event(enc, "run-1", 12, at, ev); err != nil {
				t.Fatal(err)
			}
		})
		t.Logf("%s: %v per envelope", enc, got)
		require.LessOrEqual(t, got, 0+slack, "%s: allocations per envelope", enc)
		got = testing.AllocsPerRun(200, func() {
			if _, err := Marshal(enc, ev); err != nil {
				t.Fatal(err)
			}
		})
		t.Logf("%s: %v per Marshal", enc, got)
		require.LessOrEqual(t, got, 1+slack, "%s: allocations per Marshal", enc)
	}
}

// RaceEnabledForTest is raceEnabled, so that the external allocation
// tests (publish_alloc_test.go) can tell a count from a bound.
const RaceEnabledForTest = raceEnabled
