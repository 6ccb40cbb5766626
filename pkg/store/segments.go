package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/lovia-fleet/lovia/internal/jsapi"
	"github.com/lovia-fleet/lovia/pkg/loop"
)

// segRecord is one append in the segment layout: the head after it, the
// entries it appended and where they start, and the nonce of the write.
type segRecord struct {
	Head    loop.RunHead `msgpack:"head"`
	Base    int          `msgpack:"base"`
	Entries []loop.Entry `msgpack:"entries,omitempty"`
	Write   string       `msgpack:"w,omitempty"`
}

// segKey is the key of a run's append n (0 for the first).
func segKey(run string, n int) string { return fmt.Sprintf("%s.c.%08d", run, n) }

// segFilter matches every segment of a run, and nothing else of it (its
// chunks are <run>.x.…): the compare-and-set of an append is on the last
// message it matches.
func segFilter(run string) string { return run + ".c.*" }

// segIndex is n of segKey(run, n), or -1.
func segIndex(key string) int {
	i := strings.LastIndexByte(key, '.')
	if i < 0 {
		return -1
	}
	n, err := strconv.Atoi(key[i+1:])
	if err != nil || n < 0 {
		return -1
	}
	return n
}

// loadSegments reads a run stored in the segment layout; ok is false when
// it has no segment (nothing stored, or the head-and-batches layout).
func (c *Checkpointer) loadSegments(ctx context.Context, runID string) (snap *loop.Snapshot, ok bool, err error) {
	listed, err := c.b.list(ctx, segFilter(runID))
	if err != nil {
		return nil, false, wrapLoad(runID, err)
	}
	if len(listed) == 0 {
		return nil, false, nil
	}
	var (
		entries []loop.Entry
		last    segRecord
	)
	for i, e := range listed {
		if n := segIndex(e.Key()); n != i {
			return nil, true, fmt.Errorf("store: checkpoint load %s: %w: segment %s where segment %d was expected", runID, ErrCorrupt, e.Key(), i)
		}
		var s segRecord
		if _, err := c.b.decode(ctx, e.Value(), &s); err != nil {
			return nil, true, wrapLoad(runID, err)
		}
		if s.Base != len(entries) {
			return nil, true, fmt.Errorf("store: checkpoint load %s: %w: segment %d starts at entry %d, want %d", runID, ErrCorrupt, i, s.Base, len(entries))
		}
		entries = append(entries, s.Entries...)
		last = s
	}
	rev := listed[len(listed)-1].Revision()
	c.cache.put(runID, headState{rev: rev, entries: len(entries), batches: len(listed)})
	last.Head.UpdatedAt = utc(last.Head.UpdatedAt)
	if entries == nil {
		entries = []loop.Entry{}
	}
	return &loop.Snapshot{RunID: runID, Entries: entries, RunHead: last.Head, Revision: rev}, true, nil
}

// lastSegment reads a run's last segment from the stream leader: its
// revision, the state an append continues from, and its nonce. ok is false
// when the run has no segment.
func (c *Checkpointer) lastSegment(ctx context.Context, runID string) (st headState, nonce string, ok bool, err error) {
	for range 3 {
		var m *jsapi.Msg
		err = c.b.withRetry(ctx, "get", func(ctx context.Context, _ int) error {
			var err error
			m, err = jsapi.LeaderGet(ctx, c.b.js, "KV_"+c.b.name, jsapi.LastBySubject(c.b.subject(segFilter(runID))))
			return err
		})
		if err != nil || m == nil {
			return headState{}, "", false, err
		}
		var s segRecord
		_, err = c.b.decode(ctx, m.Data, &s)
		if errors.Is(err, errMissingChunk) {
			continue // deleted while we read it
		}
		if err != nil {
			return headState{}, "", true, err
		}
		n := segIndex(m.Subject)
		if n < 0 {
			return headState{}, "", true, fmt.Errorf("%w: segment subject %s", ErrCorrupt, m.Subject)
		}
		return headState{rev: m.Seq, entries: s.Base + len(s.Entries), batches: n + 1}, s.Write, true, nil
	}
	return headState{}, "", true, err
}

