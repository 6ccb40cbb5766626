package store

import (
	"fmt"
	"testing"

	"github.com/lovia-fleet/lovia/pkg/loop"
)

// BenchmarkCheckpointAppend measures one checkpoint write — a model turn's
// entries (text and a tool call) and the head, one segment — for a run
// whose transcript already holds turn=N turns (each a model append and a
// tool-result append), against an embedded server. After each timed write
// the segment is purged, untimed, so every iteration writes at exactly N
// turns. The design keeps the
// cost flat: turn=200 should be within noise of turn=2.
func BenchmarkCheckpointAppend(b *testing.B) {
	for _, turns := range []int{2, 200} {
		b.Run(fmt.Sprintf("turn=%d", turns), func(b *testing.B) {
			_, st := newStore(b, Config{})
			cp := st.Checkpointer()
			ctx := b.Context()
			const run = "run-bench"
			var (
				rev    uint64
				stored int
				err    error
			)
			for n := range turns {
				e := turnEntries(n)
				if rev, err = cp.Append(ctx, run, loop.CheckpointWrite{Base: stored, Entries: e[:2], Head: runHead(n), Revision: rev}); err != nil {
					b.Fatal(err)
				}
				if rev, err = cp.Append(ctx, run, loop.CheckpointWrite{Base: stored + 2, Entries: e[2:], Head: runHead(n), Revision: rev}); err != nil {
					b.Fatal(err)
				}
				stored += len(e)
			}
			state, ok := cp.cache.get(run)
			if !ok || state.rev != rev {
				b.Fatal("the cache does not hold the last write")
			}
			model := turnEntries(turns)[:2]
			head := runHead(turns + 1)

			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if _, err := cp.Append(ctx, run, loop.CheckpointWrite{Base: stored, Entries: model, Head: head, Revision: state.rev}); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				// Purge the segment just written: the run holds N turns
				// again, its last segment at state.rev.
				if err := cp.b.purge(ctx, segKey(run, state.batches)); err != nil {
					b.Fatal(err)
				}
				cp.cache.put(run, state)
				b.StartTimer()
			}
		})
	}
}
