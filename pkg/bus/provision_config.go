package bus

import (
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// ProvisionConfig configures Provision. Zero fields take the documented
// defaults (see WithDefaults).
type ProvisionConfig struct {
	// Prefix names every stream and bucket (docs/protocol.md#conventions). Default
	// DefaultPrefix ("lovia").
	Prefix string
	// Replicas of every stream and bucket; use 3 on a cluster. Zero
	// creates missing ones with 1 replica and leaves the replica count of
	// existing ones alone, so that a process started without a count (a
	// gateway, a worker without --replicas) never shrinks an R3 fleet.
	Replicas int
	// Storage of every stream and bucket. Default file storage (the zero
	// value of jetstream.StorageType).
	Storage jetstream.StorageType
	// Runs configures the run request stream <P>_RUNS.
	Runs RunsStreamConfig
	// Events configures the event stream <P>_EVENTS.
	Events EventsStreamConfig
	// Sessions, Checkpoints, Mailbox and RunIndex configure the KV buckets.
	Sessions    BucketConfig
	Checkpoints BucketConfig
	Mailbox     BucketConfig
	RunIndex    BucketConfig
	// Workers configures the durable pull consumer workers claim runs
	// from.
	Workers WorkersConsumerConfig
	// SkipWorkers leaves the workers consumer alone (a worker creates its
	// own). Default false: Provision creates or updates it.
	SkipWorkers bool
	// Timeout bounds each JetStream API call whose context has no
	// deadline. Default 10s.
	Timeout time.Duration
	// Logger receives one line per created or updated asset. Default: a
	// logger that discards.
	Logger *slog.Logger
}

// RunsStreamConfig configures <P>_RUNS: a work queue on <p>.submit.*,
// deduplicated by Nats-Msg-Id, that rejects new requests when full
// (DiscardNew) rather than dropping queued ones.
type RunsStreamConfig struct {
	// Duplicates is the deduplication window. Default 10m.
	Duplicates time.Duration
	// MaxAge removes a request, even one being worked on, after this long;
	// it must exceed the longest run plus its retries. Default 24h.
	MaxAge time.Duration
	// MaxBytes caps the stream's size. Default -1 (unlimited).
	MaxBytes int64
	// MaxMsgSize caps one request. Default -1 (the server's max payload).
	MaxMsgSize int32
}

// EventsStreamConfig configures <P>_EVENTS: limits retention on
// <p>.events.*, DiscardOld, direct get, S2 compression.
type EventsStreamConfig struct {
	// MaxAge is how long events are kept. Default 72h.
	MaxAge time.Duration
	// MaxBytes caps the stream's size. Default -1 (unlimited).
	MaxBytes int64
	// MaxMsgsPerSubject caps one run's events; past it the oldest go.
	// Default 100000.
	MaxMsgsPerSubject int64
	// MaxMsgSize caps one event. Default -1 (the server's max payload).
	MaxMsgSize int32
	// Duplicates is the deduplication window of Nats-Msg-Id
	// (<run_id>.<seq>). Default 2m.
	Duplicates time.Duration
	// MaxConsumers caps consumers on the stream. Every tail is one
	// ephemeral consumer, and the server's default is 1000 per stream, so
	// it is set explicitly. Default 10000.
	MaxConsumers int
	// NoCompression stores events uncompressed. Default false (S2).
	NoCompression bool
}

// BucketConfig configures one KV bucket. Buckets are provisioned as the
// streams nats.go would create (KV_<bucket> on $KV.<bucket>.>) plus
// AllowAtomicPublish, which jetstream.KeyValueConfig cannot express, and
// an explicit MaxConsumers. Bind them with js.KeyValue; never call
// CreateOrUpdateKeyValue on them, which turns atomic publish off.
type BucketConfig struct {
	// History is how many revisions of a key are kept (1–64). Default 1.
	History uint8
	// MaxValueSize caps one value. Default -1 (the server's max payload).
	MaxValueSize int32
	// MaxBytes caps the bucket's size. Default -1 (unlimited).
	MaxBytes int64
	// TTL expires values this long after their last write. Default 0
	// (never).
	TTL time.Duration
	// LimitMarkerTTL turns on per-key TTLs and delete markers when
	// positive (required for KeyTTL and PurgeTTL). Default 0 (off), but
	// DefaultRunMarkerTTL for RunIndex: an ended run's record is written
	// with a per-message TTL (the retention age), and the marker its
	// expiry leaves tells the reapers to remove the run's other keys.
	LimitMarkerTTL time.Duration
	// MaxConsumers caps watchers on the bucket. Default 10000.
	MaxConsumers int
}

// WorkersConsumerConfig configures the durable pull consumer "workers" on
// <P>_RUNS (explicit acks, deliver all, filter <p>.submit.*).
type WorkersConsumerConfig struct {
	// AckWait is how long a claim lives without an ack or an ack-progress
	// heartbeat; failover takes about this long. It is fleet-wide: a value
	// changes the existing consumer's. Zero keeps the existing consumer's
	// and creates a new one with DefaultWorkersAckWait (30s).
	AckWait time.Duration
	// MaxDeliver caps deliveries of one request (crash redeliveries and
	// naks). Default 10.
	MaxDeliver int
	// MaxAckPending caps runs claimed at once across the whole fleet (every
	// worker's slots, plus headroom). Like AckWait it is fleet-wide: zero
	// keeps the existing consumer's and creates a new one with
	// DefaultWorkersAckPending.
	MaxAckPending int
	// MaxWaiting caps concurrent pull requests. Default 512.
	MaxWaiting int
}

// Defaults of ProvisionConfig.
const (
	DefaultProvisionTimeout  = 10 * time.Second
	DefaultRunsDuplicates    = 10 * time.Minute
	DefaultRunsMaxAge        = 24 * time.Hour
	DefaultEventsMaxAge      = 72 * time.Hour
	DefaultEventsPerSubject  = 100_000
	DefaultEventsDuplicates  = 2 * time.Minute
	DefaultMaxConsumers      = 10_000
	DefaultWorkersAckWait    = 30 * time.Second
	DefaultWorkersMaxDeliver = 10
	DefaultWorkersAckPending = 10000
	DefaultWorkersMaxWaiting = 512
	// DefaultRunMarkerTTL is how long the run index bucket keeps the
	// marker of an expired run record.
	DefaultRunMarkerTTL = 24 * time.Hour
)

// WithDefaults returns c with every zero field set to its default.
func (c ProvisionConfig) WithDefaults() ProvisionConfig {
	if c.Prefix == "" {
		c.Prefix = DefaultPrefix
	}
	c.Runs.Duplicates = orDuration(c.Runs.Duplicates, DefaultRunsDuplicates)
	c.Runs.MaxAge = orDuration(c.Runs.MaxAge, DefaultRunsMaxAge)
	c.Runs.MaxBytes = orInt(c.Runs.MaxBytes, -1)
	c.Runs.MaxMsgSize = orInt(c.Runs.MaxMsgSize, -1)
	c.Events.MaxAge = orDuration(c.Events.MaxAge, DefaultEventsMaxAge)
	c.Events.MaxBytes = orInt(c.Events.MaxBytes, -1)
	c.Events.MaxMsgsPerSubject = orInt(c.Events.MaxMsgsPerSubject, DefaultEventsPerSubject)
	c.Events.MaxMsgSize = orInt(c.Events.MaxMsgSize, -1)
	c.Events.Duplicates = orDuration(c.Events.Duplicates, DefaultEventsDuplicates)
	c.Events.MaxConsumers = orInt(c.Events.MaxConsumers, DefaultMaxConsumers)
	c.RunIndex.LimitMarkerTTL = orDuration(c.RunIndex.LimitMarkerTTL, DefaultRunMarkerTTL)
	for _, b := range []*BucketConfig{&c.Sessions, &c.Checkpoints, &c.Mailbox, &c.RunIndex} {
		*b = b.withDefaults()
	}
	c.Workers.MaxDeliver = orInt(c.Workers.MaxDeliver, DefaultWorkersMaxDeliver)
	c.Workers.MaxWaiting = orInt(c.Workers.MaxWaiting, DefaultWorkersMaxWaiting)
	c.Timeout = orDuration(c.Timeout, DefaultProvisionTimeout)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

func (b BucketConfig) withDefaults() BucketConfig {
	b.History = orInt(b.History, 1)
	b.MaxValueSize = orInt(b.MaxValueSize, -1)
	b.MaxBytes = orInt(b.MaxBytes, -1)
	b.MaxConsumers = orInt(b.MaxConsumers, DefaultMaxConsumers)
	return b
}

// validate names the first bad field of a config that WithDefaults
// returned.
func (c ProvisionConfig) validate() error {
	if err := ValidateID("prefix", c.Prefix); err != nil {
		return configError("Prefix", "%v", err)
	}
	if c.Replicas < 0 || c.Replicas > 5 {
		return configError("Replicas", "%d is not 1–5 (or 0: keep, 1 when creating)", c.Replicas)
	}
	if c.Storage != jetstream.FileStorage && c.Storage != jetstream.MemoryStorage {
		return configError("Storage", "%v is not file or memory", c.Storage)
	}
	checks := []struct {
		field, want string
		bad         bool
	}{
		{"Runs.Duplicates", "not negative", c.Runs.Duplicates < 0},
		{"Runs.MaxAge", "not negative", c.Runs.MaxAge < 0},
		{"Runs.Duplicates", "at most Runs.MaxAge", c.Runs.MaxAge > 0 && c.Runs.Duplicates > c.Runs.MaxAge},
		{"Runs.MaxBytes", "positive or -1", c.Runs.MaxBytes < -1},
		{"Runs.MaxMsgSize", "positive or -1", c.Runs.MaxMsgSize < -1},
		{"Events.MaxAge", "not negative", c.Events.MaxAge < 0},
		{"Events.Duplicates", "not negative", c.Events.Duplicates < 0},
		{"Events.Duplicates", "at most Events.MaxAge", c.Events.MaxAge > 0 && c.Events.Duplicates > c.Events.MaxAge},
		{"Events.MaxBytes", "positive or -1", c.Events.MaxBytes < -1},
		{"Events.MaxMsgsPerSubject", "positive or -1", c.Events.MaxMsgsPerSubject < -1},
		{"Events.MaxMsgSize", "positive or -1", c.Events.MaxMsgSize < -1},
		{"Events.MaxConsumers", "positive", c.Events.MaxConsumers < 1},
		{"Workers.AckWait", "at least 1s (or 0: keep the consumer's)", c.Workers.AckWait != 0 && c.Workers.AckWait < time.Second},
		{"Workers.MaxDeliver", "positive or -1", c.Workers.MaxDeliver < -1},
		{"Workers.MaxAckPending", "positive (or 0: keep the consumer's)", c.Workers.MaxAckPending < 0},
		{"Workers.MaxWaiting", "positive", c.Workers.MaxWaiting < 1},
		{"Timeout", "not negative", c.Timeout < 0},
	}
	for _, ch := range checks {
		if ch.bad {
			return configError(ch.field, "must be %s", ch.want)
		}
	}
	for _, b := range []struct {
		field string
		cfg   BucketConfig
	}{{"Sessions", c.Sessions}, {"Checkpoints", c.Checkpoints}, {"Mailbox", c.Mailbox}, {"RunIndex", c.RunIndex}} {
		switch {
		case b.cfg.History < 1 || b.cfg.History > jetstream.KeyValueMaxHistory:
			return configError(b.field+".History", "%d is not 1–%d", b.cfg.History, jetstream.KeyValueMaxHistory)
		case b.cfg.MaxValueSize < -1:
			return configError(b.field+".MaxValueSize", "%d is not positive or -1", b.cfg.MaxValueSize)
		case b.cfg.MaxBytes < -1:
			return configError(b.field+".MaxBytes", "%d is not positive or -1", b.cfg.MaxBytes)
		case b.cfg.TTL < 0:
			return configError(b.field+".TTL", "must not be negative")
		case b.cfg.LimitMarkerTTL < 0 || (b.cfg.LimitMarkerTTL > 0 && b.cfg.LimitMarkerTTL < time.Second):
			return configError(b.field+".LimitMarkerTTL", "must be 0 or at least 1s")
		case b.cfg.MaxConsumers < 1:
			return configError(b.field+".MaxConsumers", "must be positive")
		}
	}
	return nil
}

type number interface {
	~int | ~int32 | ~int64 | ~uint8
}

func orInt[T number](v, def T) T {
	if v == 0 {
		return def
	}
	return v
}

func orDuration(v, def time.Duration) time.Duration {
	if v == 0 {
		return def
	}
	return v
}