// appendSegment writes w as the run's next segment, one message, on
// condition that the last segment stored is still at w.Revision (none for
// 0). cur is the state w continues.
func (c *Checkpointer) appendSegment(ctx context.Context, runID string, w loop.CheckpointWrite, cur headState) (uint64, error) {
	const op = "checkpoint append"
	rec := segRecord{Head: w.Head, Base: cur.entries, Entries: w.Entries, Write: nuid.Next()}
	frame, chunks, err := c.b.encode(ctx, runID, &rec)
	if err != nil {
		return 0, wrapErr(op, runID, err)
	}
	rev, err := c.b.putIfLast(ctx, segKey(runID, cur.batches), frame, segFilter(runID), w.Revision)
	if err != nil {
		c.cache.drop(runID)
		if isCAS(err) {
			// A definite refusal: nothing references the chunks.
			c.b.purgeQuietly(ctx, chunks)
			if rebased, ok := c.ownLostWrite(ctx, runID, w, err); ok {
				return c.appendOnce(ctx, runID, rebased)
			}
			return 0, fmt.Errorf("store: %s %s: %w: %w", op, runID, loop.ErrFenced, err)
		}
		c.cache.putLost(runID, lostWrite{revision: w.Revision, base: w.Base, entries: len(w.Entries), nonce: rec.Write})
		return 0, wrapErr(op, runID, err)
	}
	c.cache.put(runID, headState{rev: rev, entries: cur.entries + len(w.Entries), batches: cur.batches + 1})
	c.cache.dropLost(runID)
	return rev, nil
}

// landedSegment is landed for the segment layout: whether the run's last
// segment is the one the lost append p wrote; if so w is rebased on it.
func (c *Checkpointer) landedSegment(ctx context.Context, runID string, p lostWrite, w loop.CheckpointWrite) (loop.CheckpointWrite, bool) {
	for try := 0; try < 5; try++ {
		st, nonce, ok, err := c.lastSegment(ctx, runID)
		if err != nil || !ok {
			return w, false
		}
		if st.rev == w.Revision {
			select {
			case <-ctx.Done():
				return w, false
			case <-time.After(20 * time.Millisecond):
			}
			continue
		}
		if nonce != p.nonce {
			return w, false // another writer's segment
		}
		c.cache.put(runID, st)
		w.Revision = st.rev
		w.Base += p.entries
		w.Entries = w.Entries[p.entries:]
		return w, true
	}
	return w, false
}

// putIfLast writes key if the last message matching filter (a subject
// filter on the bucket's keys) is at sequence last (none for 0): a
// compare-and-set over several keys. A retry that loses it to a key
// holding val took the earlier attempt's write for its own.
func (b *bucket) putIfLast(ctx context.Context, key string, val []byte, filter string, last uint64) (uint64, error) {
	var rev uint64
	err := b.withRetryBounded(ctx, "update", func(ctx context.Context, attempt int) error {
		// The conditions jetstream.WithExpectLastSequenceForSubject sets;
		// the ack is read by the connection's bus publisher, which returns
		// what js.PublishMsg returns for the same reply.
		msg := &nats.Msg{Subject: b.subject(key), Data: val, Header: nats.Header{
			jetstream.ExpectedLastSubjSeqSubjHeader: {b.subject(filter)},
			jetstream.ExpectedLastSubjSeqHeader:     {strconv.FormatUint(last, 10)},
		}}
		// A lost compare-and-set as a KV create or update says it.
		var err error
		rev, err = b.send(ctx, msg, last)
		if err != nil && attempt > 1 && isCAS(err) {
			if r, ok := b.sameValue(ctx, key, val); ok && r > last {
				rev, err = r, nil
			}
		}
		return err
	})
	return rev, err
}

// isWrongLast reports whether err is the stream's refusal of an expected
// last sequence (10071).
func isWrongLast(err error) bool {
	var ae *jetstream.APIError
	return errors.As(err, &ae) && ae.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence
}
