package bus_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/broker"
	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/loop"
)

func delta(s string) loop.Event { return &loop.TextDelta{EventHeader: hdr("demo", 1), Delta: s} }

func newPublisher(t *testing.T, b *testBundle, cfg bus.PublisherConfig) *bus.Publisher {
	t.Helper()
	p, err := bus.NewPublisher(b.js, cfg)
	require.NoError(t, err)
	return p
}

// storedEvents reads a run's stored messages in stream order.
func storedEvents(t *testing.T, b *testBundle, runID string) []*jetstream.RawStreamMsg {
	t.Helper()
	ctx := ctxT(t)
	s, err := b.js.Stream(ctx, "LOVIA_EVENTS")
	require.NoError(t, err)
	var out []*jetstream.RawStreamMsg
	var seq uint64 = 1
	for {
		m, err := s.GetMsg(ctx, seq, jetstream.WithGetMsgSubject("lovia.events."+runID))
		if err != nil {
			require.ErrorIs(t, err, jetstream.ErrMsgNotFound)
			return out
		}
		out = append(out, m)
		seq = m.Sequence + 1
	}
}

func TestPublish(t *testing.T) {
	t.Parallel()

	t.Run("numbers, stamps and flushes", func(t *testing.T) {
		t.Parallel()
		b := provisioned(t)
		ctx := ctxT(t)
		clock := time.Date(2025, 6, 1, 9, 0, 0, 0, time.UTC)
		p := newPublisher(t, b, bus.PublisherConfig{MaxPending: 4, Clock: func() time.Time { return clock }})

		last, err := p.LastSeq(ctx, "run-1")
		require.NoError(t, err)
		require.Zero(t, last, "a new run has no events")

		rp, err := p.Open(ctx, "run-1", bus.Msgpack)
		require.NoError(t, err)
		require.Equal(t, uint64(1), rp.NextSeq())
		for i := range 20 { // more than MaxPending: Publish waits for acks
			seq, err := rp.Publish(ctx, delta(strconv.Itoa(i)))
			require.NoError(t, err)
			require.Equal(t, uint64(i+1), seq)
			require.LessOrEqual(t, rp.Pending(), 4)
		}
		require.NoError(t, rp.Flush(ctx))
		require.Zero(t, rp.Pending())
		require.Equal(t, uint64(20), rp.Acked())
		require.Zero(t, rp.Duplicates())

		last, err = p.LastSeq(ctx, "run-1")
		require.NoError(t, err)
		require.Equal(t, uint64(20), last)
		ev, err := p.LastEvent(ctx, "run-1")
		require.NoError(t, err)
		require.Equal(t, uint64(20), ev.Seq)
		require.Equal(t, uint64(20), ev.HighSeq)
		require.Equal(t, clock, ev.Time, "the publisher's stamp")
		require.WithinDuration(t, time.Now(), ev.Stored, time.Minute, "the server's storage time")
		none, err := p.LastEvent(ctx, "run-none")
		require.NoError(t, err)
		require.Nil(t, none)
		require.Zero(t, ev.Request, "not stamped")

		msgs := storedEvents(t, b, "run-1")
		require.Len(t, msgs, 20)
		for i, m := range msgs {
			require.Equal(t, "run-1."+strconv.Itoa(i+1), m.Header.Get(bus.HeaderMsgID))
			require.Equal(t, "text_delta", m.Header.Get(bus.HeaderEvent))
			require.Equal(t, strconv.Itoa(i+1), m.Header.Get(bus.HeaderSeq))
			require.Equal(t, "application/msgpack", m.Header.Get(bus.HeaderContentType))
			env, err := bus.DecodeEnvelope(m.Header, m.Data)
			require.NoError(t, err)
			require.Equal(t, uint64(i+1), env.Seq)
			require.True(t, clock.Equal(env.Time))
			ev, err := env.Event()
			require.NoError(t, err)
			require.Equal(t, strconv.Itoa(i), ev.(*loop.TextDelta).Delta)
		}
		require.NoError(t, rp.Close(ctx))
		_, err = rp.Publish(ctx, delta("late"))
		require.ErrorIs(t, err, bus.ErrPublisherClosed)

		// A claim stamps its events with its request.
		rp, err = p.Open(ctx, "run-1", bus.Msgpack)
		require.NoError(t, err)
		rp.SetRequest(42)
		_, err = rp.Publish(ctx, delta("stamped"))
		require.NoError(t, err)
		require.NoError(t, rp.Close(ctx))
		ev, err = p.LastEvent(ctx, "run-1")
		require.NoError(t, err)
		require.Equal(t, uint64(21), ev.Seq)
		require.Equal(t, uint64(42), ev.Request, "stamped with the request's stream sequence")
	})

	t.Run("a resumed run continues the sequence", func(t *testing.T) {
		t.Parallel()
		b := provisioned(t)
		ctx := ctxT(t)
		p := newPublisher(t, b, bus.PublisherConfig{})
		first, err := p.Open(ctx, "run-2", bus.JSON)
		require.NoError(t, err)
		for range 3 {
			_, err := first.Publish(ctx, delta("a"))
			require.NoError(t, err)
		}
		require.NoError(t, first.Flush(ctx))
		// Another worker takes over.
		second, err := p.Open(ctx, "run-2", bus.JSON)
		require.NoError(t, err)
		require.Equal(t, uint64(4), second.NextSeq())
		seq, err := second.Publish(ctx, &bus.RunResumed{Worker: "w2", Attempt: 2, FromTurn: 1})
		require.NoError(t, err)
		require.Equal(t, uint64(4), seq)
		require.NoError(t, second.Flush(ctx))
		require.Len(t, storedEvents(t, b, "run-2"), 4)
	})

	t.Run("the same seq published twice is stored once", func(t *testing.T) {
		t.Parallel()
		b := provisioned(t)
		ctx := ctxT(t)
		p := newPublisher(t, b, bus.PublisherConfig{})
		// A zombie and the new owner both believe seq 3 is next.
		a, err := p.Resume("run-3", bus.JSON, 2)
		require.NoError(t, err)
		z, err := p.Resume("run-3", bus.JSON, 2)
		require.NoError(t, err)
		_, err = a.Publish(ctx, delta("owner"))
		require.NoError(t, err)
		require.NoError(t, a.Flush(ctx))
		_, err = z.Publish(ctx, delta("zombie"))
		require.NoError(t, err)
		require.NoError(t, z.Flush(ctx))
		require.Equal(t, 1, z.Duplicates())
		msgs := storedEvents(t, b, "run-3")
		require.Len(t, msgs, 1)
		env, err := bus.DecodeEnvelope(msgs[0].Header, msgs[0].Data)
		require.NoError(t, err)
		ev, err := env.Event()
		require.NoError(t, err)
		require.Equal(t, "owner", ev.(*loop.TextDelta).Delta)
	})

	t.Run("an oversized event is refused before sending", func(t *testing.T) {
		t.Parallel()
		b := provisioned(t)
		ctx := ctxT(t)
		p := newPublisher(t, b, bus.PublisherConfig{})
		rp, err := p.Open(ctx, "run-4", bus.JSON)
		require.NoError(t, err)
		_, err = rp.Publish(ctx, delta(strings.Repeat("x", int(b.nc.MaxPayload())+1)))
		require.ErrorIs(t, err, nats.ErrMaxPayload)
		require.NotErrorIs(t, err, bus.ErrPublish)
		seq, err := rp.Publish(ctx, delta("small"))
		require.NoError(t, err, "the publisher stays usable")
		require.Equal(t, uint64(1), seq, "the refused event used no seq")
		require.NoError(t, rp.Flush(ctx))
	})

	t.Run("an event that cannot be stored breaks the publisher", func(t *testing.T) {
		t.Parallel()
		b := setup(t) // no streams: nothing answers on the subject
		ctx := ctxT(t)
		// "No response from stream" is also what a stream without a leader
		// answers, so it is transient: without an outage budget, the
		// publisher gives up after RetryAttempts.
		p := newPublisher(t, b, bus.PublisherConfig{RetryAttempts: 1, RetryWait: time.Millisecond, AckTimeout: time.Second, OutageBudget: -1})
		_, err := p.Open(ctx, "run-5", bus.JSON)
		require.ErrorIs(t, err, bus.ErrStreamMissing)

		rp, err := p.Resume("run-5", bus.JSON, 0)
		require.NoError(t, err)
		_, err = rp.Publish(ctx, delta("a"))
		require.NoError(t, err, "async: the failure shows at the flush")
		err = rp.Flush(ctx)
		require.ErrorIs(t, err, bus.ErrPublish)
		var pe *bus.PublishError
		require.ErrorAs(t, err, &pe)
		require.Equal(t, uint64(1), pe.Seq)
		require.Contains(t, err.Error(), "run-5.1")
		_, err = rp.Publish(ctx, delta("b"))
		require.ErrorIs(t, err, bus.ErrPublish, "broken for good")
	})

	t.Run("a lost ack is retried without a duplicate", func(t *testing.T) {
		t.Parallel()
		b := provisioned(t)
		ctx := ctxT(t)
		// A tiny ack timeout makes acks "late"; the retries must be deduplicated.
		// (Timeouts are transient: no outage budget, or they would be
		// retried for its length.)
		p := newPublisher(t, b, bus.PublisherConfig{AckTimeout: time.Nanosecond, RetryWait: time.Millisecond, RetryAttempts: 3, OutageBudget: -1})
		rp, err := p.Open(ctx, "run-6", bus.JSON)
		require.NoError(t, err)
		for range 10 {
			_, err := rp.Publish(ctx, delta("x"))
			require.NoError(t, err)
		}
		err = rp.Flush(ctx)
		if err != nil {
			// Every republish may time out at 1ns; what matters is no duplicate.
			require.ErrorIs(t, err, bus.ErrPublish)
		}
		msgs := storedEvents(t, b, "run-6")
		seen := map[string]bool{}
		for _, m := range msgs {
			id := m.Header.Get(bus.HeaderMsgID)
			require.False(t, seen[id], "duplicate %s", id)
			seen[id] = true
		}
	})

	t.Run("waiting for room honours the context", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		// A subscriber that never answers: acks never come, and there is no
		// "no responders" either.
		sub, err := b.nc.Subscribe("lovia.events.run-7", func(*nats.Msg) {})
		require.NoError(t, err)
		defer sub.Unsubscribe()
		p := newPublisher(t, b, bus.PublisherConfig{MaxPending: 1, AckTimeout: time.Hour})
		rp, err := p.Resume("run-7", bus.JSON, 0)
		require.NoError(t, err)
		ctx := ctxT(t)
		_, err = rp.Publish(ctx, delta("a"))
		require.NoError(t, err)
		short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		_, err = rp.Publish(short, delta("b"))
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.Contains(t, err.Error(), "run-7.1", "the error names the event it waited for")
		require.NotErrorIs(t, err, bus.ErrPublish, "not broken: the caller may try again")
		require.Equal(t, uint64(2), rp.NextSeq(), "the refused event used no seq")
		short2, cancel2 := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel2()
		require.ErrorIs(t, rp.Flush(short2), context.DeadlineExceeded)
	})

	t.Run("rejects bad input", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p := newPublisher(t, b, bus.PublisherConfig{})
		_, err := p.Resume("a.b", bus.JSON, 0)
		require.ErrorIs(t, err, bus.ErrInvalidToken)
		_, err = p.Resume("ok", "xml", 0)
		require.ErrorIs(t, err, bus.ErrUnknownEncoding)
		_, err = bus.NewPublisher(b.js, bus.PublisherConfig{MaxPending: -1})
		require.ErrorIs(t, err, bus.ErrInvalidConfig)
		require.Contains(t, err.Error(), "MaxPending")
	})
}

// A publisher whose connection closed fails at once instead of waiting the
// ack timeout for acks that cannot come.
func TestPublishOnClosedConnectionFailsFast(t *testing.T) {
	t.Parallel()
	srv, err := broker.StartEmbedded(broker.EmbeddedConfig{StoreDir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	nc, err := srv.Connect()
	require.NoError(t, err)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	ctx := context.Background()
	_, err = bus.Provision(ctx, js, bus.ProvisionConfig{})
	require.NoError(t, err)
	pub, err := bus.NewPublisher(js, bus.PublisherConfig{AckTimeout: time.Minute})
	require.NoError(t, err)
	rp, err := pub.Open(ctx, "r1", bus.JSON)
	require.NoError(t, err)
	_, _ = rp.Publish(ctx, &loop.TextDelta{Delta: "x"})
	nc.Close()
	start := time.Now()
	err = rp.Flush(ctx)
	require.Error(t, err)
	require.Less(t, time.Since(start), 10*time.Second)
}
