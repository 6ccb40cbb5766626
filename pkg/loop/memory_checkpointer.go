package loop

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// MemoryCheckpointer is an in-process [Checkpointer]. It keeps every run in a
// map guarded by a mutex, copies entries and heads on the way in and out, and
// fences writers by revision exactly as the Checkpointer contract says.
// Revisions come from one counter per store, so a revision is never reused,
// not even after Delete. It is safe for concurrent use; the zero value is not
// usable, call [NewMemoryCheckpointer].
type MemoryCheckpointer struct {
	mu   sync.Mutex
	runs map[string]*memRun
	rev  uint64
}

type memRun struct {
	entries []Entry
	head    RunHead
	rev     uint64
}

var _ Checkpointer = (*MemoryCheckpointer)(nil)

// NewMemoryCheckpointer returns an empty in-memory checkpointer.
func NewMemoryCheckpointer() *MemoryCheckpointer {
	return &MemoryCheckpointer{runs: make(map[string]*memRun)}
}

// Load returns a copy of the stored run, or an error matching ErrNoSnapshot.
func (c *MemoryCheckpointer) Load(ctx context.Context, runID string) (*Snapshot, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("loop: checkpoint load %s: %w", runID, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.runs[runID]
	if r == nil {
		return nil, fmt.Errorf("loop: checkpoint load %s: %w", runID, ErrNoSnapshot)
	}
	entries := memCloneEntries(r.entries)
	if entries == nil {
		entries = []Entry{}
	}
	return &Snapshot{RunID: runID, Entries: entries, RunHead: memCloneHead(r.head), Revision: r.rev}, nil
}

// Append appends w.Entries after the stored ones and replaces the head, if
// w.Revision is the stored revision (0: the run must not exist) and w.Base is
// the stored entry count. Otherwise it writes nothing and returns an error
// matching ErrFenced.
func (c *MemoryCheckpointer) Append(ctx context.Context, runID string, w CheckpointWrite) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("loop: checkpoint append %s: %w", runID, err)
	}
	if runID == "" {
		return 0, errors.New("loop: checkpoint append: empty run id")
	}
	entries := memCloneEntries(w.Entries)
	head := memCloneHead(w.Head)

	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.runs[runID]
	var stored int
	switch {
	case r == nil && w.Revision != 0:
		return 0, fmt.Errorf("loop: checkpoint append %s: %w: nothing is stored, the writer expected revision %d", runID, ErrFenced, w.Revision)
	case r != nil && w.Revision == 0:
		return 0, fmt.Errorf("loop: checkpoint append %s: %w: the run exists at revision %d, the writer expected none", runID, ErrFenced, r.rev)
	case r != nil && r.rev != w.Revision:
		return 0, fmt.Errorf("loop: checkpoint append %s: %w: stored revision %d, the writer expected %d", runID, ErrFenced, r.rev, w.Revision)
	case r != nil:
		stored = len(r.entries)
	}
	if w.Base != stored {
		return 0, fmt.Errorf("loop: checkpoint append %s: %w: %d entries are stored, the writer's base is %d", runID, ErrFenced, stored, w.Base)
	}
	if r == nil {
		r = &memRun{}
		c.runs[runID] = r
	}
	c.rev++
	r.entries = append(r.entries, entries...)
	r.head = head
	r.rev = c.rev
	return r.rev, nil
}

// Delete removes a run; deleting an unknown run is not an error.
func (c *MemoryCheckpointer) Delete(ctx context.Context, runID string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("loop: checkpoint delete %s: %w", runID, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.runs, runID)
	return nil
}
