package bus_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/loop"
)

// TestPublishAllocations: a run publisher reuses its header map, and its
// pending events with their data buffers once acknowledged, so an event's
// publish allocates little of its own. Measured over Publish and Flush of
// a batch on a real embedded server, so the count is the whole process's:
// most of it is the server's work on each message (its traceparent
// parsing alone is some 16 allocations) and nats.go's (the serialized
// headers, the ack).
//
// Measured per event (go test -run TestPublishAllocations -v), before the
// reuse → after:
//
//	plain          json 25.75 → 21.75, msgpack 25.62 → 21.62
//	request+trace  json 50.62 → 44.62, msgpack 50.62 → 44.62
//
// (the pending event, its data copy and the header map's two allocations
// went; with a trace context also its header values' two). The budgets
// lie between; a nats-server upgrade may move both numbers.
func TestPublishAllocations(t *testing.T) { // not parallel: AllocsPerRun counts every goroutine
	b := provisioned(t)
	ctx := ctxT(t)
	p := newPublisher(t, b, bus.PublisherConfig{})
	tc := bus.TraceContextOf(remoteSpan(t, "vendor=x"))
	const batch = 16 // a checkpoint's worth
	ev := &loop.TextDelta{EventHeader: hdr("demo", 3), Delta: "a token or two "}
	for _, c := range []struct {
		mode   string
		budget float64
	}{{"plain", 23.5}, {"request+trace", 47.5}} {
		for _, enc := range encodings {
			rp, err := p.Open(ctx, "alloc-"+string(enc)+"-"+strconv.Itoa(len(c.mode)), enc)
			require.NoError(t, err)
			if c.mode != "plain" {
				rp.SetRequest(7)
				rp.SetTrace(tc)
			}
			got := testing.AllocsPerRun(50, func() {
				for range batch {
					if _, err := rp.Publish(ctx, ev); err != nil {
						t.Fatal(err)
					}
				}
				if err := rp.Flush(ctx); err != nil {
					t.Fatal(err)
				}
			}) / batch
			t.Logf("%s %s: %.2f allocations per event", c.mode, enc, got)
			if bus.RaceEnabledForTest {
				// The race detector drops pooled values at random, ours and
				// the server's: a count, not a bound.
				continue
			}
			require.LessOrEqual(t, got, c.budget, "%s %s: allocations per event", c.mode, enc)
		}
	}
}

// TestRepublishKeepsTheFirstHeaders: events whose first publish got no
// ack are published again with the headers of that first publish — the
// request and trace context in effect then, not the ones set since —
// plus Lovia-High-Seq; the events published after them have the new
// ones; and the pending events reused after the republish carry their
// own data and headers.
func TestRepublishKeepsTheFirstHeaders(t *testing.T) {
	t.Parallel()
	b := setup(t) // no stream yet: the first publishes go nowhere
	ctx := ctxT(t)
	const runID = "run-rh"
	// A subscriber that never answers: no ack, and no "no responders".
	sub, err := b.nc.Subscribe("lovia.events."+runID, func(*nats.Msg) {})
	require.NoError(t, err)
	p := newPublisher(t, b, bus.PublisherConfig{AckTimeout: 200 * time.Millisecond, RetryWait: 10 * time.Millisecond})
	rp, err := p.Resume(runID, bus.JSON, 0)
	require.NoError(t, err)
	first := bus.TraceContextOf(remoteSpan(t, "vendor=x"))
	rp.SetRequest(7)
	rp.SetTrace(first)
	for i := 1; i <= 3; i++ {
		_, err := rp.Publish(ctx, delta(strconv.Itoa(i)))
		require.NoError(t, err)
	}
	rp.SetRequest(0)
	rp.SetTrace(bus.TraceContext{})
	require.NoError(t, sub.Unsubscribe())
	_, err = bus.Provision(ctx, b.js, bus.ProvisionConfig{})
	require.NoError(t, err)
	_, err = rp.Publish(ctx, delta("4")) // stored at once
	require.NoError(t, err)
	require.NoError(t, rp.Flush(ctx), "1 to 3 time out and are published again")
	for i := 5; i <= 8; i++ { // on recycled pending events
		_, err := rp.Publish(ctx, delta(strconv.Itoa(i)))
		require.NoError(t, err)
	}
	require.NoError(t, rp.Flush(ctx))
	require.Zero(t, rp.Duplicates())

	msgs := storedEvents(t, b, runID)
	var order []uint64
	for _, m := range msgs {
		env, err := bus.DecodeEnvelope(m.Header, m.Data)
		require.NoError(t, err)
		order = append(order, env.Seq)
		seq := strconv.FormatUint(env.Seq, 10)
		ev, err := env.Event()
		require.NoError(t, err)
		require.Equal(t, seq, ev.(*loop.TextDelta).Delta, "the data of its own event")
		require.Equal(t, runID+"."+seq, m.Header.Get(bus.HeaderMsgID))
		require.Equal(t, seq, m.Header.Get(bus.HeaderSeq))
		require.Equal(t, "text_delta", m.Header.Get(bus.HeaderEvent))
		require.Equal(t, bus.ContentTypeJSON, m.Header.Get(bus.HeaderContentType))
		if env.Seq <= 3 {
			require.Equal(t, "7", m.Header.Get(bus.HeaderRequest), "seq %d: the request of its first publish", env.Seq)
			require.Equal(t, first.Parent, m.Header.Get(bus.HeaderTraceParent), "seq %d", env.Seq)
			require.Equal(t, "vendor=x", m.Header.Get(bus.HeaderTraceState), "seq %d", env.Seq)
			require.Equal(t, "4", m.Header.Get(bus.HeaderHighSeq), "seq %d: stored after 4", env.Seq)
			continue
		}
		for _, h := range []string{bus.HeaderRequest, bus.HeaderTraceParent, bus.HeaderTraceState, bus.HeaderHighSeq} {
			require.Empty(t, m.Header.Values(h), "seq %d: %s", env.Seq, h)
		}
	}
	require.Equal(t, []uint64{4, 1, 2, 3, 5, 6, 7, 8}, order)
}
