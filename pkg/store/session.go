package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/lovia-fleet/lovia/pkg/loop"
)

// Session is a [loop.Session] on a KV bucket: one key per segment,
// <session>.s.<run>, written with kv.Create so an append is one message and
// idempotent by run id (the first write wins, also between racing
// processes).
//
// Segments keep insertion order by revision: a segment's order is the KV
// revision of its first write, and a segment rewritten by Rewind or
// TrimToolResults carries that original order in its record. Segments reads
// every segment key of the session through one short-lived ordered consumer.
//
// Rewind deletes the segments after the cut from the last one backwards, so
// a crash part-way leaves a shorter prefix of the session, never a gap; the
// rewrite of the segment the cut lands in is a compare-and-set. Clear purges
// every key of the session, chunks included. It is safe for concurrent use.
type Session struct {
	b       *bucket
	retries int
}

var _ loop.Session = (*Session)(nil)

type segmentRecord struct {
	// Order is the revision of the segment's first write; 0 means "this
	// record is that first write: use its revision".
	Order   uint64         `msgpack:"order,omitempty"`
	RunID   string         `msgpack:"run_id"`
	Entries []loop.Entry   `msgpack:"entries"`
	Meta    map[string]any `msgpack:"meta,omitempty"`
}

type storedSegment struct {
	key    string
	rev    uint64
	order  uint64
	chunks string
	rec    segmentRecord
}

func segmentKey(session, run string) string { return session + ".s." + run }

// Segments returns the session's segments in insertion order (an empty
// slice for an unknown session).
func (s *Session) Segments(ctx context.Context, sessionID string) ([]loop.Segment, error) {
	const op = "session segments"
	if err := checkID(op, "session id", sessionID); err != nil {
		return nil, err
	}
	segs, err := s.list(ctx, op, sessionID)
	if err != nil {
		return nil, err
	}
	out := make([]loop.Segment, len(segs))
	for i := range segs {
		out[i] = loop.Segment{RunID: segs[i].rec.RunID, Entries: segs[i].rec.Entries, Meta: segs[i].rec.Meta}
	}
	return out, nil
}

// list reads and decodes every segment of the session, ordered.
func (s *Session) list(ctx context.Context, op, sessionID string) ([]storedSegment, error) {
	var err error
	for range 3 {
		var segs []storedSegment
		segs, err = s.listOnce(ctx, sessionID)
		if err == nil {
			return segs, nil
		}
		if !errors.Is(err, errMissingChunk) {
			break // a segment was rewritten while we read it: read again
		}
	}
	switch {
	case errors.Is(err, errMissingChunk):
		return nil, fmt.Errorf("store: %s %s: %w: %w", op, sessionID, ErrConflict, err)
	case errors.Is(err, ErrCorrupt):
		return nil, fmt.Errorf("store: %s %s: %w", op, sessionID, err)
	}
	return nil, wrapErr(op, sessionID, err)
}

func (s *Session) listOnce(ctx context.Context, sessionID string) ([]storedSegment, error) {
	entries, err := s.b.list(ctx, sessionID+".s.*")
	if err != nil {
		return nil, err
	}
	segs := make([]storedSegment, len(entries))
	for i, e := range entries {
		seg := &segs[i]
		seg.key, seg.rev = e.Key(), e.Revision()
		if seg.chunks, err = s.b.decode(ctx, e.Value(), &seg.rec); err != nil {
			return nil, err
		}
		seg.order = cmp.Or(seg.rec.Order, seg.rev)
	}
	slices.SortFunc(segs, func(a, b storedSegment) int { return cmp.Compare(a.order, b.order) })
	return segs, nil
}

// Append stores seg unless its run id is in the session already (a no-op
// that returns the id). An empty RunID is replaced by a generated,
// time-ordered one (a lowercase ULID).
func (s *Session) Append(ctx context.Context, sessionID string, seg loop.Segment) (string, error) {
	const op = "session append"
	if err := checkID(op, "session id", sessionID); err != nil {
		return "", err
	}
	runID := seg.RunID
	if runID == "" {
		runID = newToken()
	} else if err := checkID(op, "run id", runID); err != nil {
		return "", err
	}
	frame, chunks, err := s.b.encode(ctx, sessionID, &segmentRecord{RunID: runID, Entries: seg.Entries, Meta: seg.Meta})
	if err != nil {
		return "", wrapErr(op, sessionID, err)
	}
	if _, err := s.b.create(ctx, segmentKey(sessionID, runID), frame); err != nil {
		if isCAS(err) {
			s.b.purgeQuietly(ctx, chunks)
			return runID, nil // first write wins
		}
		return "", wrapErr(op, sessionID, err)
	}
	return runID, nil
}

// Clear removes every key of the session.
func (s *Session) Clear(ctx context.Context, sessionID string) error {
	const op = "session clear"
	if err := checkID(op, "session id", sessionID); err != nil {
		return err
	}
	return wrapErr(op, sessionID, s.b.purge(ctx, sessionID+".>"))
}

// Rewind keeps the first keepEntries flat entries (see [loop.Session]) and
// returns how many entries it removed. A concurrent rewrite of a segment it
// touches makes it read the session again and carry on, up to
// Config.CASRetries times.
func (s *Session) Rewind(ctx context.Context, sessionID string, keepEntries int) (int, error) {
	const op = "session rewind"
	if err := checkID(op, "session id", sessionID); err != nil {
		return 0, err
	}
	if keepEntries < 0 {
		return 0, fmt.Errorf("store: %s %s: %w: keepEntries is %d, want >= 0", op, sessionID, ErrInvalidArgument, keepEntries)
	}
	removed := 0
	for attempt := 0; ; attempt++ {
		segs, err := s.list(ctx, op, sessionID)
		if err != nil {
			return removed, err
		}
		n, err := s.rewindOnce(ctx, segs, keepEntries)
		removed += n
		if err == nil {
			return removed, nil
		}
		if !isCAS(err) {
			return removed, wrapErr(op, sessionID, err)
		}
		if attempt >= s.retries {
			return removed, fmt.Errorf("store: %s %s: %w: %w", op, sessionID, ErrConflict, err)
		}
	}
}

