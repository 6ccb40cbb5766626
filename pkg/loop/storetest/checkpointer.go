package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/loop"
)

// NewCheckpointer returns a fresh, empty checkpointer for one subtest.
type NewCheckpointer func(t *testing.T) loop.Checkpointer

// RunCheckpointer runs the [loop.Checkpointer] conformance suite.
func RunCheckpointer(t *testing.T, newStore NewCheckpointer) {
	t.Helper()
	type bundle struct {
		cp  loop.Checkpointer
		run string
	}
	setup := func(t *testing.T) bundle {
		t.Helper()
		t.Parallel()
		return bundle{cp: newStore(t), run: newID("run")}
	}
	// write appends and requires success.
	write := func(t *testing.T, b bundle, w loop.CheckpointWrite) uint64 {
		t.Helper()
		rev, err := b.cp.Append(testContext(t), b.run, w)
		require.NoError(t, err)
		require.NotZero(t, rev, "a successful append returns a non-zero revision")
		return rev
	}
	load := func(t *testing.T, b bundle) *loop.Snapshot {
		t.Helper()
		s, err := b.cp.Load(testContext(t), b.run)
		require.NoError(t, err)
		require.Equal(t, b.run, s.RunID)
		return s
	}

	t.Run("AppendThenLoadKeepsOrder", func(t *testing.T) {
		b := setup(t)
		var all []loop.Entry
		var rev uint64
		for n := 1; n <= 5; n++ {
			next := write(t, b, loop.CheckpointWrite{Base: len(all), Entries: turn(n), Head: head(n), Revision: rev})
			require.Greater(t, next, rev, "revisions grow")
			rev = next
			all = append(all, turn(n)...)
		}
		s := load(t, b)
		requireEntries(t, all, s.Entries)
		requireHead(t, head(5), s.RunHead)
		require.Equal(t, rev, s.Revision, "Load returns the last Append's revision")
	})

	t.Run("ManySmallAppendsKeepOrder", func(t *testing.T) {
		b := setup(t)
		var all []loop.Entry
		var rev uint64
		for n := 0; n < 60; n++ {
			batch := []loop.Entry{loop.UserText(fmt.Sprintf("m%d", n))}
			if n%3 == 0 {
				batch = nil
			}
			rev = write(t, b, loop.CheckpointWrite{Base: len(all), Entries: batch, Head: head(n), Revision: rev})
			all = append(all, batch...)
		}
		s := load(t, b)
		requireEntries(t, all, s.Entries)
		require.Equal(t, rev, s.Revision)
	})

	t.Run("HeadIsReplacedNotMerged", func(t *testing.T) {
		b := setup(t)
		h1 := head(1)
		h1.Output = map[string]any{"answer": "partial", "n": 1}
		h1.Error = &loop.ErrorInfo{Type: "ProviderError", Message: "boom", Retryable: true}
		rev := write(t, b, loop.CheckpointWrite{Entries: turn(1), Head: h1})
		h2 := loop.RunHead{Agent: "agent-b", Turns: 2, Status: loop.StatusInterrupted, UpdatedAt: h1.UpdatedAt.Add(1)}
		write(t, b, loop.CheckpointWrite{Base: 3, Head: h2, Revision: rev})
		s := load(t, b)
		requireHead(t, h2, s.RunHead)
		require.Nil(t, s.Output, "the old output does not survive")
		require.Nil(t, s.Error, "the old error does not survive")
		require.Empty(t, s.ContextState, "the old context state does not survive")
	})

	t.Run("HeadValuesRoundTrip", func(t *testing.T) {
		b := setup(t)
		h := head(7)
		h.Status = loop.StatusCompleted
		h.Output = map[string]any{"title": "done", "items": []any{1, "two", 3.5, true, nil, map[string]any{"k": "v"}}}
		h.Error = &loop.ErrorInfo{Type: "OutputNotSerializable", Message: "x", Hint: "y"}
		write(t, b, loop.CheckpointWrite{Head: h})
		requireHead(t, h, load(t, b).RunHead)
	})

	t.Run("EmptyAppendKeepsEntries", func(t *testing.T) {
		b := setup(t)
		rev1 := write(t, b, loop.CheckpointWrite{Head: head(0)})
		s := load(t, b)
		require.Empty(t, s.Entries, "a run created by an empty append has no entries")
		rev2 := write(t, b, loop.CheckpointWrite{Entries: turn(1), Head: head(1), Revision: rev1})
		rev3 := write(t, b, loop.CheckpointWrite{Base: 3, Head: head(2), Revision: rev2})
		require.NotEqual(t, rev2, rev3, "an empty append is a write: the revision changes")
		s = load(t, b)
		requireEntries(t, turn(1), s.Entries)
		requireHead(t, head(2), s.RunHead)
		require.Equal(t, rev3, s.Revision)
	})

	t.Run("LoadUnknownIsErrNoSnapshot", func(t *testing.T) {
		b := setup(t)
		_, err := b.cp.Load(testContext(t), b.run)
		require.ErrorIs(t, err, loop.ErrNoSnapshot)
	})

	t.Run("DeleteIsIdempotent", func(t *testing.T) {
		b := setup(t)
		ctx := testContext(t)
		require.NoError(t, b.cp.Delete(ctx, b.run), "deleting an unknown run")
		write(t, b, loop.CheckpointWrite{Entries: turn(1), Head: head(1)})
		require.NoError(t, b.cp.Delete(ctx, b.run))
		_, err := b.cp.Load(ctx, b.run)
		require.ErrorIs(t, err, loop.ErrNoSnapshot)
		require.NoError(t, b.cp.Delete(ctx, b.run), "deleting twice")

		write(t, b, loop.CheckpointWrite{Entries: turn(2), Head: head(2)})
		requireEntries(t, turn(2), load(t, b).Entries, "a recreated run holds no old entries")
	})

	t.Run("StaleRevisionIsFenced", func(t *testing.T) {
		b := setup(t)
		ctx := testContext(t)
		// Writer A creates the run, then stalls; writer B takes it over.
		revA := write(t, b, loop.CheckpointWrite{Entries: turn(1), Head: head(1)})
		taken := load(t, b)
		revB := write(t, b, loop.CheckpointWrite{Base: len(taken.Entries), Entries: turn(2), Head: head(2), Revision: taken.Revision})

		stale := []loop.Entry{loop.AssistantText("written by the stale writer")}
		_, err := b.cp.Append(ctx, b.run, loop.CheckpointWrite{Base: 3, Entries: stale, Head: head(99), Revision: revA})
		require.ErrorIs(t, err, loop.ErrFenced)
		_, err = b.cp.Append(ctx, b.run, loop.CheckpointWrite{Base: 3, Head: head(99), Revision: revA})
		require.ErrorIs(t, err, loop.ErrFenced, "an empty append is fenced too")

		s := load(t, b)
		requireEntries(t, append(turn(1), turn(2)...), s.Entries, "nothing the stale writer wrote is visible")
		requireHead(t, head(2), s.RunHead)
		require.Equal(t, revB, s.Revision)

		// The new owner carries on.
		write(t, b, loop.CheckpointWrite{Base: 6, Entries: turn(3), Head: head(3), Revision: revB})
		requireEntries(t, append(append(turn(1), turn(2)...), turn(3)...), load(t, b).Entries)
	})

	t.Run("RevisionZeroOnExistingRunIsFenced", func(t *testing.T) {
		b := setup(t)
		rev := write(t, b, loop.CheckpointWrite{Entries: turn(1), Head: head(1)})
		_, err := b.cp.Append(testContext(t), b.run, loop.CheckpointWrite{Entries: turn(9), Head: head(9)})
		require.ErrorIs(t, err, loop.ErrFenced)
		s := load(t, b)
		requireEntries(t, turn(1), s.Entries)
		require.Equal(t, rev, s.Revision)
	})

	t.Run("RevisionOnMissingRunIsFenced", func(t *testing.T) {
		b := setup(t)
		ctx := testContext(t)
		_, err := b.cp.Append(ctx, b.run, loop.CheckpointWrite{Entries: turn(1), Head: head(1), Revision: 12345})
		require.ErrorIs(t, err, loop.ErrFenced)
		_, err = b.cp.Load(ctx, b.run)
		require.ErrorIs(t, err, loop.ErrNoSnapshot, "the refused write created nothing")
	})

	t.Run("RevisionIsNotReusedAfterDelete", func(t *testing.T) {
		b := setup(t)
		ctx := testContext(t)
		old := write(t, b, loop.CheckpointWrite{Entries: turn(1), Head: head(1)})
		require.NoError(t, b.cp.Delete(ctx, b.run))
		fresh := write(t, b, loop.CheckpointWrite{Entries: turn(2), Head: head(2)})
		require.NotEqual(t, old, fresh)
		_, err := b.cp.Append(ctx, b.run, loop.CheckpointWrite{Base: 3, Entries: turn(3), Head: head(3), Revision: old})
		require.ErrorIs(t, err, loop.ErrFenced, "a writer from before the delete is fenced")
		requireEntries(t, turn(2), load(t, b).Entries)
	})

	t.Run("CreateRaceHasOneWinner", func(t *testing.T) {
		b := setup(t)
		ctx := testContext(t)
		const writers = 4
		errs := make([]error, writers)
		revs := make([]uint64, writers)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				revs[i], errs[i] = b.cp.Append(ctx, b.run, loop.CheckpointWrite{Entries: turn(i), Head: head(i)})
			}()
		}
		close(start)
		wg.Wait()
		winner := -1
		for i, err := range errs {
			if err == nil {
				require.Equal(t, -1, winner, "two writers created the run (%d and %d)", winner, i)
				winner = i
				continue
			}
			require.ErrorIs(t, err, loop.ErrFenced, "writer %d", i)
		}
		require.NotEqual(t, -1, winner, "no writer created the run")
		s := load(t, b)
		requireEntries(t, turn(winner), s.Entries, "only the winner's entries are visible")
		require.Equal(t, revs[winner], s.Revision)
	})

	t.Run("ConcurrentWritersFromOneRevisionHaveOneWinner", func(t *testing.T) {
		b := setup(t)
		ctx := testContext(t)
		rev := write(t, b, loop.CheckpointWrite{Entries: turn(0), Head: head(0)})
		const writers = 4
		errs := make([]error, writers)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_, errs[i] = b.cp.Append(ctx, b.run, loop.CheckpointWrite{Base: 3, Entries: turn(i + 1), Head: head(i + 1), Revision: rev})
			}()
		}
		close(start)
		wg.Wait()
		winner := -1
		for i, err := range errs {
			if err == nil {
				require.Equal(t, -1, winner, "two writers appended from one revision")
				winner = i
				continue
			}
			require.ErrorIs(t, err, loop.ErrFenced)
		}
		require.NotEqual(t, -1, winner)
		requireEntries(t, append(turn(0), turn(winner+1)...), load(t, b).Entries)
	})

	t.Run("BaseMismatchIsFenced", func(t *testing.T) {
		b := setup(t)
		ctx := testContext(t)
		_, err := b.cp.Append(ctx, b.run, loop.CheckpointWrite{Base: 2, Entries: turn(1), Head: head(1)})
		require.ErrorIs(t, err, loop.ErrFenced, "a new run holds 0 entries")
		rev := write(t, b, loop.CheckpointWrite{Entries: turn(1), Head: head(1)})
		for _, base := range []int{0, 2, 4, 100} {
			_, err := b.cp.Append(ctx, b.run, loop.CheckpointWrite{Base: base, Entries: turn(2), Head: head(2), Revision: rev})
			require.ErrorIs(t, err, loop.ErrFenced, "base %d", base)
		}
		s := load(t, b)
		requireEntries(t, turn(1), s.Entries, "refused writes are invisible")
		require.Equal(t, rev, s.Revision, "refused writes do not move the revision")
		write(t, b, loop.CheckpointWrite{Base: 3, Entries: turn(2), Head: head(2), Revision: rev})
	})

	t.Run("LargeToolOutputRoundTrips", func(t *testing.T) {
		b := setup(t)
		big := largeOutput(LargeOutputSize)
		first := []loop.Entry{loop.ToolCallEntry("big", "dump", "{}"), loop.ToolResultEntry("big", "dump", big, false)}
		rev := write(t, b, loop.CheckpointWrite{Entries: first, Head: head(1)})
		rev = write(t, b, loop.CheckpointWrite{Base: 2, Entries: turn(2), Head: head(2), Revision: rev})
		s := load(t, b)
		require.Len(t, s.Entries, 5)
		require.Equal(t, len(big), len(s.Entries[1].Output))
		require.True(t, big == s.Entries[1].Output, "the 5 MB output differs after the round trip")
		requireEntries(t, turn(2), s.Entries[2:])
		require.Equal(t, rev, s.Revision)
	})

	t.Run("LargeHeadRoundTrips", func(t *testing.T) {
		b := setup(t)
		h := head(1)
		h.Output = largeOutput(2 << 20)
		rev := write(t, b, loop.CheckpointWrite{Entries: turn(1), Head: h})
		s := load(t, b)
		requireHead(t, h, s.RunHead)
		h2 := head(2)
		write(t, b, loop.CheckpointWrite{Base: 3, Head: h2, Revision: rev})
		requireHead(t, h2, load(t, b).RunHead)
	})

	t.Run("WrittenDataIsCopied", func(t *testing.T) {
		b := setup(t)
		entries := turn(1)
		h := head(1)
		rev := write(t, b, loop.CheckpointWrite{Entries: entries, Head: h})
		entries[0].Text = "mutated"
		entries[2].Raw[0] = '['
		entries[2].Parts[0].Text = "mutated"
		h.ContextState["context"].(map[string]any)["turn"] = 1000
		h.ContextState["new"] = true
		s := load(t, b)
		requireEntries(t, turn(1), s.Entries)
		requireHead(t, head(1), s.RunHead)
		require.Equal(t, rev, s.Revision)
	})

	t.Run("LoadedSnapshotIsACopy", func(t *testing.T) {
		b := setup(t)
		write(t, b, loop.CheckpointWrite{Entries: turn(1), Head: head(1)})
		s := load(t, b)
		s.Entries[0].Text = "mutated"
		s.Entries[2].Raw[0] = '['
		s.Entries[2].Parts[0].Text = "mutated"
		s.Entries = append(s.Entries[:0], loop.UserText("replaced"))
		s.ContextState["context"].(map[string]any)["turn"] = 1000
		again := load(t, b)
		requireEntries(t, turn(1), again.Entries)
		requireHead(t, head(1), again.RunHead)
	})

	t.Run("RunsAreIndependent", func(t *testing.T) {
		b := setup(t)
		other := bundle{cp: b.cp, run: newID("other")}
		ra := write(t, b, loop.CheckpointWrite{Entries: turn(1), Head: head(1)})
		rb := write(t, other, loop.CheckpointWrite{Entries: turn(2), Head: head(2)})
		write(t, b, loop.CheckpointWrite{Base: 3, Entries: turn(3), Head: head(3), Revision: ra})
		_, err := b.cp.Append(testContext(t), other.run, loop.CheckpointWrite{Base: 3, Head: head(4), Revision: ra})
		require.True(t, errors.Is(err, loop.ErrFenced), "another run's revision does not fit")
		require.NoError(t, b.cp.Delete(testContext(t), b.run))
		s := load(t, other)
		requireEntries(t, turn(2), s.Entries)
		require.Equal(t, rb, s.Revision)
	})
}
