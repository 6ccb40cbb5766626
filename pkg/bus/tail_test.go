package bus_test

import (
	"context"
	"errors"
	"io"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/loop"
)

type tailBundle struct {
	*testBundle
	pub    *bus.Publisher
	tailer *bus.Tailer
}

func tailSetup(t *testing.T) *tailBundle {
	t.Helper()
	b := provisioned(t)
	pub, err := bus.NewPublisher(b.js, bus.PublisherConfig{})
	require.NoError(t, err)
	tailer, err := bus.NewTailer(b.js, bus.TailerConfig{})
	require.NoError(t, err)
	return &tailBundle{testBundle: b, pub: pub, tailer: tailer}
}

// attempt publishes one submission: run_started, n deltas and a terminal
// event (failed or completed). It returns the seqs used.
func (b *tailBundle) attempt(t *testing.T, runID string, n int, failed bool) []uint64 {
	t.Helper()
	ctx := ctxT(t)
	rp, err := b.pub.Open(ctx, runID, bus.JSON)
	require.NoError(t, err)
	var seqs []uint64
	pub := func(ev loop.Event) {
		seq, err := rp.Publish(ctx, ev)
		require.NoError(t, err)
		seqs = append(seqs, seq)
	}
	pub(&bus.RunStarted{RunStarted: loop.RunStarted{EventHeader: hdr("demo", 0)}, Worker: "w1"})
	for range n {
		pub(delta("x"))
	}
	if failed {
		pub(&loop.RunFailed{EventHeader: hdr("demo", 1), Error: loop.ErrorInfo{Type: "ProviderError", Message: "503"}})
	} else {
		pub(&loop.RunCompleted{EventHeader: hdr("demo", 1), Output: "ok", Turns: 1})
	}
	require.NoError(t, rp.Close(ctx))
	return seqs
}

// drain reads a tail to io.EOF and returns the seqs.
func drain(t *testing.T, tl *bus.Tail) []uint64 {
	t.Helper()
	ctx := ctxT(t)
	var seqs []uint64
	for env, err := range tl.All(ctx) {
		require.NoError(t, err)
		seqs = append(seqs, env.Seq)
	}
	_, err := tl.Next(ctx)
	require.ErrorIs(t, err, io.EOF, "stays at the end")
	return seqs
}

func seqRange(from, to uint64) []uint64 {
	var out []uint64
	for s := from; s <= to; s++ {
		out = append(out, s)
	}
	return out
}

func (b *tailBundle) open(t *testing.T, runID string, opts ...bus.TailOption) *bus.Tail {
	t.Helper()
	tl, err := b.tailer.Tail(ctxT(t), runID, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, tl.Close(context.Background())) })
	return tl
}

