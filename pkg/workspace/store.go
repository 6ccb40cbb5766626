package workspace

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Default bucket names (the fleet's, for the default prefix; bus.Names
// WorkspaceBucket and WorkspaceFilesBucket give them for any prefix).
const (
	DefaultManifestBucket = "lovia_workspace"
	DefaultFilesBucket    = "lovia_workspace_files"
)

// DefaultTimeout bounds each JetStream call whose context has no deadline.
const DefaultTimeout = 10 * time.Second

// Config configures a [Store].
type Config struct {
	// JetStream reaches the buckets. Required.
	JetStream jetstream.JetStream
	// Manifests is the KV bucket of the trees' manifests. Default
	// DefaultManifestBucket.
	Manifests string
	// Files is the object store of the files' contents. Default
	// DefaultFilesBucket.
	Files string
	// Replicas of the buckets when the first write creates them; below 1:
	// 1.
	Replicas int
	// MaxAge removes a tree this long after its last change (its manifest
	// and its files' objects expire alike). Default 0: kept until removed
	// ([Tree.Remove]).
	MaxAge time.Duration
	// Timeout bounds each call whose context has no deadline. Default
	// DefaultTimeout.
	Timeout time.Duration
	// Logger receives the clean-up failures that leave an unreferenced
	// object behind. Default: discard.
	Logger *slog.Logger
}

// Store holds the trees of every workspace in two buckets, shared by every
// worker. New does no I/O: the buckets are bound at the first call, and
// created (with Config.Replicas copies) by the first write. It is safe for
// concurrent use.
type Store struct {
	cfg Config

	mu  sync.Mutex
	kv  jetstream.KeyValue
	obj jetstream.ObjectStore
}

// New validates cfg.
func New(cfg Config) (*Store, error) {
	if cfg.JetStream == nil {
		return nil, errors.New("workspace: Config.JetStream is required")
	}
	if cfg.Manifests == "" {
		cfg.Manifests = DefaultManifestBucket
	}
	if cfg.Files == "" {
		cfg.Files = DefaultFilesBucket
	}
	if cfg.Replicas < 1 {
		cfg.Replicas = 1
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.MaxAge < 0 {
		return nil, errors.New("workspace: Config.MaxAge must not be negative")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Store{cfg: cfg}, nil
}

// ScopeKind is what a tree belongs to.
type ScopeKind string

// The scopes of a tree.
const (
	// BySession: one tree per session, shared by its runs one after
	// another.
	BySession ScopeKind = "session"
	// ByRun: one tree per run.
	ByRun ScopeKind = "run"
)

// Scope names one tree: its kind and the session or run id.
type Scope struct {
	Kind ScopeKind
	ID   string
}

var scopeIDRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)

// key is the tree's manifest key: <kind>.<id>.
func (s Scope) key() (string, error) {
	if s.Kind != BySession && s.Kind != ByRun {
		return "", refuse("workspace", "", ErrInvalidScope, fmt.Sprintf("scope %q", s.Kind), "use session or run")
	}
	if !scopeIDRE.MatchString(s.ID) {
		return "", refuse("workspace", "", ErrInvalidScope, fmt.Sprintf("%s id %q is not 1-128 characters of [A-Za-z0-9_-]", s.Kind, s.ID), "")
	}
	return string(s.Kind) + "." + s.ID, nil
}

// String is the scope as kind:id.
func (s Scope) String() string { return string(s.Kind) + ":" + s.ID }

func (s *Store) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, s.cfg.Timeout)
}

// bind returns the buckets, creating them when create is set; nil without
// error when they do not exist and create is not set.
func (s *Store) bind(ctx context.Context, create bool) (jetstream.KeyValue, jetstream.ObjectStore, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.kv != nil && s.obj != nil {
		return s.kv, s.obj, nil
	}
	js := s.cfg.JetStream
	if s.kv == nil {
		kv, err := js.KeyValue(ctx, s.cfg.Manifests)
		if errors.Is(err, jetstream.ErrBucketNotFound) && create {
			kv, err = js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: s.cfg.Manifests, Description: "Lovia workspace manifests: <scope>.<id> -> the tree's files", Replicas: s.cfg.Replicas, TTL: s.cfg.MaxAge})
			if errors.Is(err, jetstream.ErrBucketExists) {
				kv, err = js.KeyValue(ctx, s.cfg.Manifests)
			}
		}
		if errors.Is(err, jetstream.ErrBucketNotFound) {
			return nil, nil, nil
		}
		if err != nil {
			return nil, nil, fmt.Errorf("workspace: manifest bucket %s: %w", s.cfg.Manifests, err)
		}
		s.kv = kv
	}
	obj, err := js.ObjectStore(ctx, s.cfg.Files)
	if (errors.Is(err, jetstream.ErrBucketNotFound) || errors.Is(err, jetstream.ErrStreamNotFound)) && create {
		obj, err = js.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: s.cfg.Files, Description: "Lovia workspace files: one object per written version", Replicas: s.cfg.Replicas, TTL: s.cfg.MaxAge, Compression: true})
		if errors.Is(err, jetstream.ErrBucketExists) || errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			obj, err = js.ObjectStore(ctx, s.cfg.Files)
		}
	}
	if errors.Is(err, jetstream.ErrBucketNotFound) || errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("workspace: files bucket %s: %w", s.cfg.Files, err)
	}
	s.obj = obj
	return s.kv, s.obj, nil
}
