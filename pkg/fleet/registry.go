package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/lovia-fleet/lovia/pkg/bus"
)

// Member is one live worker's announcement.
type Member struct {
	Worker string          `json:"worker"`
	Agents []bus.AgentInfo `json:"agents"`
	// Concurrency is the worker's slot count; InFlight the runs it
	// executes now (at the last refresh).
	Concurrency int `json:"concurrency,omitempty"`
	InFlight    int `json:"in_flight"`
	// Version is the worker binary's module version (and VCS revision).
	Version   string    `json:"version,omitempty"`
	StartedAt time.Time `json:"started_at"`
	// SeenAt is when the announcement was last refreshed.
	SeenAt time.Time `json:"seen_at"`
}

// Serves reports whether the member serves agent.
func (m Member) Serves(agent string) bool {
	for _, a := range m.Agents {
		if a.Name == agent {
			return true
		}
	}
	return false
}

// ServesVersion reports whether the member serves agent at version (its
// announcement's bus.AgentInfo.Version).
func (m Member) ServesVersion(agent, version string) bool {
	for _, a := range m.Agents {
		if a.Name == agent && a.Version == version {
			return true
		}
	}
	return false
}

// DefaultInterval is how often a worker refreshes its announcement.
const DefaultInterval = 2 * time.Second

// Registry is the fleet bucket. It is safe for concurrent use.
type Registry struct {
	kv  jetstream.KeyValue
	ttl time.Duration
	now func() time.Time
}

const memberPrefix = "w."

// Ensure binds the fleet bucket, creating it when it does not exist
// (history 1, file storage, replicas as given).
func Ensure(ctx context.Context, js jetstream.JetStream, names bus.Names, replicas int) (*Registry, error) {
	bucket := names.FleetBucket()
	kv, err := js.KeyValue(ctx, bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket: bucket, Description: "lovia: live workers and the agents they serve",
			History: 1, Storage: jetstream.FileStorage, Replicas: max(replicas, 1),
		})
		if errors.Is(err, jetstream.ErrBucketExists) {
			kv, err = js.KeyValue(ctx, bucket)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("fleet: bucket %s: %w", bucket, err)
	}
	return newRegistry(kv), nil
}

// Open binds the fleet bucket without creating it: for readers (a
// command that shows which workers serve what), which should neither need
// the permission to create it nor create it with settings of their own
// before the first worker does. A missing bucket is an error matching
// jetstream.ErrBucketNotFound.
func Open(ctx context.Context, js jetstream.JetStream, names bus.Names) (*Registry, error) {
	bucket := names.FleetBucket()
	kv, err := js.KeyValue(ctx, bucket)
	if err != nil {
		return nil, fmt.Errorf("fleet: bucket %s: %w", bucket, err)
	}
	return newRegistry(kv), nil
}

// newRegistry is the Registry on the bound bucket kv: a member is live
// for three announcement intervals after its last.
func newRegistry(kv jetstream.KeyValue) *Registry {
	return &Registry{kv: kv, ttl: 3 * DefaultInterval, now: time.Now}
}

// Announce stores (or refreshes) a worker's announcement, stamped now.
func (r *Registry) Announce(ctx context.Context, m Member) error {
	m.SeenAt = r.now().UTC()
	data, err := json.Marshal(m)
	if err != nil {
		return err
	}
	if _, err := r.kv.Put(ctx, memberPrefix+m.Worker, data); err != nil {
		return fmt.Errorf("fleet: announce %s: %w", m.Worker, err)
	}
	return nil
}

// Withdraw removes a worker's announcement.
func (r *Registry) Withdraw(ctx context.Context, worker string) error {
	if err := r.kv.Purge(ctx, memberPrefix+worker); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("fleet: withdraw %s: %w", worker, err)
	}
	return nil
}

// Members returns the live workers' announcements, by worker id.
// Announcements older than the registry's TTL are left out.
func (r *Registry) Members(ctx context.Context) ([]Member, error) {
	w, err := r.kv.Watch(ctx, memberPrefix+"*", jetstream.IgnoreDeletes())
	if err != nil {
		return nil, fmt.Errorf("fleet: list members: %w", err)
	}
	defer func() { _ = w.Stop() }()
	var out []Member
	now := r.now()
	for {
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("fleet: list members: %w", ctx.Err())
		case e, ok := <-w.Updates():
			if !ok {
				return nil, errors.New("fleet: list members: the watcher stopped")
			}
			if e == nil { // the initial values are all delivered
				sort.Slice(out, func(i, j int) bool { return out[i].Worker < out[j].Worker })
				return out, nil
			}
			var m Member
			if json.Unmarshal(e.Value(), &m) != nil || !strings.HasPrefix(e.Key(), memberPrefix) {
				continue
			}
			if now.Sub(m.SeenAt) > r.ttl {
				continue
			}
			out = append(out, m)
		}
	}
}