func TestTail(t *testing.T) {
	t.Parallel()

	t.Run("from start ends at the first terminal event", func(t *testing.T) {
		t.Parallel()
		b := tailSetup(t)
		first := b.attempt(t, "r1", 3, true)   // 1..5, failed
		second := b.attempt(t, "r1", 2, false) // 6..9, resubmitted and completed
		require.Equal(t, seqRange(1, 5), first)
		require.Equal(t, seqRange(6, 9), second)

		tl := b.open(t, "r1")
		require.Equal(t, seqRange(1, 5), drain(t, tl))
		tl = b.open(t, "r1", bus.FromStart())
		require.Equal(t, seqRange(1, 5), drain(t, tl))
	})

	t.Run("from seq N", func(t *testing.T) {
		t.Parallel()
		b := tailSetup(t)
		b.attempt(t, "r2", 3, true)
		b.attempt(t, "r2", 2, false)
		require.Equal(t, seqRange(3, 5), drain(t, b.open(t, "r2", bus.FromSeq(3))))
		require.Equal(t, seqRange(6, 9), drain(t, b.open(t, "r2", bus.FromSeq(6))), "the next attempt")
		require.Equal(t, []uint64{9}, drain(t, b.open(t, "r2", bus.FromSeq(9))))
	})

	t.Run("follow goes past terminal events", func(t *testing.T) {
		t.Parallel()
		b := tailSetup(t)
		b.attempt(t, "r3", 1, true)
		b.attempt(t, "r3", 1, false)
		tl := b.open(t, "r3", bus.Follow())
		ctx := ctxT(t)
		var seqs []uint64
		for len(seqs) < 6 {
			env, err := tl.Next(ctx)
			require.NoError(t, err)
			seqs = append(seqs, env.Seq)
		}
		require.Equal(t, seqRange(1, 6), seqs)
		short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		_, err := tl.Next(short)
		require.ErrorIs(t, err, context.DeadlineExceeded, "follow waits for more")
	})

	t.Run("live sees only new events", func(t *testing.T) {
		t.Parallel()
		b := tailSetup(t)
		b.attempt(t, "r4", 2, true) // 1..4, before the tail
		tl := b.open(t, "r4", bus.Live())
		b.attempt(t, "r4", 2, false) // 5..8
		require.Equal(t, seqRange(5, 8), drain(t, tl))
	})

	t.Run("a tail opened before the run waits for it", func(t *testing.T) {
		t.Parallel()
		b := tailSetup(t)
		tl := b.open(t, "r5")
		done := make(chan []uint64, 1)
		go func() {
			ctx := ctxT(t)
			var seqs []uint64
			for {
				env, err := tl.Next(ctx)
				if err != nil {
					done <- seqs
					return
				}
				seqs = append(seqs, env.Seq)
			}
		}()
		b.attempt(t, "r5", 50, false)
		require.Equal(t, seqRange(1, 52), <-done)
	})

	t.Run("each seq once, in order, even when stored twice", func(t *testing.T) {
		t.Parallel()
		b := tailSetup(t)
		ctx := ctxT(t)
		rp, err := b.pub.Open(ctx, "r6", bus.JSON)
		require.NoError(t, err)
		for range 3 {
			_, err := rp.Publish(ctx, delta("a"))
			require.NoError(t, err)
		}
		require.NoError(t, rp.Flush(ctx))
		// The same seqs again through the publisher (deduplicated by
		// Nats-Msg-Id) and raw with another id (as after the dedup window:
		// stored twice).
		again, err := b.pub.Resume("r6", bus.JSON, 0)
		require.NoError(t, err)
		for range 3 {
			_, err := again.Publish(ctx, delta("dup"))
			require.NoError(t, err)
		}
		require.NoError(t, again.Flush(ctx))
		require.Equal(t, 3, again.Duplicates())
		env, err := bus.NewEnvelope(bus.JSON, "r6", 2, time.Now(), delta("late copy"))
		require.NoError(t, err)
		body, err := env.Marshal()
		require.NoError(t, err)
		h := env.Headers()
		h.Set(bus.HeaderMsgID, "other-id")
		_, err = b.js.PublishMsg(ctx, &nats.Msg{Subject: "lovia.events.r6", Header: h, Data: body})
		require.NoError(t, err)
		_, err = rp.Publish(ctx, &loop.RunCompleted{Output: "ok"})
		require.NoError(t, err)
		require.NoError(t, rp.Flush(ctx))

		require.Len(t, storedEvents(t, b.testBundle, "r6"), 5, "seq 2 is stored twice")
		tl := b.open(t, "r6")
		var deltas []string
		var seqs []uint64
		for env, err := range tl.All(ctx) {
			require.NoError(t, err)
			seqs = append(seqs, env.Seq)
			if ev, err := env.Event(); err == nil {
				if d, ok := ev.(*loop.TextDelta); ok {
					deltas = append(deltas, d.Delta)
				}
			}
		}
		require.Equal(t, seqRange(1, 4), seqs)
		require.Equal(t, []string{"a", "a", "a"}, deltas, "the first stored copy wins")
	})

	t.Run("a malformed message is reported and skipped", func(t *testing.T) {
		t.Parallel()
		b := tailSetup(t)
		ctx := ctxT(t)
		rp, err := b.pub.Open(ctx, "r7", bus.Msgpack)
		require.NoError(t, err)
		_, err = rp.Publish(ctx, delta("a"))
		require.NoError(t, err)
		require.NoError(t, rp.Flush(ctx))
		_, err = b.js.Publish(ctx, "lovia.events.r7", []byte("garbage"))
		require.NoError(t, err)
		rp, err = b.pub.Resume("r7", bus.Msgpack, 1)
		require.NoError(t, err)
		_, err = rp.Publish(ctx, &loop.RunCompleted{Output: "ok"})
		require.NoError(t, err)
		require.NoError(t, rp.Flush(ctx))

		tl := b.open(t, "r7")
		env, err := tl.Next(ctx)
		require.NoError(t, err)
		require.Equal(t, uint64(1), env.Seq)
		_, err = tl.Next(ctx)
		require.ErrorIs(t, err, bus.ErrUnknownEncoding)
		env, err = tl.Next(ctx)
		require.NoError(t, err)
		require.Equal(t, uint64(2), env.Seq)
		require.Equal(t, bus.Msgpack, env.Encoding)
		_, err = tl.Next(ctx)
		require.ErrorIs(t, err, io.EOF)
	})

	t.Run("no durable consumers, released on close", func(t *testing.T) {
		t.Parallel()
		b := tailSetup(t)
		ctx := ctxT(t)
		var tails []*bus.Tail
		for range 5 {
			tl, err := b.tailer.Tail(ctx, "r8", bus.Live())
			require.NoError(t, err)
			tails = append(tails, tl)
		}
		s, err := b.js.Stream(ctx, "LOVIA_EVENTS")
		require.NoError(t, err)
		for name := range s.ListConsumers(ctx).Info() {
			require.Empty(t, name.Config.Durable, "tails use ephemeral consumers")
			require.True(t, name.Config.MemoryStorage)
		}
		info, err := s.Info(ctx)
		require.NoError(t, err)
		require.Equal(t, 5, info.State.Consumers)

		// Close unblocks a reader and frees the consumer at once.
		blocked := make(chan error, 1)
		go func() {
			_, err := tails[0].Next(ctx)
			blocked <- err
		}()
		for _, tl := range tails {
			require.NoError(t, tl.Close(ctx))
			require.NoError(t, tl.Close(ctx), "twice is fine")
		}
		require.ErrorIs(t, <-blocked, bus.ErrTailClosed)
		info, err = s.Info(ctx)
		require.NoError(t, err)
		require.Zero(t, info.State.Consumers)
		_, err = tails[1].Next(ctx)
		require.ErrorIs(t, err, bus.ErrTailClosed)
	})

	t.Run("options and input are checked", func(t *testing.T) {
		t.Parallel()
		b := tailSetup(t)
		ctx := ctxT(t)
		_, err := b.tailer.Tail(ctx, "r9", bus.FromSeq(3), bus.Live())
		require.ErrorContains(t, err, "conflict")
		_, err = b.tailer.Tail(ctx, "r9", bus.FromSeq(0))
		require.Error(t, err)
		_, err = b.tailer.Tail(ctx, "r.9")
		require.ErrorIs(t, err, bus.ErrInvalidToken)
		_, err = bus.NewTailer(b.js, bus.TailerConfig{InactiveThreshold: time.Millisecond})
		require.ErrorIs(t, err, bus.ErrInvalidConfig)

		other := setup(t) // no streams
		tailer, err := bus.NewTailer(other.js, bus.TailerConfig{})
		require.NoError(t, err)
		_, err = tailer.Tail(ctx, "r9")
		require.ErrorIs(t, err, bus.ErrStreamMissing)

		tl := b.open(t, "r9")
		short, cancel := context.WithCancel(ctx)
		cancel()
		_, err = tl.Next(short)
		require.True(t, errors.Is(err, context.Canceled), "%v", err)
	})
}

