package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nuid"

	"github.com/lovia-fleet/lovia/pkg/loop"
)

// Checkpointer is a [loop.Checkpointer] on a KV bucket. A run is one key per
// append, each a single message:
//
//	<run>.c.<n>   segRecord (msgpack): the head after append n (0 first), the entries it appended and their base, the write's nonce
//
// An append writes its segment on condition that the last segment stored
// for the run is still the one the writer last saw (JetStream's expected
// last sequence for the subject filter <run>.c.*; none for a writer that
// saw nothing), so its cost is one message whatever the transcript's
// length, an empty append included. The revision the loop sees is the
// stream sequence of the run's last segment.
//
// Runs stored by earlier releases (a head key <run>.head and batch keys
// <run>.b.<seq>.<nonce>, two messages an append) are read and continued in
// that layout (loadLegacy, appendLegacy).
//
// # Fencing
//
// A writer whose revision is stale loses the compare-and-set and gets an
// error matching [loop.ErrFenced]; it wrote nothing (a value too large for
// one message wrote chunks first, which are purged). A write whose outcome
// is unknown (a timeout, a cancelled context, a connection lost before the
// reply) is remembered, see below.
//
// # Unknown outcomes
//
// Every segment (and legacy head) carries the nonce of the append that
// wrote it. When a write's outcome is unknown, the checkpointer remembers
// the attempt. If the writer's next append on the same revision (the loop
// retries with what it last knew) loses the compare-and-set, the
// checkpointer reads the last segment: when it is the lost write's, the
// append continues from it, storing only the entries the lost write did
// not already store, instead of being fenced by its own write.
//
// # Cache
//
// To append without reading first, the checkpointer remembers, per run,
// the last state it wrote or loaded (revision, counts). The cache only
// saves a read: a write still goes through the compare-and-set, and a
// writer presenting a revision the cache does not hold makes the store
// read the run's last segment.
//
// Load reads every segment of the run through one short-lived ordered
// consumer (after asking the stream leader whether there is any). It is
// safe for concurrent use.
type Checkpointer struct {
	b     *bucket
	cache headCache
}

var _ loop.Checkpointer = (*Checkpointer)(nil)

type headRecord struct {
	Head    loop.RunHead `msgpack:"head"`
	Entries int          `msgpack:"entries"`
	Batches int          `msgpack:"batches"`
	Last    string       `msgpack:"last,omitempty"`
	// Write is the nonce of the append that wrote this head.
	Write string `msgpack:"w,omitempty"`
}

type batchRecord struct {
	Prev    string       `msgpack:"prev,omitempty"`
	Base    int          `msgpack:"base"`
	Entries []loop.Entry `msgpack:"entries"`
}

// headState is what an append needs to know about the stored head.
type headState struct {
	rev     uint64
	entries int
	batches int
	last    string
	chunks  string // filter of the head value's chunks, if chunked (legacy)
	legacy  bool   // the run is in the head-and-batches layout
}

func headKey(run string) string { return run + ".head" }

func batchKey(run string, seq int) string {
	return fmt.Sprintf("%s.b.%08d.%s", run, seq, nuid.Next())
}

// Load returns the stored run, or an error matching [loop.ErrNoSnapshot].
func (c *Checkpointer) Load(ctx context.Context, runID string) (*loop.Snapshot, error) {
	const op = "checkpoint load"
	if err := checkID(op, "run id", runID); err != nil {
		return nil, err
	}
	var err error
	for range 3 {
		var snap *loop.Snapshot
		snap, err = c.load(ctx, runID)
		if !errors.Is(err, errMissingChunk) {
			return snap, err
		}
		// The head moved on while we read the values it referenced.
	}
	return nil, fmt.Errorf("store: %s %s: %w: %w", op, runID, ErrConflict, err)
}

func (c *Checkpointer) load(ctx context.Context, runID string) (*loop.Snapshot, error) {
	if snap, ok, err := c.loadSegments(ctx, runID); ok || err != nil {
		return snap, err
	}
	return c.loadLegacy(ctx, runID)
}

