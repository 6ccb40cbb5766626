package store

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/loop"
)

func turnEntries(n int) []loop.Entry {
	id := fmt.Sprintf("call-%d", n)
	return []loop.Entry{
		loop.AssistantText(fmt.Sprintf("turn %d: let me look that up", n)),
		loop.ToolCallEntry(id, "lookup", fmt.Sprintf(`{"query":"item %d"}`, n)),
		loop.ToolResultEntry(id, "lookup", strings.Repeat(fmt.Sprintf("result %d ", n), 20), false),
	}
}

func runHead(n int) loop.RunHead {
	return loop.RunHead{Agent: "a", Turns: n, Status: loop.StatusRunning, Usage: loop.Usage{InputTokens: int64(n) * 100}, UpdatedAt: time.Unix(int64(n), 0).UTC()}
}

// TestCheckpointFencingTwoWorkers: two workers (own connections, own head
// caches) write one run; the stale one is refused and nothing it wrote is
// visible, not even as a stray key.
func TestCheckpointFencingTwoWorkers(t *testing.T) {
	t.Parallel()
	srv := startServer(t, Config{})
	a, b, reader := srv.open(t), srv.open(t), srv.open(t)
	ctx := t.Context()
	const run = "run-fence"

	revA, err := a.Checkpointer().Append(ctx, run, loop.CheckpointWrite{Entries: turnEntries(1), Head: runHead(1)})
	require.NoError(t, err)

	// The run is redelivered to worker b, which takes it over.
	snap, err := b.Checkpointer().Load(ctx, run)
	require.NoError(t, err)
	require.Equal(t, revA, snap.Revision)
	revB, err := b.Checkpointer().Append(ctx, run, loop.CheckpointWrite{Base: 3, Entries: turnEntries(2), Head: runHead(2), Revision: snap.Revision})
	require.NoError(t, err)

	// Worker a wakes up and writes its next turn.
	_, err = a.Checkpointer().Append(ctx, run, loop.CheckpointWrite{Base: 3, Entries: []loop.Entry{loop.AssistantText("zombie")}, Head: runHead(99), Revision: revA})
	require.ErrorIs(t, err, loop.ErrFenced)
	require.ErrorIs(t, err, jetstream.ErrKeyRevisionMismatch, "the NATS cause is matchable too")
	require.True(t, strings.HasPrefix(err.Error(), "store: checkpoint append run-fence: "), err.Error())

	got, err := reader.Checkpointer().Load(ctx, run)
	require.NoError(t, err)
	require.Equal(t, append(turnEntries(1), turnEntries(2)...), got.Entries)
	require.Equal(t, 2, got.Turns)
	require.Equal(t, revB, got.Revision)
	require.Len(t, keys(t, a, a.checkpoints.b, run+".>"), 2, "the zombie wrote nothing: two segments, the owners'")

	// The owner carries on.
	_, err = b.Checkpointer().Append(ctx, run, loop.CheckpointWrite{Base: 6, Entries: turnEntries(3), Head: runHead(3), Revision: revB})
	require.NoError(t, err)
	got, err = reader.Checkpointer().Load(ctx, run)
	require.NoError(t, err)
	require.Equal(t, append(append(turnEntries(1), turnEntries(2)...), turnEntries(3)...), got.Entries)

	require.NoError(t, a.Checkpointer().Delete(ctx, run))
	require.Empty(t, keys(t, a, a.checkpoints.b, run+".>"), "Delete purges every key of the run")
	_, err = b.Checkpointer().Append(ctx, run, loop.CheckpointWrite{Base: 9, Head: runHead(4), Revision: revB})
	require.ErrorIs(t, err, loop.ErrFenced, "the owner of a deleted run is fenced")
}