// rawPublish stores events with the given seqs in the given order, as a
// publisher that lost part of its pipeline would.
func rawPublish(t *testing.T, b *testBundle, runID string, seqs []uint64, terminal uint64, extra nats.Header) {
	t.Helper()
	ctx := ctxT(t)
	for _, seq := range seqs {
		var ev loop.Event = delta(strconv.FormatUint(seq, 10))
		if seq == terminal {
			ev = &loop.RunCompleted{Output: "ok"}
		}
		env, err := bus.NewEnvelope(bus.JSON, runID, seq, time.Now(), ev)
		require.NoError(t, err)
		body, err := env.Marshal()
		require.NoError(t, err)
		h := env.Headers()
		for k, v := range extra {
			h[k] = v
		}
		_, err = b.js.PublishMsg(ctx, &nats.Msg{Subject: "lovia.events." + runID, Header: h, Data: body})
		require.NoError(t, err)
	}
}

func TestTailReorders(t *testing.T) {
	t.Parallel()

	t.Run("events stored out of seq order come out in order", func(t *testing.T) {
		t.Parallel()
		b := tailSetup(t)
		rawPublish(t, b.testBundle, "o1", []uint64{1, 2, 5, 6, 3, 4, 7}, 7, nil)
		require.Equal(t, seqRange(1, 7), drain(t, b.open(t, "o1")))
		require.Equal(t, seqRange(3, 7), drain(t, b.open(t, "o1", bus.FromSeq(3))))
	})

	t.Run("a late event arrives while the tail waits", func(t *testing.T) {
		t.Parallel()
		b := tailSetup(t)
		rawPublish(t, b.testBundle, "o2", []uint64{1, 3, 4}, 0, nil)
		tl := b.open(t, "o2")
		got := make(chan []uint64, 1)
		go func() {
			var seqs []uint64
			for env, err := range tl.All(ctxT(t)) {
				if err != nil {
					break
				}
				seqs = append(seqs, env.Seq)
			}
			got <- seqs
		}()
		time.Sleep(50 * time.Millisecond) // within GapWait (25s): the tail holds 3 and 4
		rawPublish(t, b.testBundle, "o2", []uint64{2, 5}, 5, nil)
		require.Equal(t, seqRange(1, 5), <-got)
	})

	t.Run("a gap that never fills is skipped", func(t *testing.T) {
		t.Parallel()
		b := tailSetup(t)
		tailer, err := bus.NewTailer(b.js, bus.TailerConfig{GapWait: 100 * time.Millisecond})
		require.NoError(t, err)
		rawPublish(t, b.testBundle, "o3", []uint64{1, 2, 4, 5}, 5, nil)
		tl, err := tailer.Tail(ctxT(t), "o3")
		require.NoError(t, err)
		defer tl.Close(context.Background())
		require.Equal(t, []uint64{1, 2, 4, 5}, drain(t, tl))

		// MaxReorder bounds what is held while history is still being read.
		tailer, err = bus.NewTailer(b.js, bus.TailerConfig{GapWait: time.Hour, MaxReorder: 2})
		require.NoError(t, err)
		rawPublish(t, b.testBundle, "o4", []uint64{3, 4, 5, 6}, 6, nil) // 1 and 2 aged out
		tl2, err := tailer.Tail(ctxT(t), "o4")
		require.NoError(t, err)
		defer tl2.Close(context.Background())
		require.Equal(t, seqRange(3, 6), drain(t, tl2))
	})

	t.Run("LastSeq sees past an event stored late", func(t *testing.T) {
		t.Parallel()
		b := tailSetup(t)
		rawPublish(t, b.testBundle, "o5", []uint64{1, 2, 4, 5}, 0, nil)
		rawPublish(t, b.testBundle, "o5", []uint64{3}, 0, nats.Header{bus.HeaderHighSeq: {"5"}})
		last, err := b.pub.LastSeq(ctxT(t), "o5")
		require.NoError(t, err)
		require.Equal(t, uint64(5), last)
	})
}

// TestTailWaitsLongerThanARepublish: the default GapWait outlasts the
// default publisher's republish of a lost event (its ack timeout, then
// every retry), so a live tail never skips an event that is still coming.
func TestTailWaitsLongerThanARepublish(t *testing.T) {
	t.Parallel()
	tc := bus.TailerConfig{}.WithDefaults()
	pc := bus.PublisherConfig{}.WithDefaults()
	republish := pc.AckTimeout + time.Duration(pc.RetryAttempts)*(pc.RetryWait+pc.AckTimeout)
	require.Greater(t, tc.GapWait, republish)
}
