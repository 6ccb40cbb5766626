package loop

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// MemorySession is an in-process [Session]. It is safe for concurrent use
// and copies segments on the way in and out; the zero value is not usable,
// call [NewMemorySession].
type MemorySession struct {
	mu       sync.Mutex
	sessions map[string][]Segment
}

var _ Session = (*MemorySession)(nil)

// NewMemorySession returns an empty in-memory session store.
func NewMemorySession() *MemorySession {
	return &MemorySession{sessions: make(map[string][]Segment)}
}

// Segments returns copies of the session's segments in insertion order, an
// empty slice for an unknown session.
func (s *MemorySession) Segments(ctx context.Context, sessionID string) ([]Segment, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("loop: session segments %s: %w", sessionID, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	segs := s.sessions[sessionID]
	out := make([]Segment, len(segs))
	for i := range segs {
		out[i] = memCloneSegment(segs[i])
	}
	return out, nil
}

// Append stores a copy of seg unless its run id is present already (first
// write wins). An empty RunID is replaced by a generated, time-ordered one.
// It returns the segment's run id.
func (s *MemorySession) Append(ctx context.Context, sessionID string, seg Segment) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("loop: session append %s: %w", sessionID, err)
	}
	if sessionID == "" {
		return "", errors.New("loop: session append: empty session id")
	}
	seg = memCloneSegment(seg)
	if seg.RunID == "" {
		seg.RunID = memNewRunID()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.sessions[sessionID] {
		if s.sessions[sessionID][i].RunID == seg.RunID {
			return seg.RunID, nil
		}
	}
	s.sessions[sessionID] = append(s.sessions[sessionID], seg)
	return seg.RunID, nil
}

// Clear removes every segment of the session.
func (s *MemorySession) Clear(ctx context.Context, sessionID string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("loop: session clear %s: %w", sessionID, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.sessions, sessionID)
	return nil
}

// Rewind keeps the first keepEntries flat entries (see [Session]) and
// returns how many entries it removed.
func (s *MemorySession) Rewind(ctx context.Context, sessionID string, keepEntries int) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("loop: session rewind %s: %w", sessionID, err)
	}
	if keepEntries < 0 {
		return 0, fmt.Errorf("loop: session rewind %s: keepEntries is %d, want >= 0", sessionID, keepEntries)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	segs := s.sessions[sessionID]
	total := 0
	for i := range segs {
		total += len(segs[i].Entries)
	}
	if keepEntries >= total {
		return 0, nil
	}
	var kept []Segment
	left := keepEntries
	for i := range segs {
		if left == 0 {
			break
		}
		n := len(segs[i].Entries)
		if left >= n {
			kept = append(kept, segs[i])
			left -= n
			continue
		}
		cut := DropDanglingToolCalls(segs[i].Entries[:left:left])
		if len(cut) > 0 {
			kept = append(kept, Segment{RunID: segs[i].RunID, Entries: memCloneEntries(cut)})
		}
		break
	}
	remaining := 0
	for i := range kept {
		remaining += len(kept[i].Entries)
	}
	if len(kept) == 0 {
		delete(s.sessions, sessionID)
	} else {
		s.sessions[sessionID] = kept
	}
	return total - remaining, nil
}

// TrimToolResults trims long tool outputs in all but the last keepRuns
// segments with [TrimToolOutput] and returns how many it trimmed.
func (s *MemorySession) TrimToolResults(ctx context.Context, sessionID string, keepChars, keepRuns int) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("loop: session trim %s: %w", sessionID, err)
	}
	if keepChars < 0 || keepRuns < 0 {
		return 0, fmt.Errorf("loop: session trim %s: keepChars %d and keepRuns %d must be >= 0", sessionID, keepChars, keepRuns)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	segs := s.sessions[sessionID]
	trimmed := 0
	for i := 0; i < len(segs)-keepRuns; i++ {
		entries, n := TrimToolResultEntries(segs[i].Entries, keepChars)
		if n > 0 {
			segs[i].Entries = entries
			trimmed += n
		}
	}
	return trimmed, nil
}

// TrimToolResultEntries applies [TrimToolOutput] to every tool result in
// entries. It returns the entries (a new slice when anything changed; the
// input is not modified) and the number of results it trimmed. A trimmed
// result keeps its kind, call id, name and error flag and loses Raw and
// Parts, which the marker stands for.
func TrimToolResultEntries(entries []Entry, keepChars int) ([]Entry, int) {
	var out []Entry
	n := 0
	for i := range entries {
		e := &entries[i]
		if e.Kind != KindToolResult {
			continue
		}
		short, ok := TrimToolOutput(e.Output, keepChars, e.CallID)
		if !ok {
			continue
		}
		if out == nil {
			out = make([]Entry, len(entries))
			copy(out, entries)
		}
		out[i] = Entry{Kind: KindToolResult, CallID: e.CallID, Name: e.Name, Output: short, IsError: e.IsError}
		n++
	}
	if out == nil {
		return entries, 0
	}
	return out, n
}

// TrimMarkerTail ends every output shortened by [TrimToolOutput]; an output
// that ends with it is recognized as trimmed already.
const TrimMarkerTail = " --lovia-trimmed]"

// TrimToolOutput shortens a stored tool output to its first keepChars
// characters (runes) followed by an honest marker on its own line:
//
//	[... 12,345 chars trimmed from stored history. Call recall_tool_result("c1") to retrieve the full output. --lovia-trimmed]
//
// The marker names the recall call for callID and ends with [TrimMarkerTail].
// It reports false and returns output unchanged when output is trimmed
// already (idempotent) or when the shortened form would not be smaller in
// bytes. A negative keepChars counts as 0.
func TrimToolOutput(output string, keepChars int, callID string) (string, bool) {
	if strings.HasSuffix(output, TrimMarkerTail) {
		return output, false
	}
	if keepChars < 0 {
		keepChars = 0
	}
	if len(output) <= keepChars { // fewer bytes than keepChars means fewer runes too
		return output, false
	}
	total := utf8.RuneCountInString(output)
	if total <= keepChars {
		return output, false
	}
	cut := 0
	for i := 0; i < keepChars; i++ {
		_, size := utf8.DecodeRuneInString(output[cut:])
		cut += size
	}
	var b strings.Builder
	b.Grow(cut + 160 + len(callID))
	b.WriteString(output[:cut])
	if cut > 0 {
		b.WriteByte('\n')
	}
	b.WriteString("[... ")
	b.WriteString(thousands(total - keepChars))
	b.WriteString(" chars trimmed from stored history. Call recall_tool_result(")
	b.WriteString(strconv.Quote(callID))
	b.WriteString(") to retrieve the full output.")
	b.WriteString(TrimMarkerTail)
	if b.Len() >= len(output) {
		return output, false
	}
	return b.String(), true
}

// memNewRunID returns a run id that sorts by creation time: 12 hex digits of
// Unix milliseconds followed by 20 random hex digits (32 characters of
// [0-9a-f], valid wherever docs/protocol.md accepts a run id).
func memNewRunID() string {
	var b [16]byte
	ms := uint64(time.Now().UnixMilli())
	for i := 5; i >= 0; i-- {
		b[i] = byte(ms)
		ms >>= 8
	}
	_, _ = rand.Read(b[6:])
	return hex.EncodeToString(b[:])
}

func memCloneSegment(s Segment) Segment {
	s.Entries = memCloneEntries(s.Entries)
	s.Meta = memCloneMap(s.Meta)
	return s
}