func (s *Session) rewindOnce(ctx context.Context, segs []storedSegment, keep int) (removed int, err error) {
	// Find the cut: segs[:cut] stay whole; with left > 0, segs[cut] keeps
	// its first left entries.
	left, cut := keep, len(segs)
	for i := range segs {
		if left == 0 {
			cut = i
			break
		}
		n := len(segs[i].rec.Entries)
		if left < n {
			cut = i
			break
		}
		left -= n
	}
	if cut == len(segs) {
		return 0, nil
	}
	last := cut
	if left > 0 {
		last = cut + 1
	}
	// Delete the later segments, newest first.
	for i := len(segs) - 1; i >= last; i-- {
		if err := s.dropSegment(ctx, &segs[i]); err != nil {
			return removed, err
		}
		removed += len(segs[i].rec.Entries)
	}
	if left == 0 {
		return removed, nil
	}
	seg := &segs[cut]
	kept := loop.DropDanglingToolCalls(seg.rec.Entries[:left:left])
	if len(kept) == 0 {
		if err := s.dropSegment(ctx, seg); err != nil {
			return removed, err
		}
		return removed + len(seg.rec.Entries), nil
	}
	dropped := len(seg.rec.Entries) - len(kept)
	rec := segmentRecord{Order: seg.order, RunID: seg.rec.RunID, Entries: kept} // the cut segment loses its meta
	if err := s.rewrite(ctx, seg, &rec); err != nil {
		return removed, err
	}
	return removed + dropped, nil
}

// dropSegment purges a segment if it is still at the revision we read,
// then its chunks.
func (s *Session) dropSegment(ctx context.Context, seg *storedSegment) error {
	if err := s.b.purgeKey(ctx, seg.key, seg.rev); err != nil {
		return err
	}
	s.b.purgeQuietly(ctx, seg.chunks)
	return nil
}

// rewrite replaces a segment's record if it is still at the revision we
// read, then purges the old chunks.
func (s *Session) rewrite(ctx context.Context, seg *storedSegment, rec *segmentRecord) error {
	sid, _, _ := strings.Cut(seg.key, ".") // ids hold no dots
	frame, chunks, err := s.b.encode(ctx, sid, rec)
	if err != nil {
		return err
	}
	rev, err := s.b.update(ctx, seg.key, frame, seg.rev)
	if err != nil {
		if isCAS(err) {
			s.b.purgeQuietly(ctx, chunks)
		}
		return err
	}
	s.b.purgeQuietly(ctx, seg.chunks)
	seg.rev, seg.chunks, seg.rec = rev, chunks, *rec
	return nil
}

// TrimToolResults shortens tool outputs longer than keepChars in all but the
// last keepRuns segments (see [loop.TrimToolOutput]) and returns how many it
// trimmed. Each changed segment is rewritten with a compare-and-set; one
// that changed under it is read again, up to Config.CASRetries times.
func (s *Session) TrimToolResults(ctx context.Context, sessionID string, keepChars, keepRuns int) (int, error) {
	const op = "session trim"
	if err := checkID(op, "session id", sessionID); err != nil {
		return 0, err
	}
	if keepChars < 0 || keepRuns < 0 {
		return 0, fmt.Errorf("store: %s %s: %w: keepChars %d and keepRuns %d must be >= 0", op, sessionID, ErrInvalidArgument, keepChars, keepRuns)
	}
	segs, err := s.list(ctx, op, sessionID)
	if err != nil {
		return 0, err
	}
	trimmed := 0
	for i := 0; i < len(segs)-keepRuns; i++ {
		seg := segs[i]
		for attempt := 0; ; attempt++ {
			entries, n := loop.TrimToolResultEntries(seg.rec.Entries, keepChars)
			if n == 0 {
				break
			}
			rec := seg.rec
			rec.Order, rec.Entries = seg.order, entries
			err := s.rewrite(ctx, &seg, &rec)
			if err == nil {
				trimmed += n
				break
			}
			if !isCAS(err) {
				return trimmed, wrapErr(op, sessionID, err)
			}
			if attempt >= s.retries {
				return trimmed, fmt.Errorf("store: %s %s: %w: %w", op, sessionID, ErrConflict, err)
			}
			fresh, gone, err := s.reread(ctx, seg)
			if err != nil {
				return trimmed, wrapErr(op, sessionID, err)
			}
			if gone {
				break
			}
			seg = fresh
		}
	}
	return trimmed, nil
}

// reread reads one segment again after a lost compare-and-set.
func (s *Session) reread(ctx context.Context, seg storedSegment) (storedSegment, bool, error) {
	for range 3 {
		e, err := s.b.get(ctx, seg.key)
		if isNotFound(err) {
			return seg, true, nil
		}
		if err != nil {
			return seg, false, err
		}
		fresh := storedSegment{key: seg.key, rev: e.Revision()}
		fresh.chunks, err = s.b.decode(ctx, e.Value(), &fresh.rec)
		if errors.Is(err, errMissingChunk) {
			continue
		}
		if err != nil {
			return seg, false, err
		}
		fresh.order = cmp.Or(fresh.rec.Order, fresh.rev)
		return fresh, false, nil
	}
	return seg, false, fmt.Errorf("%w: segment %s keeps changing", ErrConflict, seg.key)
}
