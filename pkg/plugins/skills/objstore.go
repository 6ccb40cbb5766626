package skills

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// DefaultTimeout bounds each object store call whose context has no
// deadline.
const DefaultTimeout = 10 * time.Second

// ObjectStore is a JetStream object store bucket of skill files, each
// object named <folder>/<path>. A bucket that does not exist yet holds no
// skills. It is safe for concurrent use.
type ObjectStore struct {
	js     jetstream.JetStream
	bucket string

	mu  sync.Mutex
	obs jetstream.ObjectStore
}

// NewObjectStore returns the source for bucket (bus.Names.SkillsBucket).
func NewObjectStore(js jetstream.JetStream, bucket string) *ObjectStore {
	return &ObjectStore{js: js, bucket: bucket}
}

func withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, DefaultTimeout)
}

// store binds the bucket; nil without error when it does not exist.
func (o *ObjectStore) store(ctx context.Context) (jetstream.ObjectStore, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.obs != nil {
		return o.obs, nil
	}
	obs, err := o.js.ObjectStore(ctx, o.bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("skills object store %s: %w", o.bucket, err)
	}
	o.obs = obs
	return obs, nil
}

func (o *ObjectStore) names(ctx context.Context) ([]string, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	obs, err := o.store(ctx)
	if err != nil || obs == nil {
		return nil, err
	}
	infos, err := obs.List(ctx)
	if errors.Is(err, jetstream.ErrNoObjectsFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("skills object store %s: list: %w", o.bucket, err)
	}
	out := make([]string, 0, len(infos))
	for _, in := range infos {
		if !in.Deleted {
			out = append(out, in.Name)
		}
	}
	sort.Strings(out)
	return out, nil
}

