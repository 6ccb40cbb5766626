package workspace

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// MaxOps is how many applied operation ids a manifest remembers (see
// [Once]): more than the calls one turn of a run makes at once.
const MaxOps = 64

// Entry is one file of a tree, as its manifest records it.
type Entry struct {
	// Path is the file's clean path from the tree's root.
	Path string `json:"-"`
	// Object is the name of the object holding the content in the files
	// bucket: <kind>.<id>/<unique>, one object per written version.
	Object string `json:"object"`
	// Size is the content's length in bytes.
	Size int64 `json:"size"`
	// Digest is "sha256:" and the content's SHA-256 in hex.
	Digest string `json:"digest"`
	// Revision counts the writes of this path: 1 for the first.
	Revision uint64 `json:"revision"`
	// Modified is when the version was written.
	Modified time.Time `json:"modified"`
}

// manifest is the value of a tree's key in the manifest bucket (JSON).
type manifest struct {
	Files map[string]Entry `json:"files"`
	// Bytes is the sum of the files' sizes.
	Bytes int64 `json:"bytes"`
	// Ops are the last MaxOps operation ids applied, oldest first, with
	// what each did: a repeated operation returns it instead of applying
	// again.
	Ops []opRecord `json:"ops,omitempty"`
	// Garbage are the objects of replaced or deleted versions, each
	// deleted by the first change at least GarbageGrace after it was
	// replaced: a reader that read the manifest before the change may
	// still be reading it.
	Garbage []garbage `json:"garbage,omitempty"`
}

// GarbageGrace is how long the object of a replaced version stays
// readable.
const GarbageGrace = 30 * time.Second

type garbage struct {
	Object string    `json:"object"`
	Since  time.Time `json:"since"`
}

// collect moves the garbage older than GarbageGrace out of m and
// returns it.
func (m *manifest) collect(now time.Time) []string {
	var out []string
	keep := m.Garbage[:0]
	for _, g := range m.Garbage {
		if now.Sub(g.Since) >= GarbageGrace {
			out = append(out, g.Object)
		} else {
			keep = append(keep, g)
		}
	}
	m.Garbage = keep
	return out
}

type opRecord struct {
	ID      string `json:"id"`
	Path    string `json:"path"`
	Deleted bool   `json:"deleted,omitempty"`
	Entry   Entry  `json:"entry"`
}

func (m *manifest) op(id string) (opRecord, bool) {
	if id == "" {
		return opRecord{}, false
	}
	for _, r := range m.Ops {
		if r.ID == id {
			return r, true
		}
	}
	return opRecord{}, false
}

func (m *manifest) addOp(r opRecord) {
	if r.ID == "" {
		return
	}
	m.Ops = append(m.Ops, r)
	if n := len(m.Ops) - MaxOps; n > 0 {
		m.Ops = append([]opRecord(nil), m.Ops[n:]...)
	}
}

// load reads the tree's manifest and its revision (0: none yet).
func (t *Tree) load(ctx context.Context, kv jetstream.KeyValue) (*manifest, uint64, error) {
	m := &manifest{Files: map[string]Entry{}}
	if kv == nil {
		return m, 0, nil
	}
	e, err := kv.Get(ctx, t.key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return m, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("workspace %s: read manifest: %w", t.scope, err)
	}
	if err := json.Unmarshal(e.Value(), m); err != nil {
		return nil, 0, fmt.Errorf("workspace %s: manifest at revision %d is not valid JSON: %w", t.scope, e.Revision(), err)
	}
	if m.Files == nil {
		m.Files = map[string]Entry{}
	}
	for p, f := range m.Files {
		f.Path = p
		m.Files[p] = f
	}
	return m, e.Revision(), nil
}

// store writes m if the manifest is still at rev; conflict reports that
// another writer changed it first.
func (t *Tree) store(ctx context.Context, kv jetstream.KeyValue, m *manifest, rev uint64) (conflict bool, err error) {
	b, err := json.Marshal(m)
	if err != nil {
		return false, err
	}
	if rev == 0 {
		_, err = kv.Create(ctx, t.key, b)
	} else {
		_, err = kv.Update(ctx, t.key, b, rev)
	}
	var ae *jetstream.APIError
	switch {
	case err == nil:
		return false, nil
	case errors.Is(err, jetstream.ErrKeyExists), errors.As(err, &ae) && ae.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence:
		return true, nil
	}
	return false, fmt.Errorf("workspace %s: write manifest: %w", t.scope, err)
}
