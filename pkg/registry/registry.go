package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/catalog"
)

// History is how many revisions the bucket keeps per agent: a run pinned
// to an older revision resumes with it as long as it is kept.
const History = 64

// ErrNotFound is returned for an agent (or a revision) the registry does
// not hold.
var ErrNotFound = errors.New("registry: agent not found")

// Registry is the agents bucket. It is safe for concurrent use.
type Registry struct {
	kv     jetstream.KeyValue
	stream jetstream.Stream
}

// Ensure binds the agents bucket, creating it when it does not exist.
func Ensure(ctx context.Context, js jetstream.JetStream, names bus.Names, replicas int) (*Registry, error) {
	bucket := names.AgentsBucket()
	kv, err := js.KeyValue(ctx, bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket: bucket, Description: "lovia: the agents registry (one key per agent, its history the revisions)",
			History: History, Storage: jetstream.FileStorage, Replicas: max(replicas, 1),
		})
		if errors.Is(err, jetstream.ErrBucketExists) {
			kv, err = js.KeyValue(ctx, bucket)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("registry: bucket %s: %w", bucket, err)
	}
	stream, err := js.Stream(ctx, bus.KVStream(bucket))
	if err != nil {
		return nil, fmt.Errorf("registry: bucket %s: %w", bucket, err)
	}
	return &Registry{kv: kv, stream: stream}, nil
}

// Entry is one revision of an agent.
type Entry struct {
	Spec     catalog.Spec `json:"spec"`
	Revision uint64       `json:"revision"`
	Created  time.Time    `json:"created"`
	// Deleted marks the revision that removed the agent.
	Deleted bool `json:"deleted,omitempty"`
}

func decodeEntry(e jetstream.KeyValueEntry) (Entry, error) {
	out := Entry{Revision: e.Revision(), Created: e.Created().UTC(), Deleted: e.Operation() != jetstream.KeyValuePut}
	out.Spec.Name = e.Key()
	if out.Deleted {
		return out, nil
	}
	if err := json.Unmarshal(e.Value(), &out.Spec); err != nil {
		return out, fmt.Errorf("registry: agent %s revision %d: %w", e.Key(), e.Revision(), err)
	}
	return out, nil
}

// Validate checks a set of agent definitions as the agents file is
// checked (names, models, scripts, handoffs and as_tools among the set,
// approvals, the settings, retry, tool_defaults and compaction sections;
// an instructions_file must have been read into instructions),
// with the tools of opts. Agents of the registry may not declare MCP
// servers: those are the worker processes' (their agents file).
func Validate(specs []catalog.Spec, opts catalog.Options) error {
	for _, s := range specs {
		if len(s.MCPServers) > 0 {
			return fmt.Errorf("agent %q: mcp_servers cannot be declared in the registry; declare the servers in the workers' agents file (their tools can be named here)", s.Name)
		}
	}
	opts.MCPUnresolved = true
	_, err := catalog.Build(catalog.File{Agents: specs}, opts)
	return err
}

// ApplyReport says what an Apply changed.
type ApplyReport struct {
	Created   []string `json:"created"`
	Updated   []string `json:"updated"`
	Unchanged []string `json:"unchanged"`
	Deleted   []string `json:"deleted"`
	// Revision is the registry's revision after the apply.
	Revision uint64 `json:"revision"`
}

