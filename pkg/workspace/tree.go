package workspace

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
)

// Limits bound one tree. Zero fields take the defaults.
type Limits struct {
	// MaxFileBytes caps one file. Default DefaultMaxFileBytes.
	MaxFileBytes int64
	// QuotaBytes caps the sum of the tree's file sizes. Default
	// DefaultQuotaBytes.
	QuotaBytes int64
	// MaxFiles caps the tree's file count (its manifest is one KV value).
	// Default DefaultMaxFiles.
	MaxFiles int
}

// Defaults of Limits.
const (
	DefaultMaxFileBytes = 1 << 20
	DefaultQuotaBytes   = 64 << 20
	DefaultMaxFiles     = 1000
)

func (l Limits) withDefaults() Limits {
	if l.MaxFileBytes <= 0 {
		l.MaxFileBytes = DefaultMaxFileBytes
	}
	if l.QuotaBytes <= 0 {
		l.QuotaBytes = DefaultQuotaBytes
	}
	if l.MaxFiles <= 0 {
		l.MaxFiles = DefaultMaxFiles
	}
	return l
}

// maxAttempts bounds the compare-and-set retries of one change.
const maxAttempts = 32

// Tree is one workspace's file tree. Its methods are safe for concurrent
// use, from any number of processes: every change is a compare-and-set on
// the tree's manifest, retried on a newer revision, so no writer loses
// another's update.
type Tree struct {
	s     *Store
	scope Scope
	key   string
	lim   Limits
	now   func() time.Time
}

// Tree returns the tree of scope, bounded by lim. It does no I/O.
func (s *Store) Tree(scope Scope, lim Limits) (*Tree, error) {
	k, err := scope.key()
	if err != nil {
		return nil, err
	}
	return &Tree{s: s, scope: scope, key: k, lim: lim.withDefaults(), now: time.Now}, nil
}

// Scope returns the tree's scope.
func (t *Tree) Scope() Scope { return t.scope }

// Limits returns the tree's limits, defaults applied.
func (t *Tree) Limits() Limits { return t.lim }

// Option modifies one change.
type Option func(*changeOpts)

type changeOpts struct{ op string }

// Once makes a change idempotent by id: the manifest records the ids of
// the last [MaxOps] changes with what each did, and a change whose id is
// recorded returns the recorded entry instead of applying again. A tool
// passes its run's id and call id, so a call re-run after a crash (its
// change stored, its result not yet checkpointed) finds the tree as the
// first attempt left it and answers the same.
func Once(id string) Option { return func(o *changeOpts) { o.op = id } }

// change is what one operation does to a manifest.
type change struct {
	path string
	data []byte
	del  bool
}

// Write stores data as the file at p, replacing any previous content.
func (t *Tree) Write(ctx context.Context, p string, data []byte, opts ...Option) (Entry, error) {
	const op = "write"
	clean, err := Clean(op, p, false)
	if err != nil {
		return Entry{}, err
	}
	if int64(len(data)) > t.lim.MaxFileBytes {
		return Entry{}, t.tooLarge(op, clean, int64(len(data)))
	}
	return t.mutate(ctx, op, opts, func(context.Context, *manifest) (change, error) {
		return change{path: clean, data: data}, nil
	})
}

// Edit replaces the one occurrence of old in the file at p with new. It
// fails with ErrNoMatch when old is not in the file and with ErrAmbiguous
// when it is there more than once; the file is unchanged then.
func (t *Tree) Edit(ctx context.Context, p, old, new string, opts ...Option) (Entry, error) {
	const op = "edit"
	clean, err := Clean(op, p, false)
	if err != nil {
		return Entry{}, err
	}
	if old == "" {
		return Entry{}, refuse(op, clean, ErrNoMatch, "the text to replace is empty", "give the exact text to replace, copied from read_file, or use write_file for a new file")
	}
	return t.mutate(ctx, op, opts, func(ctx context.Context, m *manifest) (change, error) {
		e, ok := m.Files[clean]
		if !ok {
			return change{}, t.notFound(op, clean, m)
		}
		b, err := t.content(ctx, e)
		if err != nil {
			return change{}, err
		}
		s := string(b)
		switch n := strings.Count(s, old); {
		case n == 0:
			return change{}, refuse(op, clean, ErrNoMatch, fmt.Sprintf("the text to replace is not in %s", clean), "read the file again and copy the exact text, white space included")
		case n > 1:
			return change{}, refuse(op, clean, ErrAmbiguous, fmt.Sprintf("the text to replace is in %s %d times", clean, n), "include more of the surrounding lines so it matches once")
		}
		out := strings.Replace(s, old, new, 1)
		if int64(len(out)) > t.lim.MaxFileBytes {
			return change{}, t.tooLarge(op, clean, int64(len(out)))
		}
		return change{path: clean, data: []byte(out)}, nil
	})
}

