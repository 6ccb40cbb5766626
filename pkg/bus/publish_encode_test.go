package bus_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/bus"
)

// TestPublishWireBytes: what a RunPublisher stores is, byte for byte, what
// EncodeEvent gives (TestEnvelopeGoldenBytes pins that), with the headers
// the protocol names, in both encodings.
func TestPublishWireBytes(t *testing.T) {
	t.Parallel()
	b := provisioned(t)
	ctx := ctxT(t)
	clock := time.Date(2025, 6, 1, 9, 0, 0, 123000000, time.FixedZone("X", -3600))
	p := newPublisher(t, b, bus.PublisherConfig{MaxPending: 3, Clock: func() time.Time { return clock }})
	for _, enc := range encodings {
		t.Run(string(enc), func(t *testing.T) {
			runID := "run-wire-" + string(enc)
			rp, err := p.Open(ctx, runID, enc)
			require.NoError(t, err)
			rp.SetRequest(1234)
			events := goldenEvents()
			for _, ev := range events {
				_, err := rp.Publish(ctx, ev)
				require.NoError(t, err)
			}
			require.NoError(t, rp.Close(ctx))
			msgs := storedEvents(t, b, runID)
			require.Len(t, msgs, len(events))
			for i, m := range msgs {
				seq := uint64(i + 1)
				want, err := bus.EncodeEvent(enc, runID, seq, clock, events[i])
				require.NoError(t, err)
				require.Equal(t, want, m.Data, "event %d (%s)", seq, events[i].Type())
				require.Equal(t, runID+"."+strconv.FormatUint(seq, 10), m.Header.Get(bus.HeaderMsgID))
				require.Equal(t, string(events[i].Type()), m.Header.Get(bus.HeaderEvent))
				require.Equal(t, strconv.FormatUint(seq, 10), m.Header.Get(bus.HeaderSeq))
				require.Equal(t, enc.ContentType(), m.Header.Get(bus.HeaderContentType))
				require.Equal(t, "1234", m.Header.Get(bus.HeaderRequest))
			}
		})
	}
}

// TestFlushDefaultTimeout: without a deadline on its context, a wait for
// acks ends after the publisher's Timeout, naming the event, and leaves the
// publisher usable.
func TestFlushDefaultTimeout(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// A subscriber that never answers: no ack, no "no responders".
	sub, err := b.nc.Subscribe("lovia.events.run-8", func(*nats.Msg) {})
	require.NoError(t, err)
	defer sub.Unsubscribe()
	p := newPublisher(t, b, bus.PublisherConfig{MaxPending: 1, AckTimeout: time.Hour, Timeout: 50 * time.Millisecond})
	rp, err := p.Resume("run-8", bus.JSON, 0)
	require.NoError(t, err)
	_, err = rp.Publish(context.Background(), delta("a"))
	require.NoError(t, err)
	start := time.Now()
	err = rp.Flush(context.Background())
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Contains(t, err.Error(), "run-8.1", "the error names the event it waited for")
	require.Less(t, time.Since(start), 10*time.Second, "the wait ends at Timeout, not at the ack timeout")
	_, err = rp.Publish(context.Background(), delta("b"))
	require.ErrorIs(t, err, context.DeadlineExceeded, "a full publisher waits for room within Timeout too")
	require.NotErrorIs(t, err, bus.ErrPublish, "not broken")
	require.Equal(t, 1, rp.Pending())
}
