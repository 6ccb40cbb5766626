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
	"go.opentelemetry.io/otel/trace"

	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/catalog"
	"github.com/lovia-fleet/lovia/pkg/fleet"
	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/store"
)

// Config configures a Worker. Fields without a default are required.
type Config struct {
	// Conn is the NATS connection. Required.
	Conn *nats.Conn
	// Catalog holds the agents this worker runs: a fixed set. Required
	// unless Agents is set.
	Catalog *catalog.Catalog
	// Agents, when set, provides agents that change while the worker runs
	// (registry.Source, the agents registry); Catalog is then ignored.
	// The worker claims runs of the agents it Serves, follows its changes
	// from the next run on, and resumes a run with the agents of the
	// registry revision it is pinned to.
	Agents AgentSource
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
	// ack wait. Default 250ms.
	TakeoverInterval time.Duration
	// TakeoverGrace is how long a worker must stay absent (its presence
	// subject without responders) before its runs are released. Default 1s.
	TakeoverGrace time.Duration
	// ReconnectGrace replaces TakeoverGrace for ReconnectWindow after this
	// worker's own connection to NATS was lost and restored: after a NATS
	// restart every worker is absent until its own reconnect (about the
	// client's reconnect wait, 2s by default), and must keep its runs.
	// Default 5s.
	ReconnectGrace time.Duration
	// ReconnectWindow is how long after its own reconnect the worker uses
	// ReconnectGrace. Default 15s.
	ReconnectWindow time.Duration
	// PingTimeout bounds a presence ping of another worker. Default 2s.
	PingTimeout time.Duration
	// FetchTimeout is the longest a fetch of new runs waits. Default 2s.
	FetchTimeout time.Duration
	// FetchRetry is the pause after a failed fetch. Default 500ms.
	FetchRetry time.Duration
	// SweepInterval is how often the worker looks for run requests that
	// no agent's consumer routes (raw publishes for an agent no worker
	// serves) to index their runs as queued. Default 5s.
	SweepInterval time.Duration
	// AnnounceInterval is how often the worker refreshes its entry in the
	// fleet registry (the agents it serves). Default 2s.
	AnnounceInterval time.Duration
	// StoreTimeout bounds each of the worker's own store and stream calls
	// around a run (claim bookkeeping, releases, cancel polls, last-event
	// reads). Default 5s.
	StoreTimeout time.Duration
	// ShutdownGrace is how long Stop lets runs finish before interrupting
	// them at a checkpoint. Default 10s.
	ShutdownGrace time.Duration
	// ParkAfter is how long a run waits for an approval decision on this
	// worker before it parks: it stops at its checkpoint and gives its
	// claim back, so a decision that takes hours holds no worker slot and
	// no claim; a decision or the approval deadline puts it back in the
	// runs stream for any worker (a cancel ends it, with no worker). A
	// deadline closer than ParkAfter
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
	// Deps are the program's dependencies, given to every run's tools,
	// hooks, guardrails and instructions as RunContext.Deps
	// (loop.WithDeps): a database handle, an HTTP client. Never persisted.
	// Default nil.
	Deps any
	// ContextPolicy is the default context policy of agents that set none.
	ContextPolicy loop.ContextPolicy
	// Logger receives logs. Default: discard.
	Logger *slog.Logger
	// Metrics registers the worker's metrics (nil: a private registry).
	Metrics prometheus.Registerer
	// Clock is the time source. Default time.Now.
	Clock func() time.Time
	// BuildID names this worker's build (a release tag, a commit): it
	// joins each agent's definition digest in the agent versions the
	// worker records and announces (catalog.VersionOf), so that two
	// builds whose code differs under the same definitions tell their runs
	// apart. Up to 64 characters of [A-Za-z0-9._-]. Default "": versions
	// are the digests alone.
	BuildID string
	// ResumeAnyVersion turns off version routing: by default a worker
	// that claims the resume of a run started on another version of its
	// agent gives it back while a live worker announcing that version
	// (with a free slot) serves the agent, so a rolling deploy lets old
	// runs finish on old code; it resumes the run itself when none does,
	// or once the request has used most of its deliveries
	// (docs/protocol.md#agent-versions). Runs of agents from an agents
	// registry are not routed: a resume runs their pinned revision's
	// definitions anyway.
	ResumeAnyVersion bool
	// Tracing opens the claim spans and the loop's (run, turn, model and
	// tool calls, handoffs), continuing the trace of each run request's
	// submit (docs/protocol.md#trace-context). Default: noop.
	Tracing trace.TracerProvider
}

// Defaults.
const (
	DefaultConcurrency     = 1024
	DefaultAckWait         = 30 * time.Second
	DefaultTakeoverGrace   = time.Second
	DefaultReconnectGrace  = 5 * time.Second
	DefaultShutdownGrace   = 10 * time.Second
	DefaultParkAfter       = time.Minute
	DefaultMaxRequestBytes = 1 << 20
	DefaultStoreTimeout    = 5 * time.Second
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
		c.TakeoverInterval = 250 * time.Millisecond
	}
	if c.TakeoverGrace == 0 {
		c.TakeoverGrace = DefaultTakeoverGrace
	}
	if c.ReconnectGrace == 0 {
		c.ReconnectGrace = DefaultReconnectGrace
	}
	if c.ReconnectWindow == 0 {
		c.ReconnectWindow = 3 * c.ReconnectGrace
	}
	if c.PingTimeout == 0 {
		c.PingTimeout = 2 * time.Second
	}
	if c.FetchTimeout == 0 {
		c.FetchTimeout = 2 * time.Second
	}
	if c.FetchRetry == 0 {
		c.FetchRetry = 500 * time.Millisecond
	}
	if c.SweepInterval == 0 {
		c.SweepInterval = 5 * time.Second
	}
	if c.AnnounceInterval == 0 {
		c.AnnounceInterval = fleet.DefaultInterval
	}
	if c.StoreTimeout == 0 {
		c.StoreTimeout = DefaultStoreTimeout
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
	case c.Catalog == nil && c.Agents == nil:
		return errors.New("worker: Config.Catalog is required (catalog.Load or catalog.Default), or Config.Agents (registry.NewSource)")
	case bus.ValidateID("id", c.ID) != nil:
		return fmt.Errorf("worker: Config.ID %q must be 1-128 characters of [A-Za-z0-9_-]", c.ID)
	case c.Concurrency < 1:
		return fmt.Errorf("worker: Config.Concurrency %d must be positive", c.Concurrency)
	case c.AckWait != 0 && c.AckWait < time.Second:
		return fmt.Errorf("worker: Config.AckWait %s must be at least 1s (or 0: the consumer's)", c.AckWait)
	case c.Heartbeat < 0 || c.AckWait > 0 && c.Heartbeat >= c.AckWait:
		return fmt.Errorf("worker: Config.Heartbeat %s must be positive and shorter than AckWait %s", c.Heartbeat, c.AckWait)
	case !buildIDRE.MatchString(c.BuildID):
		return fmt.Errorf("worker: Config.BuildID %q must be up to 64 characters of [A-Za-z0-9._-]", c.BuildID)
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