// Apply creates or updates every agent of specs (an agent whose stored
// definition is the same is left alone) and, with prune, removes the
// agents of the registry specs does not name. The whole set — specs plus
// the agents it keeps — is validated first (handoffs must name agents of
// the registry); nothing is written when it is invalid.
func (r *Registry) Apply(ctx context.Context, specs []catalog.Spec, prune bool, opts catalog.Options) (*ApplyReport, error) {
	current, err := r.List(ctx)
	if err != nil {
		return nil, err
	}
	next := map[string]catalog.Spec{}
	if !prune {
		for _, e := range current {
			next[e.Spec.Name] = e.Spec
		}
	}
	for _, s := range specs {
		next[s.Name] = s
	}
	all := make([]catalog.Spec, 0, len(next))
	for _, s := range next {
		all = append(all, s)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].Name < all[j].Name })
	if err := Validate(all, opts); err != nil {
		return nil, err
	}
	have := map[string]Entry{}
	for _, e := range current {
		have[e.Spec.Name] = e
	}
	rep := &ApplyReport{}
	for _, s := range specs {
		old, ok := have[s.Name]
		switch {
		case ok && reflect.DeepEqual(normal(old.Spec), normal(s)):
			rep.Unchanged = append(rep.Unchanged, s.Name)
			continue
		case ok:
			rep.Updated = append(rep.Updated, s.Name)
		default:
			rep.Created = append(rep.Created, s.Name)
		}
		data, err := json.Marshal(s)
		if err != nil {
			return rep, err
		}
		if _, err := r.kv.Put(ctx, s.Name, data); err != nil {
			return rep, fmt.Errorf("registry: put agent %s: %w", s.Name, err)
		}
	}
	if prune {
		for name := range have {
			if _, keep := next[name]; !keep {
				if err := r.Remove(ctx, name); err != nil {
					return rep, err
				}
				rep.Deleted = append(rep.Deleted, name)
			}
		}
	}
	sort.Strings(rep.Deleted)
	rep.Revision, err = r.Revision(ctx)
	return rep, err
}

// normal is a spec as it reads back from JSON, for comparisons.
func normal(s catalog.Spec) catalog.Spec {
	data, _ := json.Marshal(s)
	var out catalog.Spec
	_ = json.Unmarshal(data, &out)
	return out
}

// Remove deletes an agent (its history stays until it is replaced).
func (r *Registry) Remove(ctx context.Context, name string) error {
	if _, err := r.Get(ctx, name); err != nil {
		return err
	}
	if err := r.kv.Delete(ctx, name); err != nil {
		return fmt.Errorf("registry: remove agent %s: %w", name, err)
	}
	return nil
}

// Removed reports whether the registry removed agent name: it has no
// current definition, and its latest revision is a removal (rm, or apply
// --prune). An agent the registry never held is not removed.
func (r *Registry) Removed(ctx context.Context, name string) (bool, error) {
	_, err := r.Get(ctx, name)
	if err == nil || !errors.Is(err, ErrNotFound) {
		return false, err
	}
	h, err := r.History(ctx, name)
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return len(h) > 0 && h[len(h)-1].Deleted, nil
}

// Get returns an agent's current definition.
func (r *Registry) Get(ctx context.Context, name string) (*Entry, error) {
	e, err := r.kv.Get(ctx, name)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, fmt.Errorf("%w: %q", ErrNotFound, name)
	}
	if err != nil {
		return nil, fmt.Errorf("registry: get agent %s: %w", name, err)
	}
	out, err := decodeEntry(e)
	return &out, err
}

// GetRevision returns the definition an agent had at registry revision
// rev: the agent's own revision rev, or its latest one before rev when rev
// is a change of another agent (a run's registry_revision is the whole
// registry's). It fails with ErrNotFound when the agent had no definition
// then (not yet applied, or removed), or rev is past the registry's
// current revision or the agent's kept history.
func (r *Registry) GetRevision(ctx context.Context, name string, rev uint64) (*Entry, error) {
	e, err := r.kv.GetRevision(ctx, name, rev)
	if err == nil {
		out, err := decodeEntry(e)
		return &out, err
	}
	if !errors.Is(err, jetstream.ErrKeyNotFound) && !errors.Is(err, jetstream.ErrKeyDeleted) {
		return nil, fmt.Errorf("registry: get agent %s revision %d: %w", name, rev, err)
	}
	if cur, err := r.Revision(ctx); err != nil {
		return nil, err
	} else if rev > cur {
		return nil, fmt.Errorf("%w: %q at revision %d: the registry is at revision %d", ErrNotFound, name, rev, cur)
	}
	h, err := r.History(ctx, name)
	if errors.Is(err, ErrNotFound) {
		return nil, fmt.Errorf("%w: %q at revision %d (it has no revision kept)", ErrNotFound, name, rev)
	}
	if err != nil {
		return nil, err
	}
	i := sort.Search(len(h), func(i int) bool { return h[i].Revision > rev }) - 1
	switch {
	case i < 0 && len(h) == History:
		return nil, fmt.Errorf("%w: %q at revision %d: past the %d revisions kept of it (lovia agents history %s lists them)", ErrNotFound, name, rev, History, name)
	case i < 0:
		return nil, fmt.Errorf("%w: %q at revision %d: it was first applied at revision %d", ErrNotFound, name, rev, h[0].Revision)
	case h[i].Deleted:
		return nil, fmt.Errorf("%w: %q at revision %d: it was removed at revision %d", ErrNotFound, name, rev, h[i].Revision)
	}
	return &h[i], nil
}

