package store

import (
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"time"
)

// Default bucket names. The canonical names live with the other subjects
// and buckets of the fleet in pkg/bus; these defaults match docs/protocol.md with
// the default prefix.
const (
	DefaultCheckpointBucket = "lovia_checkpoints"
	DefaultSessionBucket    = "lovia_sessions"
	DefaultMailboxBucket    = "lovia_mailbox"
	DefaultRunBucket        = "lovia_runs"
)

// Other defaults.
const (
	DefaultTimeout      = 5 * time.Second
	DefaultMaxValueSize = 64 << 20
	DefaultMailboxTTL   = 7 * 24 * time.Hour
	DefaultCASRetries   = 10
	DefaultOutageBudget = 2 * time.Minute
	// DefaultRetention is how long an ended run's record, checkpoint,
	// mailbox and control keys are kept after its last change.
	DefaultRetention = 7 * 24 * time.Hour

	// chunkHeadroom is what a chunk leaves of the server's max payload for
	// the subject and headers of its KV put.
	chunkHeadroom = 4 << 10
	minChunkSize  = 1 << 10
)

// Config configures the JetStream stores. The zero value is usable: every
// field has a default, applied by [Config.WithDefaults].
type Config struct {
	// CheckpointBucket is the KV bucket of checkpoints. Default
	// "lovia_checkpoints".
	CheckpointBucket string
	// SessionBucket is the KV bucket of session segments. Default
	// "lovia_sessions".
	SessionBucket string
	// MailboxBucket is the KV bucket of steering messages. Default
	// "lovia_mailbox".
	MailboxBucket string
	// RunBucket is the KV bucket of the run index. Default "lovia_runs".
	RunBucket string

	// Timeout bounds every network call whose context has no deadline.
	// Default 5s.
	Timeout time.Duration
	// ChunkSize is the largest value written as one KV message; larger
	// values are split into chunk keys transparently. Default 0: the
	// server's max payload (learned on connect) minus 4 KiB for subject and
	// headers. It must not exceed that.
	ChunkSize int
	// MaxValueSize caps one encoded value (a checkpoint batch, head, session
	// segment, mailbox message or run record), chunks included. Larger
	// writes fail with ErrTooLarge. Default 64 MiB.
	MaxValueSize int
	// CASRetries bounds the read-modify-write retries of Runs.Modify,
	// Session.Rewind and Session.TrimToolResults when they lose a
	// compare-and-set. Default 10.
	CASRetries int

	// OutageBudget bounds how long one store call retries transient
	// failures (timeouts, no responders, a stream leader election, a
	// cluster not ready), with jittered exponential backoff, before it
	// returns an error matching [ErrUnavailable] or [ErrTimeout] (and so
	// [loop.ErrUnavailable]: the run is interrupted and released, not
	// failed). Cancelling the call's context stops the retries at once.
	// Default 2m; negative means no retries.
	OutageBudget time.Duration

	// Replicas is the replica count EnsureBuckets gives new buckets.
	// Default 1; use 3 in a cluster.
	Replicas int
	// MailboxTTL is the age after which EnsureBuckets' mailbox bucket drops a
	// message nobody drained. Default 7 days; negative means never.
	MailboxTTL time.Duration

	// Retention is how long a run that has ended (completed or failed) is
	// kept after its record's last change: its record is written with a
	// per-message TTL (Nats-TTL) of this age, and once it expired the
	// [Reaper] removes the run's checkpoint, mailbox and control keys. A
	// queued, running or parked run is never expired, and a resubmission
	// makes a run live again. After it, the run id is unknown: a new
	// submission with it starts a new run. Default 7 days; negative means
	// for ever; at least 1s otherwise.
	Retention time.Duration

	// Logger receives best-effort cleanup failures (orphaned chunks or
	// batches that will be removed later). Default: discard.
	Logger *slog.Logger
	// Clock stamps run records. Default time.Now.
	Clock func() time.Time
}

// WithDefaults returns a copy of c with every unset field at its default.
func (c Config) WithDefaults() Config {
	if c.CheckpointBucket == "" {
		c.CheckpointBucket = DefaultCheckpointBucket
	}
	if c.SessionBucket == "" {
		c.SessionBucket = DefaultSessionBucket
	}
	if c.MailboxBucket == "" {
		c.MailboxBucket = DefaultMailboxBucket
	}
	if c.RunBucket == "" {
		c.RunBucket = DefaultRunBucket
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.MaxValueSize == 0 {
		c.MaxValueSize = DefaultMaxValueSize
	}
	if c.CASRetries == 0 {
		c.CASRetries = DefaultCASRetries
	}
	if c.OutageBudget == 0 {
		c.OutageBudget = DefaultOutageBudget
	}
	if c.Replicas == 0 {
		c.Replicas = 1
	}
	if c.MailboxTTL == 0 {
		c.MailboxTTL = DefaultMailboxTTL
	}
	if c.Retention == 0 {
		c.Retention = DefaultRetention
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if c.Clock == nil {
		c.Clock = time.Now
	}
	return c
}

var bucketName = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// validate reports the first invalid field of a defaulted config.
func (c Config) validate() error {
	buckets := []struct{ field, name string }{
		{"CheckpointBucket", c.CheckpointBucket},
		{"SessionBucket", c.SessionBucket},
		{"MailboxBucket", c.MailboxBucket},
		{"RunBucket", c.RunBucket},
	}
	seen := map[string]string{}
	for _, b := range buckets {
		if !bucketName.MatchString(b.name) {
			return fmt.Errorf("store: %w: %s %q: a bucket name is made of [A-Za-z0-9_-]", ErrInvalidConfig, b.field, b.name)
		}
		if other, ok := seen[b.name]; ok {
			return fmt.Errorf("store: %w: %s and %s are both %q: each store needs its own bucket", ErrInvalidConfig, other, b.field, b.name)
		}
		seen[b.name] = b.field
	}
	switch {
	case c.Timeout < 0:
		return fmt.Errorf("store: %w: Timeout %s is negative", ErrInvalidConfig, c.Timeout)
	case c.ChunkSize != 0 && c.ChunkSize < minChunkSize:
		return fmt.Errorf("store: %w: ChunkSize %d is below %d bytes", ErrInvalidConfig, c.ChunkSize, minChunkSize)
	case c.MaxValueSize < 0:
		return fmt.Errorf("store: %w: MaxValueSize %d is negative", ErrInvalidConfig, c.MaxValueSize)
	case c.CASRetries < 0:
		return fmt.Errorf("store: %w: CASRetries %d is negative", ErrInvalidConfig, c.CASRetries)
	case c.Retention > 0 && c.Retention < time.Second:
		return fmt.Errorf("store: %w: Retention %s is below 1s (the shortest per-message TTL; negative keeps ended runs for ever)", ErrInvalidConfig, c.Retention)
	case c.Replicas < 1 || c.Replicas > 5:
		return fmt.Errorf("store: %w: Replicas %d is not within 1..5", ErrInvalidConfig, c.Replicas)
	}
	return nil
}

// retention is the TTL of an ended run's record (0: none).
func (c Config) retention() time.Duration {
	if c.Retention < 0 {
		return 0
	}
	return c.Retention
}

// mailboxMaxAge is the bucket TTL for the mailbox (0: none).
func (c Config) mailboxMaxAge() time.Duration {
	if c.MailboxTTL < 0 {
		return 0
	}
	return c.MailboxTTL
}