// Folders implements Source.
func (o *ObjectStore) Folders(ctx context.Context) ([]string, error) {
	names, err := o.names(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, n := range names {
		if f, ok := strings.CutSuffix(n, "/"+SkillFile); ok && !strings.Contains(f, "/") {
			out = append(out, f)
		}
	}
	return out, nil
}

// Files implements Source.
func (o *ObjectStore) Files(ctx context.Context, folder string) ([]string, error) {
	names, err := o.names(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, n := range names {
		if rel, ok := strings.CutPrefix(n, folder+"/"); ok {
			out = append(out, rel)
		}
	}
	return out, nil
}

// ReadFile implements Source.
func (o *ObjectStore) ReadFile(ctx context.Context, folder, rel string, limit int) ([]byte, bool, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	obs, err := o.store(ctx)
	if err != nil {
		return nil, false, err
	}
	if obs == nil {
		return nil, false, fmt.Errorf("%w: %s/%s (the skills object store %s is empty: push skills with `lovia skills push DIR`)", ErrNotFound, folder, rel, o.bucket)
	}
	r, err := obs.Get(ctx, folder+"/"+rel)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return nil, false, fmt.Errorf("%w: %s/%s", ErrNotFound, folder, rel)
	}
	if err != nil {
		return nil, false, fmt.Errorf("skills object store %s: get %s/%s: %w", o.bucket, folder, rel, err)
	}
	defer r.Close()
	return readCapped(r, limit)
}

// PushReport says what Push changed.
type PushReport struct {
	// Skills are the skills pushed, by folder.
	Skills []Skill
	// Files counts the objects written; Removed the stale ones deleted.
	Files, Removed int
}

// Push uploads the skills of dir to the bucket, creating it with replicas
// copies when it does not exist. dir is either one skill folder (it holds a
// SKILL.md) or a folder of skill folders. Every SKILL.md is checked before
// anything is written, and that no two skills share a name (two pushed
// folders, or a pushed one and another folder of the bucket: the index
// would show one of them only); each pushed folder then replaces the bucket's copy
// (files no longer in it are deleted), and other skills are left alone.
func Push(ctx context.Context, js jetstream.JetStream, bucket, dir string, replicas int) (PushReport, error) {
	var rep PushReport
	root, folders, err := localFolders(dir)
	if err != nil {
		return rep, err
	}
	src := Dir(root)
	files := map[string][]string{}
	named := map[string]string{} // skill name → folder
	for _, f := range folders {
		data, _, err := src.ReadFile(ctx, f, SkillFile, maxSkillFile)
		if err != nil {
			return rep, fmt.Errorf("%s: %w", filepath.Join(root, f), err)
		}
		s, _, err := ParseSkill(data)
		if err != nil {
			return rep, fmt.Errorf("%s: %w", filepath.Join(root, f, SkillFile), err)
		}
		if prev, dup := named[s.Name]; dup {
			return rep, fmt.Errorf("%s: %w: name %q is also the name of %s; give every skill a name of its own", filepath.Join(root, f, SkillFile), ErrBadSkill, s.Name, filepath.Join(root, prev))
		}
		named[s.Name] = f
		s.Folder = f
		rep.Skills = append(rep.Skills, s)
		if files[f], err = src.Files(ctx, f); err != nil {
			return rep, err
		}
	}
	if replicas < 1 {
		replicas = 1
	}
	cctx, cancel := withTimeout(ctx)
	obs, err := js.ObjectStore(cctx, bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		obs, err = js.CreateObjectStore(cctx, jetstream.ObjectStoreConfig{Bucket: bucket, Description: "lovia skills", Replicas: replicas})
	}
	cancel()
	if err != nil {
		return rep, fmt.Errorf("skills object store %s: %w", bucket, err)
	}
	store := NewObjectStore(js, bucket)
	existing, err := store.names(ctx)
	if err != nil {
		return rep, err
	}
	// A skill of another folder in the bucket with a pushed name would
	// hide one of the two from the index.
	if have, _, err := List(ctx, store); err == nil {
		for _, h := range have {
			if f, ok := named[h.Name]; ok && f != h.Folder {
				return rep, fmt.Errorf("%s: %w: name %q is already the name of folder %s in %s; rename one of them (a folder pushed under that name replaces it)", filepath.Join(root, f, SkillFile), ErrBadSkill, h.Name, h.Folder, bucket)
			}
		}
	}
	for _, f := range folders {
		keep := map[string]bool{}
		for _, rel := range files[f] {
			name := f + "/" + rel
			keep[name] = true
			data, err := os.ReadFile(filepath.Join(root, f, filepath.FromSlash(rel)))
			if err != nil {
				return rep, err
			}
			pctx, cancel := withTimeout(ctx)
			_, err = obs.PutBytes(pctx, name, data)
			cancel()
			if err != nil {
				return rep, fmt.Errorf("skills object store %s: put %s: %w", bucket, name, err)
			}
			rep.Files++
		}
		for _, name := range existing {
			if strings.HasPrefix(name, f+"/") && !keep[name] {
				dctx, cancel := withTimeout(ctx)
				err := obs.Delete(dctx, name)
				cancel()
				if err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
					return rep, fmt.Errorf("skills object store %s: delete %s: %w", bucket, name, err)
				}
				rep.Removed++
			}
		}
	}
	return rep, nil
}

// localFolders resolves Push's dir into a root and its skill folders.
func localFolders(dir string) (string, []string, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return "", nil, fmt.Errorf("skills folder: %w", err)
	}
	if !st.IsDir() {
		return "", nil, fmt.Errorf("skills folder %s is a file: give the folder that holds SKILL.md, or a folder of such folders", dir)
	}
	if _, err := os.Stat(filepath.Join(dir, SkillFile)); err == nil {
		abs, err := filepath.Abs(dir)
		if err != nil {
			return "", nil, err
		}
		return filepath.Dir(abs), []string{filepath.Base(abs)}, nil
	}
	folders, err := Dir(dir).Folders(context.Background())
	if err != nil {
		return "", nil, err
	}
	if len(folders) == 0 {
		return "", nil, fmt.Errorf("no skills in %s: a skill is a folder with a SKILL.md (front matter name and description)", dir)
	}
	return dir, folders, nil
}
