package worker

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/catalog"
	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/store"
)

// Config configures a Worker. Fields without a default are required.
type Config struct {
	// Conn is the NATS connection. Required.
	Conn *nats.Conn
	// Catalog holds the agents this worker runs. Required.
	Catalog *catalog.Catalog
	// Prefix is the subject prefix. Default "lovia".
	Prefix string
	// ID names this worker in events and the run index. Default
	// "<hostname>-<pid>".
	ID string
	// Concurrency is the number of runs executed at once. Runs are mostly
	// waiting on models and tools, so the default is 1024.
	Concurrency int
	// AckWait is the claim's ack wait (the workers consumer's): a worker
	// silent for this long loses its runs to another. It is fleet-wide: a
	// value changes the consumer's for every worker (unless SkipProvision).
	// Zero takes the consumer's (30s when this worker creates it).
	AckWait time.Duration
	// Heartbeat is the ack-progress interval. Default AckWait/3.
	Heartbeat time.Duration
	// TakeoverInterval is how often the worker checks whether workers that
	// hold runs are still there, to release a dead one's runs before the
	// ack wait. Default 1s.
	TakeoverInterval time.Duration
	// TakeoverGrace is how long a worker must stay absent before its runs
	// are released: a worker that is only reconnecting (a NATS restart, a
	// network blip) is absent too, for about its reconnect wait. Default 5s.
	TakeoverGrace time.Duration
	// ShutdownGrace is how long Stop lets runs finish before interrupting
	// them at a checkpoint. Default 10s.
	ShutdownGrace time.Duration
	// ParkAfter is how long a run waits for an approval decision on this
	// worker before it parks: it stops at its checkpoint and gives its
	// claim back, so a decision that takes hours holds no worker slot and
	// no claim; a decision, a cancel or the approval deadline puts it back
	// in the runs stream for any worker. A deadline closer than ParkAfter
	// is waited out here. Default 1m; negative: never park.
	ParkAfter time.Duration
	// CoalesceDeltas, when positive, sends consecutive text (or reasoning)
	// deltas as one event at most this often (and every 512 bytes), so a
	// model streaming token by token costs the event stream tens of
	// messages a second per run, not hundreds. Their concatenation is
	// unchanged. Default 0: every delta is its own event.
	CoalesceDeltas time.Duration
	// MaxRequestBytes caps a run request. Default 1 MiB.
	MaxRequestBytes int
	// Provision configures streams and buckets created at Start. Its
	// Prefix and Workers.AckWait are set from this config.
	Provision bus.ProvisionConfig
	// SkipProvision binds to existing streams and buckets without
	// creating or updating them.
	SkipProvision bool
	// Store configures the JetStream stores.
	Store store.Config
	// Registry resolves model strings (used by the Runner).
	Registry *loop.Registry
	// ContextPolicy is the default context policy of agents that set none.
	ContextPolicy loop.ContextPolicy
	// Logger receives logs. Default: discard.
	Logger *slog.Logger
	// Metrics registers the worker's metrics (nil: a private registry).
	Metrics prometheus.Registerer
	// Clock is the time source. Default time.Now.
	Clock func() time.Time
}

// Defaults.
const (
	DefaultConcurrency     = 1024
	DefaultAckWait         = 30 * time.Second
	DefaultTakeoverGrace   = 5 * time.Second
	DefaultShutdownGrace   = 10 * time.Second
	DefaultParkAfter       = time.Minute
	DefaultMaxRequestBytes = 1 << 20
)

// WithDefaults returns c with unset fields at their defaults.
func (c Config) WithDefaults() Config {
	if c.Prefix == "" {
		c.Prefix = bus.DefaultPrefix
	}
	if c.ID == "" {
		h, _ := os.Hostname()
		if h == "" {
			h = "worker"
		}
		c.ID = sanitizeID(h) + "-" + strconv.Itoa(os.Getpid())
	}
	if c.Concurrency == 0 {
		c.Concurrency = DefaultConcurrency
	}
	if c.Heartbeat == 0 && c.AckWait > 0 {
		c.Heartbeat = c.AckWait / 3
	}
	if c.TakeoverInterval == 0 {
		c.TakeoverInterval = time.Second
	}
	if c.TakeoverGrace == 0 {
		c.TakeoverGrace = DefaultTakeoverGrace
	}
	if c.ShutdownGrace == 0 {
		c.ShutdownGrace = DefaultShutdownGrace
	}
	if c.ParkAfter == 0 {
		c.ParkAfter = DefaultParkAfter
	}
	if c.MaxRequestBytes == 0 {
		c.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Metrics == nil {
		c.Metrics = prometheus.NewRegistry()
	}
	if c.Clock == nil {
		c.Clock = time.Now
	}
	c.Provision.Prefix = c.Prefix
	c.Provision.Workers.AckWait = c.AckWait
	if c.Store.CheckpointBucket == "" {
		n, _ := bus.NewNames(c.Prefix)
		c.Store.CheckpointBucket = n.CheckpointsBucket()
		c.Store.SessionBucket = n.SessionsBucket()
		c.Store.MailboxBucket = n.MailboxBucket()
		c.Store.RunBucket = n.RunsBucket()
	}
	return c
}

func (c Config) validate() error {
	switch {
	case c.Conn == nil:
		return errors.New("worker: Config.Conn is required (a connected *nats.Conn)")
	case c.Catalog == nil:
		return errors.New("worker: Config.Catalog is required (catalog.Load or catalog.Default)")
	case bus.ValidateID("id", c.ID) != nil:
		return fmt.Errorf("worker: Config.ID %q must be 1-128 characters of [A-Za-z0-9_-]", c.ID)
	case c.Concurrency < 1:
		return fmt.Errorf("worker: Config.Concurrency %d must be positive", c.Concurrency)
	case c.AckWait != 0 && c.AckWait < time.Second:
		return fmt.Errorf("worker: Config.AckWait %s must be at least 1s (or 0: the consumer's)", c.AckWait)
	case c.Heartbeat < 0 || c.AckWait > 0 && c.Heartbeat >= c.AckWait:
		return fmt.Errorf("worker: Config.Heartbeat %s must be positive and shorter than AckWait %s", c.Heartbeat, c.AckWait)
	case c.ShutdownGrace < 0:
		return fmt.Errorf("worker: Config.ShutdownGrace %s must not be negative", c.ShutdownGrace)
	}
	return nil
}

func sanitizeID(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	out := b.String()
	if len(out) > 100 {
		out = out[:100]
	}
	return out
}