// loadLegacy reads a run in the head-and-batches layout.
func (c *Checkpointer) loadLegacy(ctx context.Context, runID string) (*loop.Snapshot, error) {
	const op = "checkpoint load"
	e, err := c.b.get(ctx, headKey(runID))
	if isNotFound(err) {
		return nil, fmt.Errorf("store: %s %s: %w", op, runID, loop.ErrNoSnapshot)
	}
	if err != nil {
		return nil, wrapErr(op, runID, err)
	}
	var h headRecord
	chunks, err := c.b.decode(ctx, e.Value(), &h)
	if err != nil {
		return nil, wrapLoad(runID, err)
	}
	if h.Entries < 0 || h.Batches < 0 || h.Batches > h.Entries {
		return nil, fmt.Errorf("store: %s %s: %w: head counts %d entries in %d batches", op, runID, ErrCorrupt, h.Entries, h.Batches)
	}
	entries := make([]loop.Entry, 0, h.Entries)
	if h.Batches > 0 {
		batches, err := c.loadBatches(ctx, runID, &h)
		if err != nil {
			return nil, wrapLoad(runID, err)
		}
		for i := range batches {
			entries = append(entries, batches[i].Entries...)
		}
	}
	c.cache.put(runID, headState{rev: e.Revision(), entries: h.Entries, batches: h.Batches, last: h.Last, chunks: chunks, legacy: true})
	h.Head.UpdatedAt = utc(h.Head.UpdatedAt)
	return &loop.Snapshot{RunID: runID, Entries: entries, RunHead: h.Head, Revision: e.Revision()}, nil
}

func wrapLoad(runID string, err error) error {
	if errors.Is(err, errMissingChunk) {
		return err // retried by Load
	}
	if errors.Is(err, ErrCorrupt) {
		return fmt.Errorf("store: checkpoint load %s: %w", runID, err)
	}
	return wrapErr("checkpoint load", runID, err)
}

// loadBatches reads the batches the head chains to, oldest first.
func (c *Checkpointer) loadBatches(ctx context.Context, runID string, h *headRecord) ([]batchRecord, error) {
	listed, err := c.b.list(ctx, runID+".b.>")
	if err != nil {
		return nil, err
	}
	byKey := make(map[string][]byte, len(listed))
	for _, e := range listed {
		byKey[e.Key()] = e.Value()
	}
	batches := make([]batchRecord, h.Batches)
	key := h.Last
	for i := h.Batches - 1; i >= 0; i-- {
		if key == "" {
			return nil, fmt.Errorf("%w: the batch chain ends after %d of %d batches", ErrCorrupt, h.Batches-1-i, h.Batches)
		}
		frame, ok := byKey[key]
		if !ok {
			// Written before the head we read, so the listing should hold
			// it; a purge (Delete) in between is the likely cause.
			e, err := c.b.get(ctx, key)
			if isNotFound(err) {
				return nil, fmt.Errorf("%w: batch %s", errMissingChunk, key)
			}
			if err != nil {
				return nil, err
			}
			frame = e.Value()
		}
		if _, err := c.b.decode(ctx, frame, &batches[i]); err != nil {
			return nil, err
		}
		key = batches[i].Prev
	}
	if key != "" {
		return nil, fmt.Errorf("%w: the batch chain is longer than the head's %d batches", ErrCorrupt, h.Batches)
	}
	n := 0
	for i := range batches {
		if batches[i].Base != n {
			return nil, fmt.Errorf("%w: batch %d starts at entry %d, want %d", ErrCorrupt, i, batches[i].Base, n)
		}
		n += len(batches[i].Entries)
	}
	if n != h.Entries {
		return nil, fmt.Errorf("%w: the batches hold %d entries, the head counts %d", ErrCorrupt, n, h.Entries)
	}
	return batches, nil
}

// Append appends w.Entries and replaces the head, conditional on w.Revision
// (see [loop.Checkpointer] and the type's doc for fencing). It returns the
// head's new KV revision. A write that times out or finds JetStream briefly
// unavailable (a stream leader election) is tried again within
// Config.OutageBudget, which is safe because a retry finds out whether the
// lost write was stored; past the budget the error matches
// [loop.ErrUnavailable].
func (c *Checkpointer) Append(ctx context.Context, runID string, w loop.CheckpointWrite) (uint64, error) {
	return c.appendOnce(ctx, runID, w)
}

func (c *Checkpointer) appendOnce(ctx context.Context, runID string, w loop.CheckpointWrite) (uint64, error) {
	const op = "checkpoint append"
	if err := checkID(op, "run id", runID); err != nil {
		return 0, err
	}
	var cur headState
	if w.Revision != 0 {
		var ok bool
		if cur, ok = c.cache.get(runID); !ok || cur.rev != w.Revision {
			var err error
			if cur, err = c.readHead(ctx, runID, w.Revision); err != nil {
				if rebased, ok := c.ownLostWrite(ctx, runID, w, err); ok {
					return c.appendOnce(ctx, runID, rebased)
				}
				return 0, err
			}
		}
	}
	if w.Base != cur.entries {
		return 0, fmt.Errorf("store: %s %s: %w: %w: %d entries are stored, the writer's base is %d", op, runID, loop.ErrFenced, ErrBaseMismatch, cur.entries, w.Base)
	}
	if !cur.legacy {
		return c.appendSegment(ctx, runID, w, cur)
	}
	return c.appendLegacy(ctx, runID, w, cur)
}