// History returns an agent's revisions, oldest first.
func (r *Registry) History(ctx context.Context, name string) ([]Entry, error) {
	es, err := r.kv.History(ctx, name)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, fmt.Errorf("%w: %q", ErrNotFound, name)
	}
	if err != nil {
		return nil, fmt.Errorf("registry: history of agent %s: %w", name, err)
	}
	out := make([]Entry, 0, len(es))
	for _, e := range es {
		d, err := decodeEntry(e)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

// List returns every agent's current definition, by name.
func (r *Registry) List(ctx context.Context) ([]Entry, error) {
	return r.At(ctx, 0)
}

// At returns the registry as it was at revision rev (0: now): for each
// agent, its latest revision at or before rev, unless that one removed it.
func (r *Registry) At(ctx context.Context, rev uint64) ([]Entry, error) {
	opts := []jetstream.WatchOpt{jetstream.IgnoreDeletes()}
	if rev != 0 {
		opts = []jetstream.WatchOpt{jetstream.IncludeHistory()}
	}
	w, err := r.kv.WatchAll(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("registry: list agents: %w", err)
	}
	defer func() { _ = w.Stop() }()
	latest := map[string]Entry{}
	for {
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("registry: list agents: %w", ctx.Err())
		case e, ok := <-w.Updates():
			if !ok {
				return nil, errors.New("registry: list agents: the watcher stopped")
			}
			if e == nil {
				out := make([]Entry, 0, len(latest))
				for _, d := range latest {
					if !d.Deleted {
						out = append(out, d)
					}
				}
				sort.Slice(out, func(i, j int) bool { return out[i].Spec.Name < out[j].Spec.Name })
				return out, nil
			}
			if rev != 0 && e.Revision() > rev {
				continue
			}
			d, err := decodeEntry(e)
			if err != nil {
				return nil, err
			}
			latest[e.Key()] = d
		}
	}
}

// Revision is the registry's current revision: the sequence of its last
// change (0 for an empty registry).
func (r *Registry) Revision(ctx context.Context) (uint64, error) {
	info, err := r.stream.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("registry: revision: %w", err)
	}
	return info.State.LastSeq, nil
}

// Watch sends the registry's revision after every change (and once at
// the start) until ctx ends.
func (r *Registry) Watch(ctx context.Context) (<-chan uint64, error) {
	w, err := r.kv.WatchAll(ctx)
	if err != nil {
		return nil, fmt.Errorf("registry: watch: %w", err)
	}
	out := make(chan uint64, 1)
	go func() {
		defer close(out)
		defer func() { _ = w.Stop() }()
		var last uint64
		initial := true
		for {
			select {
			case <-ctx.Done():
				return
			case e, ok := <-w.Updates():
				if !ok {
					return
				}
				if e != nil {
					last = max(last, e.Revision())
					if initial {
						continue
					}
				}
				initial = false
				select {
				case out <- last:
				default:
					// The receiver has a change pending already; it reads
					// the registry anew.
					select {
					case <-out:
					default:
					}
					out <- last
				}
			}
		}
	}()
	return out, nil
}