// Delete removes the file at p.
func (t *Tree) Delete(ctx context.Context, p string, opts ...Option) error {
	const op = "delete"
	clean, err := Clean(op, p, false)
	if err != nil {
		return err
	}
	_, err = t.mutate(ctx, op, opts, func(_ context.Context, m *manifest) (change, error) {
		if _, ok := m.Files[clean]; !ok {
			return change{}, t.notFound(op, clean, m)
		}
		return change{path: clean, del: true}, nil
	})
	return err
}

// Read returns the content of the file at p and its entry.
func (t *Tree) Read(ctx context.Context, p string) ([]byte, Entry, error) {
	const op = "read"
	clean, err := Clean(op, p, false)
	if err != nil {
		return nil, Entry{}, err
	}
	ctx, cancel := t.s.withTimeout(ctx)
	defer cancel()
	kv, _, err := t.s.bind(ctx, false)
	if err != nil {
		return nil, Entry{}, err
	}
	for range 3 {
		m, _, err := t.load(ctx, kv)
		if err != nil {
			return nil, Entry{}, err
		}
		e, ok := m.Files[clean]
		if !ok {
			return nil, Entry{}, t.notFound(op, clean, m)
		}
		b, err := t.content(ctx, e)
		if errors.Is(err, jetstream.ErrObjectNotFound) {
			continue // replaced between the two reads: read the new version
		}
		return b, e, err
	}
	return nil, Entry{}, refuse(op, clean, ErrConflict, fmt.Sprintf("%s kept changing while it was read", clean), "try again")
}

// Files returns every file of the tree, sorted by path.
func (t *Tree) Files(ctx context.Context) ([]Entry, error) {
	ctx, cancel := t.s.withTimeout(ctx)
	defer cancel()
	kv, _, err := t.s.bind(ctx, false)
	if err != nil {
		return nil, err
	}
	m, _, err := t.load(ctx, kv)
	if err != nil {
		return nil, err
	}
	return m.sorted(), nil
}

// Usage returns the tree's size in bytes and its file count.
func (t *Tree) Usage(ctx context.Context) (bytes int64, files int, err error) {
	ctx, cancel := t.s.withTimeout(ctx)
	defer cancel()
	kv, _, err := t.s.bind(ctx, false)
	if err != nil {
		return 0, 0, err
	}
	m, _, err := t.load(ctx, kv)
	if err != nil {
		return 0, 0, err
	}
	return m.Bytes, len(m.Files), nil
}

// Remove deletes the whole tree: its files' objects and its manifest.
// Removing a tree that does not exist is not an error.
func (t *Tree) Remove(ctx context.Context) error {
	ctx, cancel := t.s.withTimeout(ctx)
	defer cancel()
	kv, obj, err := t.s.bind(ctx, false)
	if err != nil || kv == nil {
		return err
	}
	m, _, err := t.load(ctx, kv)
	if err != nil {
		return err
	}
	objects := make([]string, 0, len(m.Files)+len(m.Garbage))
	for _, e := range m.Files {
		objects = append(objects, e.Object)
	}
	for _, g := range m.Garbage {
		objects = append(objects, g.Object)
	}
	for _, name := range objects {
		if err := obj.Delete(ctx, name); err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
			return fmt.Errorf("workspace %s: remove object %s: %w", t.scope, name, err)
		}
	}
	if err := kv.Purge(ctx, t.key); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("workspace %s: remove manifest: %w", t.scope, err)
	}
	return nil
}