// appendLegacy appends to a run in the head-and-batches layout: the batch,
// then the head.
func (c *Checkpointer) appendLegacy(ctx context.Context, runID string, w loop.CheckpointWrite, cur headState) (uint64, error) {
	const op = "checkpoint append"
	next := headRecord{Head: w.Head, Entries: cur.entries, Batches: cur.batches, Last: cur.last, Write: nuid.Next()}
	var orphans []string
	if len(w.Entries) > 0 {
		key := batchKey(runID, cur.batches)
		frame, chunks, err := c.b.encode(ctx, runID, &batchRecord{Prev: cur.last, Base: cur.entries, Entries: w.Entries})
		if err != nil {
			return 0, wrapErr(op, runID, err)
		}
		if _, err := c.b.put(ctx, key, frame); err != nil {
			c.b.purgeQuietly(ctx, chunks)
			return 0, wrapErr(op, runID, err)
		}
		orphans = append(orphans, key, chunks)
		next.Entries += len(w.Entries)
		next.Batches++
		next.Last = key
	}
	frame, chunks, err := c.b.encode(ctx, runID, &next)
	if err != nil {
		c.dropAll(ctx, orphans)
		return 0, wrapErr(op, runID, err)
	}
	orphans = append(orphans, chunks)

	var rev uint64
	if w.Revision == 0 {
		rev, err = c.b.create(ctx, headKey(runID), frame)
	} else {
		rev, err = c.b.update(ctx, headKey(runID), frame, w.Revision)
	}
	if err != nil {
		c.cache.drop(runID)
		if isCAS(err) {
			// A definite refusal: nothing references what we wrote.
			c.dropAll(ctx, orphans)
			if rebased, ok := c.ownLostWrite(ctx, runID, w, err); ok {
				return c.appendOnce(ctx, runID, rebased)
			}
			return 0, fmt.Errorf("store: %s %s: %w: %w", op, runID, loop.ErrFenced, err)
		}
		c.cache.putLost(runID, lostWrite{revision: w.Revision, base: w.Base, entries: len(w.Entries), nonce: next.Write, legacy: true})
		return 0, wrapErr(op, runID, err)
	}
	c.cache.put(runID, headState{rev: rev, entries: next.Entries, batches: next.Batches, last: next.Last, chunks: chunks, legacy: true})
	c.cache.dropLost(runID)
	// The previous head's chunks (rare: heads are small) are unreferenced now.
	c.b.purgeQuietly(ctx, cur.chunks)
	return rev, nil
}

// ownLostWrite reports whether the refusal err of w was caused by this
// checkpointer's own earlier write on the same revision, whose reply was
// lost; if so it returns w rebased on that write (see landed). It forgets
// the lost write either way.
func (c *Checkpointer) ownLostWrite(ctx context.Context, runID string, w loop.CheckpointWrite, err error) (loop.CheckpointWrite, bool) {
	p, ok := c.cache.getLost(runID)
	if !ok || p.revision != w.Revision || !errors.Is(err, loop.ErrFenced) && !isCAS(err) {
		return w, false
	}
	c.cache.dropLost(runID)
	return c.landed(ctx, runID, p, w)
}

// landed reports whether the stored head is the one the lost append p
// wrote, and if so returns w rebased on it: its revision, minus the
// entries p already stored (the writer sends them again, since it did not
// learn they were stored). A read that still shows the revision p was
// conditional on (a replica behind the leader) is tried again briefly.
func (c *Checkpointer) landed(ctx context.Context, runID string, p lostWrite, w loop.CheckpointWrite) (loop.CheckpointWrite, bool) {
	if w.Base != p.base || len(w.Entries) < p.entries {
		return w, false // another write than the lost one
	}
	if !p.legacy {
		return c.landedSegment(ctx, runID, p, w)
	}
	for try := 0; try < 5; try++ {
		e, err := c.b.get(ctx, headKey(runID))
		if err != nil {
			return w, false
		}
		if e.Revision() == w.Revision {
			select {
			case <-ctx.Done():
				return w, false
			case <-time.After(20 * time.Millisecond):
			}
			continue
		}
		var h headRecord
		chunks, err := c.b.decode(ctx, e.Value(), &h)
		if err != nil || h.Write != p.nonce {
			return w, false // another writer's head
		}
		c.cache.put(runID, headState{rev: e.Revision(), entries: h.Entries, batches: h.Batches, last: h.Last, chunks: chunks, legacy: true})
		w.Revision = e.Revision()
		w.Base += p.entries
		w.Entries = w.Entries[p.entries:]
		return w, true
	}
	return w, false
}