// TestCheckpointAppendCostIsConstant: an append writes the same number of
// messages and bytes at turn 200 as at turn 2.
func TestCheckpointAppendCostIsConstant(t *testing.T) {
	t.Parallel()
	_, st := newStore(t, Config{})
	ctx := t.Context()
	cp := st.Checkpointer()
	const run = "run-cost"
	var rev uint64
	state := func() jetstream.StreamState {
		info, err := cp.b.stream.Info(ctx)
		require.NoError(t, err)
		return info.State
	}
	type cost struct{ msgs, bytes uint64 }
	measure := func(turn int) cost {
		before := state()
		var err error
		rev, err = cp.Append(ctx, run, loop.CheckpointWrite{Base: 3 * turn, Entries: turnEntries(turn), Head: runHead(turn), Revision: rev})
		require.NoError(t, err)
		after := state()
		return cost{after.Msgs - before.Msgs, after.Bytes - before.Bytes}
	}
	var early, late cost
	for turn := range 201 {
		c := measure(turn)
		switch turn {
		case 2:
			early = c
		case 200:
			late = c
		}
	}
	require.Equal(t, uint64(1), early.msgs, "one segment")
	require.Equal(t, early.msgs, late.msgs)
	require.InDelta(t, float64(early.bytes), float64(late.bytes), 64, "bytes written at turn 2 (%d) and 200 (%d)", early.bytes, late.bytes)

	empty := state()
	rev, err := cp.Append(ctx, run, loop.CheckpointWrite{Base: 3 * 201, Head: runHead(201), Revision: rev})
	require.NoError(t, err)
	require.Equal(t, empty.Msgs+1, state().Msgs, "an empty append is one message too")
	snap, err := cp.Load(ctx, run)
	require.NoError(t, err)
	require.Len(t, snap.Entries, 3*201)
	require.Equal(t, rev, snap.Revision)
}

// TestLargeValuesAreChunked: 5 MB tool outputs go through a checkpoint and a
// session with the server's default 1 MiB max payload, split into chunk
// keys that the run's Delete and the session's Clear remove.
func TestLargeValuesAreChunked(t *testing.T) {
	t.Parallel()
	srv, st := newStore(t, Config{})
	ctx := t.Context()
	big := strings.Repeat("0123456789abcdef", 5<<20/16)
	entries := []loop.Entry{loop.ToolCallEntry("c1", "dump", "{}"), loop.ToolResultEntry("c1", "dump", big, false)}

	rev, err := st.Checkpointer().Append(ctx, "run-big", loop.CheckpointWrite{Entries: entries, Head: runHead(1)})
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(keys(t, st, st.checkpoints.b, "run-big.x.>")), 5, "the batch went to chunk keys")
	snap, err := st.Checkpointer().Load(ctx, "run-big")
	require.NoError(t, err)
	require.Equal(t, rev, snap.Revision)
	require.True(t, snap.Entries[1].Output == big)
	require.NoError(t, st.Checkpointer().Delete(ctx, "run-big"))
	require.Empty(t, keys(t, st, st.checkpoints.b, "run-big.>"))

	_, err = st.Session().Append(ctx, "sess-big", loop.Segment{RunID: "run-big", Entries: entries})
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(keys(t, st, st.sessions.b, "sess-big.x.>")), 5)
	segs, err := st.Session().Segments(ctx, "sess-big")
	require.NoError(t, err)
	require.Len(t, segs, 1)
	require.True(t, segs[0].Entries[1].Output == big)

	// A duplicate append leaves no stray chunks.
	chunkKeys := keys(t, st, st.sessions.b, "sess-big.x.>")
	_, err = st.Session().Append(ctx, "sess-big", loop.Segment{RunID: "run-big", Entries: entries})
	require.NoError(t, err)
	require.Equal(t, chunkKeys, keys(t, st, st.sessions.b, "sess-big.x.>"))

	// Trimming rewrites the segment small and drops its chunks.
	n, err := st.Session().TrimToolResults(ctx, "sess-big", 100, 0)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Empty(t, keys(t, st, st.sessions.b, "sess-big.x.>"))

	require.NoError(t, st.Session().Clear(ctx, "sess-big"))
	require.Empty(t, keys(t, st, st.sessions.b, "sess-big.>"))

	capped, err := Open(ctx, srv.connect(t), Config{MaxValueSize: 4 << 20})
	require.NoError(t, err)
	_, err = capped.Checkpointer().Append(ctx, "run-huge", loop.CheckpointWrite{Entries: entries})
	require.ErrorIs(t, err, ErrTooLarge)
	require.Empty(t, keys(t, st, st.checkpoints.b, "run-huge.>"), "nothing was written")
}