func (m *manifest) sorted() []Entry {
	out := make([]Entry, 0, len(m.Files))
	for _, e := range m.Files {
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// content reads an entry's object.
func (t *Tree) content(ctx context.Context, e Entry) ([]byte, error) {
	_, obj, err := t.s.bind(ctx, false)
	if err != nil {
		return nil, err
	}
	if obj == nil {
		return nil, fmt.Errorf("workspace %s: %s: %w", t.scope, e.Path, jetstream.ErrObjectNotFound)
	}
	b, err := obj.GetBytes(ctx, e.Object)
	if err != nil {
		return nil, fmt.Errorf("workspace %s: read %s: %w", t.scope, e.Path, err)
	}
	return b, nil
}

// mutate applies plan to the manifest with compare-and-set, retrying on a
// newer revision: the content goes to the object store first (once per
// distinct content), then the manifest names it; the version it replaced
// goes to the manifest's garbage, deleted by a change GarbageGrace later.
// A change that fails leaves no object behind.
func (t *Tree) mutate(ctx context.Context, op string, opts []Option, plan func(context.Context, *manifest) (change, error)) (Entry, error) {
	var o changeOpts
	for _, f := range opts {
		f(&o)
	}
	ctx, cancel := t.s.withTimeout(ctx)
	defer cancel()
	kv, obj, err := t.s.bind(ctx, true)
	if err != nil {
		return Entry{}, err
	}
	uploaded := map[string]string{} // digest -> object
	used := ""
	defer func() {
		for _, name := range uploaded {
			if name != used {
				t.dropObject(context.WithoutCancel(ctx), obj, name)
			}
		}
	}()
	for range maxAttempts {
		m, rev, err := t.load(ctx, kv)
		if err != nil {
			return Entry{}, err
		}
		if r, ok := m.op(o.op); ok {
			if r.Deleted {
				return Entry{}, nil
			}
			r.Entry.Path = r.Path
			return r.Entry, nil
		}
		ch, err := plan(ctx, m)
		if err != nil {
			return Entry{}, err
		}
		old, had := m.Files[ch.path]
		rec := opRecord{ID: o.op, Path: ch.path, Deleted: ch.del}
		var e Entry
		if ch.del {
			delete(m.Files, ch.path)
			m.Bytes -= old.Size
		} else {
			size := int64(len(ch.data))
			if total := m.Bytes - old.Size + size; total > t.lim.QuotaBytes {
				return Entry{}, refuse(op, ch.path, ErrQuota, fmt.Sprintf("writing %s (%d bytes) would take the workspace to %d bytes, past its quota of %d", ch.path, size, total, t.lim.QuotaBytes), "delete files the task no longer needs, or raise workspace.quota_bytes in the agent definition")
			}
			if !had && len(m.Files) >= t.lim.MaxFiles {
				return Entry{}, refuse(op, ch.path, ErrQuota, fmt.Sprintf("the workspace holds %d files, its limit", len(m.Files)), "delete files the task no longer needs, or raise workspace.max_files in the agent definition")
			}
			sum := sha256.Sum256(ch.data)
			digest := "sha256:" + hex.EncodeToString(sum[:])
			if had && old.Digest == digest {
				return old, nil // the same content: nothing to change
			}
			name, ok := uploaded[digest]
			if !ok {
				name = t.key + "/" + nuid.Next()
				if _, err := obj.PutBytes(ctx, name, ch.data); err != nil {
					return Entry{}, fmt.Errorf("workspace %s: %s %s: store content: %w", t.scope, op, ch.path, err)
				}
				uploaded[digest] = name
			}
			e = Entry{Path: ch.path, Object: name, Size: size, Digest: digest, Revision: old.Revision + 1, Modified: t.now().UTC()}
			m.Files[ch.path] = e
			m.Bytes += size - old.Size
			rec.Entry = e
		}
		m.addOp(rec)
		now := t.now().UTC()
		drop := m.collect(now)
		if had && old.Object != e.Object {
			m.Garbage = append(m.Garbage, garbage{Object: old.Object, Since: now})
		}
		conflict, err := t.store(ctx, kv, m, rev)
		if err != nil {
			return Entry{}, err
		}
		if conflict {
			continue
		}
		used = e.Object
		for _, name := range drop {
			t.dropObject(ctx, obj, name)
		}
		return e, nil
	}
	return Entry{}, refuse(op, "", ErrConflict, fmt.Sprintf("the workspace changed under %d attempts", maxAttempts), "try again")
}

// dropObject deletes an object no manifest names any more; a failure
// leaves it until the tree is removed or expires.
func (t *Tree) dropObject(ctx context.Context, obj jetstream.ObjectStore, name string) {
	if err := obj.Delete(ctx, name); err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
		t.s.cfg.Logger.Warn("workspace: deleting an unreferenced object failed; it stays until the tree is removed", "scope", t.scope.String(), "object", name, "error", err)
	}
}

func (t *Tree) tooLarge(op, p string, n int64) error {
	return refuse(op, p, ErrTooLarge, fmt.Sprintf("%s would be %d bytes, larger than the workspace's file limit of %d", p, n, t.lim.MaxFileBytes), "split it into smaller files, or raise workspace.max_file_bytes in the agent definition")
}

func (t *Tree) notFound(op, p string, m *manifest) error {
	hint := "list_dir shows the files; write_file creates one"
	if len(m.Files) == 0 {
		hint = "the workspace is empty; write_file creates a file"
	}
	return refuse(op, p, ErrNotFound, fmt.Sprintf("no file %s", p), hint)
}