// readHead reads the stored head for a writer that presents revision want.
func (c *Checkpointer) readHead(ctx context.Context, runID string, want uint64) (headState, error) {
	const op = "checkpoint append"
	st, _, ok, err := c.lastSegment(ctx, runID)
	if err != nil {
		return headState{}, wrapLoad(runID, err)
	}
	if ok {
		if st.rev != want {
			return headState{}, fmt.Errorf("store: %s %s: %w: stored revision %d, the writer expected %d", op, runID, loop.ErrFenced, st.rev, want)
		}
		return st, nil
	}
	for range 3 {
		e, err := c.b.get(ctx, headKey(runID))
		if isNotFound(err) {
			return headState{}, fmt.Errorf("store: %s %s: %w: nothing is stored, the writer expected revision %d", op, runID, loop.ErrFenced, want)
		}
		if err != nil {
			return headState{}, wrapErr(op, runID, err)
		}
		if e.Revision() != want {
			return headState{}, fmt.Errorf("store: %s %s: %w: stored revision %d, the writer expected %d", op, runID, loop.ErrFenced, e.Revision(), want)
		}
		var h headRecord
		chunks, err := c.b.decode(ctx, e.Value(), &h)
		if errors.Is(err, errMissingChunk) {
			continue // replaced while we read it; the next read says by whom
		}
		if err != nil {
			return headState{}, wrapLoad(runID, err)
		}
		return headState{rev: e.Revision(), entries: h.Entries, batches: h.Batches, last: h.Last, chunks: chunks, legacy: true}, nil
	}
	return headState{}, fmt.Errorf("store: %s %s: %w: the head keeps changing", op, runID, loop.ErrFenced)
}

func (c *Checkpointer) dropAll(ctx context.Context, filters []string) {
	for _, f := range filters {
		c.b.purgeQuietly(ctx, f)
	}
}

// Delete removes every key of the run — head, batches, chunks and any
// orphans of fenced writers — with one subject purge. Deleting an unknown run
// is not an error. A writer still holding the run's revision is fenced
// afterwards: revisions are stream sequences and never come back.
func (c *Checkpointer) Delete(ctx context.Context, runID string) error {
	const op = "checkpoint delete"
	if err := checkID(op, "run id", runID); err != nil {
		return err
	}
	c.cache.drop(runID)
	if err := c.b.purge(ctx, runID+".>"); err != nil {
		return wrapErr(op, runID, err)
	}
	return nil
}

// headCache remembers the last head this process wrote or read per run,
// and the appends whose outcome it does not know. It is bounded; an
// evicted run costs one head read on its next append (or, for a lost
// write, fences its writer, as before the cache).
type headCache struct {
	mu   sync.Mutex
	m    map[string]headState
	lost map[string]lostWrite // by run
}

// lostWrite is an append whose head write's outcome is unknown.
type lostWrite struct {
	revision uint64 // the revision it was conditional on
	base     int    // its CheckpointWrite.Base
	entries  int    // how many entries it appended
	nonce    string // segRecord.Write (headRecord.Write) of what it wrote
	legacy   bool   // written in the head-and-batches layout
}

const headCacheSize = 4096

func (h *headCache) get(run string) (headState, bool)     { return cacheGet(&h.mu, &h.m, run) }
func (h *headCache) put(run string, s headState)          { cachePut(&h.mu, &h.m, run, s) }
func (h *headCache) drop(run string)                      { cacheDrop(&h.mu, &h.m, run) }
func (h *headCache) getLost(run string) (lostWrite, bool) { return cacheGet(&h.mu, &h.lost, run) }
func (h *headCache) putLost(run string, p lostWrite)      { cachePut(&h.mu, &h.lost, run, p) }
func (h *headCache) dropLost(run string)                  { cacheDrop(&h.mu, &h.lost, run) }

// The maps are passed by pointer and read under the lock: cachePut
// creates them.
func cacheGet[V any](mu *sync.Mutex, m *map[string]V, k string) (V, bool) {
	mu.Lock()
	defer mu.Unlock()
	v, ok := (*m)[k]
	return v, ok
}

// cachePut stores v under k, evicting an arbitrary key when the map is full.
func cachePut[V any](mu *sync.Mutex, m *map[string]V, k string, v V) {
	mu.Lock()
	defer mu.Unlock()
	if *m == nil {
		*m = make(map[string]V)
	}
	if _, ok := (*m)[k]; !ok && len(*m) >= headCacheSize {
		for old := range *m {
			delete(*m, old)
			break
		}
	}
	(*m)[k] = v
}

func cacheDrop[V any](mu *sync.Mutex, m *map[string]V, k string) {
	mu.Lock()
	defer mu.Unlock()
	delete(*m, k)
}
