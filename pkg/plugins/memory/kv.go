package memory

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// DefaultTimeout bounds each KV call whose context has no deadline.
const DefaultTimeout = 10 * time.Second

// KV is a Store in a JetStream KV bucket, shared by every worker. Keys
// are <scope token>.<kind>.<id> ([ScopeToken]). The bucket is created,
// with Replicas copies, by the first write; before it, every scope is
// empty.
type KV struct {
	js       jetstream.JetStream
	bucket   string
	replicas int

	mu sync.Mutex
	kv jetstream.KeyValue
}

// NewKV returns the store for bucket (bus.Names.MemoryBucket); replicas
// below 1 mean 1.
func NewKV(js jetstream.JetStream, bucket string, replicas int) *KV {
	if replicas < 1 {
		replicas = 1
	}
	return &KV{js: js, bucket: bucket, replicas: replicas}
}

func withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, DefaultTimeout)
}

// bind returns the bucket, creating it when create is set; nil without
// error when it does not exist and create is not set.
func (s *KV) bind(ctx context.Context, create bool) (jetstream.KeyValue, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.kv != nil {
		return s.kv, nil
	}
	kv, err := s.js.KeyValue(ctx, s.bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		if !create {
			return nil, nil
		}
		kv, err = s.js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: s.bucket, Description: "lovia memory", Replicas: s.replicas})
		if errors.Is(err, jetstream.ErrBucketExists) {
			kv, err = s.js.KeyValue(ctx, s.bucket)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("memory bucket %s: %w", s.bucket, err)
	}
	s.kv = kv
	return kv, nil
}

func key(scope string, kind Kind, id string) string {
	return ScopeToken(scope) + "." + string(kind) + "." + id
}

// Put implements Store.
func (s *KV) Put(ctx context.Context, scope string, r Record) error {
	return s.write(ctx, scope, r, false)
}

// Create implements Store, with the KV's create (a write that expects no
// value).
func (s *KV) Create(ctx context.Context, scope string, r Record) error {
	return s.write(ctx, scope, r, true)
}

// write stores r: a put, or a create that fails with ErrExists when the
// record is there.
func (s *KV) write(ctx context.Context, scope string, r Record, create bool) error {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	kv, err := s.bind(ctx, true)
	if err != nil {
		return err
	}
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	k := key(scope, r.Kind, r.ID)
	if !create {
		if _, err := kv.Put(ctx, k, b); err != nil {
			return fmt.Errorf("memory bucket %s: put: %w", s.bucket, err)
		}
		return nil
	}
	if _, err := kv.Create(ctx, k, b); errors.Is(err, jetstream.ErrKeyExists) {
		return fmt.Errorf("%w: %s %s: %w", ErrExists, r.Kind, r.ID, err)
	} else if err != nil {
		return fmt.Errorf("memory bucket %s: create: %w", s.bucket, err)
	}
	return nil
}

// Delete implements Store.
func (s *KV) Delete(ctx context.Context, scope string, kind Kind, id string) error {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	kv, err := s.bind(ctx, false)
	if err != nil {
		return err
	}
	if kv == nil {
		return fmt.Errorf("%w: %s %s", ErrNotFound, kind, id)
	}
	k := key(scope, kind, id)
	if _, err := kv.Get(ctx, k); errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("%w: %s %s", ErrNotFound, kind, id)
	} else if err != nil {
		return fmt.Errorf("memory bucket %s: get: %w", s.bucket, err)
	}
	if err := kv.Delete(ctx, k); err != nil {
		return fmt.Errorf("memory bucket %s: delete: %w", s.bucket, err)
	}
	return nil
}

// List implements Store.
func (s *KV) List(ctx context.Context, scope string, kind Kind) ([]Record, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	kv, err := s.bind(ctx, false)
	if err != nil || kv == nil {
		return nil, err
	}
	filter := ScopeToken(scope) + ".>"
	if kind != "" {
		filter = ScopeToken(scope) + "." + string(kind) + ".>"
	}
	w, err := kv.Watch(ctx, filter, jetstream.IgnoreDeletes())
	if err != nil {
		return nil, fmt.Errorf("memory bucket %s: list: %w", s.bucket, err)
	}
	defer w.Stop()
	var out []Record
	for {
		select {
		case e, ok := <-w.Updates():
			if !ok {
				return nil, fmt.Errorf("memory bucket %s: list: watcher closed", s.bucket)
			}
			if e == nil {
				sortRecords(out)
				return out, nil
			}
			var r Record
			if err := json.Unmarshal(e.Value(), &r); err != nil {
				continue
			}
			if strings.HasPrefix(e.Key(), ScopeToken(scope)+".") {
				out = append(out, r)
			}
		case <-ctx.Done():
			return nil, fmt.Errorf("memory bucket %s: list: %w", s.bucket, ctx.Err())
		}
	}
}