func TestCheckpointErrors(t *testing.T) {
	t.Parallel()
	srv, st := newStore(t, Config{})
	ctx := t.Context()

	_, err := st.Checkpointer().Append(ctx, "bad.id", loop.CheckpointWrite{})
	require.ErrorIs(t, err, ErrInvalidID)
	require.Contains(t, err.Error(), "checkpoint append")
	_, err = st.Checkpointer().Load(ctx, "")
	require.ErrorIs(t, err, ErrInvalidID)

	_, err = st.Checkpointer().Load(ctx, "run-none")
	require.ErrorIs(t, err, loop.ErrNoSnapshot)
	require.EqualError(t, err, "store: checkpoint load run-none: no snapshot")

	_, err = st.Checkpointer().Append(ctx, "run-none", loop.CheckpointWrite{Base: 1})
	require.ErrorIs(t, err, loop.ErrFenced)
	require.ErrorIs(t, err, ErrBaseMismatch)

	// A closed connection is ErrUnavailable, and NATS's error is kept.
	js := srv.connect(t)
	closed, err := Open(ctx, js, Config{})
	require.NoError(t, err)
	js.Conn().Close()
	_, err = closed.Checkpointer().Load(ctx, "run-1")
	require.ErrorIs(t, err, ErrUnavailable)
	require.ErrorIs(t, err, nats.ErrConnectionClosed)
	require.True(t, strings.HasPrefix(err.Error(), "store: checkpoint load run-1: jetstream unavailable: "), err.Error())
}

// TestDefaultDeadline: a call whose context has no deadline gets
// Config.Timeout; a caller's deadline wins over it.
func TestDefaultDeadline(t *testing.T) {
	t.Parallel()
	_, st := newStore(t, Config{})
	cp := &Checkpointer{b: &bucket{}}
	*cp.b = *st.checkpoints.b
	cp.b.timeout = time.Nanosecond
	cp.b.budget = -1 // no retries: each call meets the default deadline once

	_, err := cp.Load(context.Background(), "run-1")
	require.ErrorIs(t, err, ErrTimeout)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Contains(t, err.Error(), "store: checkpoint load run-1: timeout")

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = cp.Load(ctx, "run-1")
	require.ErrorIs(t, err, loop.ErrNoSnapshot, "the caller's deadline replaces the default")
}

func loopWrite() loop.CheckpointWrite {
	return loop.CheckpointWrite{Entries: turnEntries(1), Head: runHead(1)}
}

// TestLegacyCheckpointIsContinued: a run an earlier release stored as a
// head key and batch keys is loaded and continued in that layout by any
// worker (a worker upgraded mid-run takes it over), and a stale writer is
// fenced there too.
func TestLegacyCheckpointIsContinued(t *testing.T) {
	t.Parallel()
	srv := startServer(t, Config{})
	old, next, reader := srv.open(t), srv.open(t), srv.open(t)
	ctx := t.Context()
	const run = "run-legacy"

	// The earlier release's writes: two appends, each a batch and a head.
	ocp := old.Checkpointer()
	rev, err := ocp.appendLegacy(ctx, run, loop.CheckpointWrite{Entries: turnEntries(1), Head: runHead(1)}, headState{legacy: true})
	require.NoError(t, err)
	st, ok := ocp.cache.get(run)
	require.True(t, ok)
	rev, err = ocp.appendLegacy(ctx, run, loop.CheckpointWrite{Base: 3, Entries: turnEntries(2), Head: runHead(2), Revision: rev}, st)
	require.NoError(t, err)
	require.Len(t, keys(t, old, old.checkpoints.b, run+".b.>"), 2)

	snap, err := next.Checkpointer().Load(ctx, run)
	require.NoError(t, err)
	require.Equal(t, append(turnEntries(1), turnEntries(2)...), snap.Entries)
	require.Equal(t, rev, snap.Revision)
	rev3, err := next.Checkpointer().Append(ctx, run, loop.CheckpointWrite{Base: 6, Entries: turnEntries(3), Head: runHead(3), Revision: snap.Revision})
	require.NoError(t, err)
	require.Len(t, keys(t, old, old.checkpoints.b, run+".b.>"), 3, "continued in its own layout")
	require.Empty(t, keys(t, old, old.checkpoints.b, segFilter(run)), "no segment mixed in")

	_, err = old.Checkpointer().Append(ctx, run, loop.CheckpointWrite{Base: 6, Entries: turnEntries(9), Head: runHead(9), Revision: rev})
	require.ErrorIs(t, err, loop.ErrFenced, "the stale writer of a legacy run")

	got, err := reader.Checkpointer().Load(ctx, run)
	require.NoError(t, err)
	require.Equal(t, append(append(turnEntries(1), turnEntries(2)...), turnEntries(3)...), got.Entries)
	require.Equal(t, rev3, got.Revision)
	require.Equal(t, 3, got.Turns)
}
