package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/lovia-fleet/lovia/pkg/bus"
)

// Store binds the four KV buckets of a fleet and hands out the stores that
// live on them. Open it once per process and share it: it is safe for
// concurrent use, and its Checkpointer caches heads for every run it
// writes.
type Store struct {
	cfg         Config
	checkpoints *Checkpointer
	sessions    *Session
	mailbox     *bucket
	runs        *Runs
}

// Open binds the buckets named in cfg, which must exist (see
// [EnsureBuckets]). It makes one lookup per bucket and starts no goroutines.
// On a cluster that is still forming (no meta leader, a bucket's stream
// without a leader) it retries transient failures until ctx ends, logging
// each attempt on Config.Logger.
func Open(ctx context.Context, js jetstream.JetStream, cfg Config) (*Store, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	jsp := bus.NewJetStreamPublisher(js.Conn()) // one reply subscription for the store's buckets
	chunk, err := chunkSize(js, cfg)
	if err != nil {
		return nil, err
	}
	bind := func(name string) (*bucket, error) {
		var (
			kv     jetstream.KeyValue
			stream jetstream.Stream
		)
		err := WaitFor(ctx, js, cfg.Logger, "open bucket "+name, func(ctx context.Context) error {
			cctx, cancel := callCtx(ctx, cfg.Timeout)
			defer cancel()
			var err error
			if kv, err = js.KeyValue(cctx, name); err != nil {
				return err
			}
			stream, err = js.Stream(cctx, "KV_"+name)
			return err
		})
		if err != nil {
			return nil, wrapErr("open bucket", name, err)
		}
		return &bucket{js: js, jsp: jsp, kv: kv, stream: stream, name: name, timeout: cfg.Timeout, budget: cfg.OutageBudget, chunk: chunk, max: cfg.MaxValueSize, log: cfg.Logger}, nil
	}
	s := &Store{cfg: cfg}
	b, err := bind(cfg.CheckpointBucket)
	if err != nil {
		return nil, err
	}
	s.checkpoints = &Checkpointer{b: b}
	if b, err = bind(cfg.SessionBucket); err != nil {
		return nil, err
	}
	s.sessions = &Session{b: b, retries: cfg.CASRetries}
	if s.mailbox, err = bind(cfg.MailboxBucket); err != nil {
		return nil, err
	}
	if b, err = bind(cfg.RunBucket); err != nil {
		return nil, err
	}
	s.runs = &Runs{b: b, retries: cfg.CASRetries, now: cfg.Clock, retention: cfg.retention()}
	return s, nil
}

// chunkSize is Config.ChunkSize, or what the server's max payload allows.
func chunkSize(js jetstream.JetStream, cfg Config) (int, error) {
	limit := int(js.Conn().MaxPayload()) - chunkHeadroom
	if limit < minChunkSize {
		return 0, fmt.Errorf("store: %w: the server's max payload %d leaves no room for values", ErrInvalidConfig, js.Conn().MaxPayload())
	}
	if cfg.ChunkSize == 0 {
		return limit, nil
	}
	if cfg.ChunkSize > limit {
		return 0, fmt.Errorf("store: %w: ChunkSize %d exceeds the server's max payload %d minus %d bytes of headroom", ErrInvalidConfig, cfg.ChunkSize, js.Conn().MaxPayload(), chunkHeadroom)
	}
	return cfg.ChunkSize, nil
}

func callCtx(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, d)
}

// Checkpointer returns the checkpoint store.
func (s *Store) Checkpointer() *Checkpointer { return s.checkpoints }

// Session returns the session store.
func (s *Store) Session() *Session { return s.sessions }

// Runs returns the run index.
func (s *Store) Runs() *Runs { return s.runs }

// Mailbox returns the mailbox of one run. It is a cheap handle; any number
// of them, in any number of processes, may share a run's queue.
func (s *Store) Mailbox(runID string) (*Mailbox, error) {
	if err := checkID("mailbox", "run id", runID); err != nil {
		return nil, err
	}
	return &Mailbox{b: s.mailbox, run: runID, runs: s.runs}, nil
}

// EnsureBuckets creates the buckets named in cfg that do not exist yet
// (waiting, as [Open] does, for a cluster that is still forming):
// file storage, history 1, cfg.Replicas replicas, and cfg.MailboxTTL on the
// mailbox. It leaves existing buckets alone (an operator may have tuned
// them), so it is idempotent and safe to run from every process at start-up
// and from tests.
func EnsureBuckets(ctx context.Context, js jetstream.JetStream, cfg Config) error {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return err
	}
	buckets := []jetstream.KeyValueConfig{
		{Bucket: cfg.CheckpointBucket, Description: "lovia: checkpoints of runs in flight"},
		{Bucket: cfg.SessionBucket, Description: "lovia: session segments"},
		{Bucket: cfg.MailboxBucket, Description: "lovia: steering messages", TTL: cfg.mailboxMaxAge()},
		{Bucket: cfg.RunBucket, Description: "lovia: run index", LimitMarkerTTL: DefaultExpiryMarkerTTL},
	}
	for _, kc := range buckets {
		kc.History = 1
		kc.Storage = jetstream.FileStorage
		kc.Replicas = cfg.Replicas
		if err := ensureBucket(ctx, js, kc, cfg.Timeout, cfg.Logger); err != nil {
			return err
		}
	}
	return nil
}

func ensureBucket(ctx context.Context, js jetstream.JetStream, kc jetstream.KeyValueConfig, timeout time.Duration, log *slog.Logger) error {
	err := WaitFor(ctx, js, log, "ensure bucket "+kc.Bucket, func(ctx context.Context) error {
		ctx, cancel := callCtx(ctx, timeout)
		defer cancel()
		_, err := js.KeyValue(ctx, kc.Bucket)
		if err == nil || !errors.Is(err, jetstream.ErrBucketNotFound) {
			return err
		}
		_, err = js.CreateKeyValue(ctx, kc)
		if errors.Is(err, jetstream.ErrBucketExists) { // lost a race: fine
			return nil
		}
		return err
	})
	if err != nil {
		return wrapErr("ensure bucket", kc.Bucket, err)
	}
	return nil
}
