package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// DefaultResultBucket is the object store of offloaded tool results.
const DefaultResultBucket = "lovia_results"

// ResultStore keeps offloaded tool outputs in a JetStream object store,
// keyed by content digest, so recall_tool_result returns the full output on
// any worker. It implements compaction.ResultStore and is safe for
// concurrent use.
type ResultStore struct {
	obj     jetstream.ObjectStore
	name    string
	timeout time.Duration
}

// ResultStoreConfig configures a ResultStore.
type ResultStoreConfig struct {
	// Bucket is the object store (created when missing). Default
	// "lovia_results".
	Bucket string
	// MaxAge drops results older than this (0: keep forever).
	MaxAge time.Duration
	// Replicas of a new bucket. Default 1.
	Replicas int
	// Timeout bounds each call without a deadline. Default 10s.
	Timeout time.Duration
	// Logger receives the progress of a start-up that waits for the
	// cluster. Default: discard.
	Logger *slog.Logger
}

// OpenResultStore binds (creating if needed) the result object store.
func OpenResultStore(ctx context.Context, js jetstream.JetStream, cfg ResultStoreConfig) (*ResultStore, error) {
	if cfg.Bucket == "" {
		cfg.Bucket = DefaultResultBucket
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.Replicas == 0 {
		cfg.Replicas = 1
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	var obj jetstream.ObjectStore
	err := WaitFor(ctx, js, cfg.Logger, "open result store "+cfg.Bucket, func(ctx context.Context) error {
		cctx, cancel := callCtx(ctx, cfg.Timeout)
		defer cancel()
		var err error
		obj, err = js.ObjectStore(cctx, cfg.Bucket)
		if errors.Is(err, jetstream.ErrBucketNotFound) || errors.Is(err, jetstream.ErrStreamNotFound) {
			obj, err = js.CreateObjectStore(cctx, jetstream.ObjectStoreConfig{
				Bucket: cfg.Bucket, Description: "Lovia Fleet: offloaded tool results by content digest",
				TTL: cfg.MaxAge, Replicas: cfg.Replicas, Storage: jetstream.FileStorage, Compression: true,
			})
			if errors.Is(err, jetstream.ErrBucketExists) || errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
				obj, err = js.ObjectStore(cctx, cfg.Bucket)
			}
		}
		return err
	})
	if err != nil {
		return nil, wrapErr("open result store", cfg.Bucket, err)
	}
	return &ResultStore{obj: obj, name: cfg.Bucket, timeout: cfg.Timeout}, nil
}

// Put stores content under key (replacing the same content).
func (r *ResultStore) Put(ctx context.Context, key, content string) error {
	if key == "" {
		return fmt.Errorf("store: result put: %w: empty key", ErrInvalidArgument)
	}
	ctx, cancel := callCtx(ctx, r.timeout)
	defer cancel()
	if _, err := r.obj.PutString(ctx, key, content); err != nil {
		return wrapErr("result put", key, err)
	}
	return nil
}

// Get returns the content under key; ok is false when there is none.
func (r *ResultStore) Get(ctx context.Context, key string) (string, bool, error) {
	if key == "" {
		return "", false, nil
	}
	ctx, cancel := callCtx(ctx, r.timeout)
	defer cancel()
	s, err := r.obj.GetString(ctx, key)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return "", false, nil
	}
	if err != nil {
		return "", false, wrapErr("result get", key, err)
	}
	return s, true, nil
}
