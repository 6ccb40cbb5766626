package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// DefaultNATSWait is how long a worker or gateway waits at start-up for a
// NATS server to accept its connection (--nats-wait).
const DefaultNATSWait = 2 * time.Minute

// waitForever makes dial wait for NATS until its ctx ends.
const waitForever time.Duration = -1

// natsRetryEvery is the pause between two connection attempts while a
// process waits for NATS at start-up.
const natsRetryEvery = time.Second

// natsLogEvery is how often a connection that keeps failing is logged
// again (start-up waits, reconnects, refused logins).
const natsLogEvery = 15 * time.Second

// addNATSWaitFlag adds --nats-wait to a long-lived process's flags.
func addNATSWaitFlag(fs *flag.FlagSet) *time.Duration {
	d := DefaultNATSWait
	fs.Var((*waitFlag)(&d), "nats-wait", "how long start-up waits for a NATS server to accept the connection, retrying every second: a `duration` (0: do not wait)")
	return &d
}

// waitFlag is a duration flag that refuses negative values.
type waitFlag time.Duration

func (w *waitFlag) String() string { return time.Duration(*w).String() }

func (w *waitFlag) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("%q is not a duration: write it as 30s, 2m or 0", s)
	}
	if d < 0 {
		return fmt.Errorf("%s is negative: give 0 (do not wait) or more", s)
	}
	*w = waitFlag(d)
	return nil
}

// dial opens the connection of a long-lived process (a worker, a
// gateway): it reconnects for as long as the process runs, logs losing
// and regaining the server, and at start-up waits up to wait for a server
// that does not answer yet (logging that it waits; waitForever: until
// ctx ends). A
// refused login, a TLS failure or a bad option fails at once.
func (f *natsFlags) dial(ctx context.Context, name string, wait time.Duration, log *slog.Logger) (*nats.Conn, error) {
	opts, err := f.options(name)
	if err != nil {
		return nil, err
	}
	opts = append(opts, connLogging(log, f.shown())...)
	start := time.Now()
	var waiting rateLog
	for {
		nc, err := nats.Connect(f.url, opts...)
		if err == nil {
			if waiting.seen() {
				log.Info("connected to NATS", "addr", nc.ConnectedUrlRedacted(), "waited", time.Since(start).Round(time.Millisecond))
			}
			return nc, nil
		}
		if !unreachable(err) {
			return nil, f.connectError(err)
		}
		waited := time.Since(start)
		if wait != waitForever && waited >= wait {
			if wait == 0 {
				return nil, f.connectError(err)
			}
			return nil, fmt.Errorf("no NATS server accepted a connection at %s within --nats-wait %s: %w (start NATS, or pass --nats / set NATS_URL to where it listens; --nats-wait sets how long start-up waits)", f.shown(), wait, err)
		}
		pause := natsRetryEvery
		args := []any{"error", err, "waited", waited.Round(time.Second)}
		if wait != waitForever {
			pause = min(pause, wait-waited)
			args = append(args, "gives_up_after", wait)
		}
		if waiting.due() {
			log.Warn(fmt.Sprintf("waiting for NATS at %s, retrying", f.shown()), args...)
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("stopped while waiting for NATS at %s (%v): nothing was started", f.shown(), context.Cause(ctx))
		case <-t.C:
		}
	}
}

// unreachable reports whether a failed connect is a server that is not
// there (yet): nothing listens, the name does not resolve, the dial timed
// out. A server that answers and refuses (a login, TLS) is not.
func unreachable(err error) bool {
	if refusedLogin(err) {
		return false
	}
	var ne net.Error
	return errors.Is(err, nats.ErrNoServers) || errors.Is(err, nats.ErrTimeout) || errors.As(err, &ne)
}

// connLogging logs a long-lived connection's losses, reconnects, failed
// attempts and asynchronous errors (a refused login during a credential
// rotation, a permission violation), each kind at most every natsLogEvery.
func connLogging(log *slog.Logger, addr string) []nats.Option {
	var failed, async rateLog
	return []nats.Option{
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				log.Warn("lost the NATS connection; reconnecting", "addr", addr, "error", err)
			}
		}),
		nats.ReconnectErrHandler(func(_ *nats.Conn, err error) {
			if failed.due() {
				log.Warn("reconnecting to NATS failed; retrying", "addr", addr, "error", err)
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			failed.reset()
			log.Info("reconnected to NATS", "addr", nc.ConnectedUrlRedacted())
		}),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			if !async.due() {
				return
			}
			args := []any{"addr", addr, "error", err}
			if sub != nil {
				args = append(args, "subject", sub.Subject)
			}
			if refusedLogin(err) {
				log.Warn("NATS refused the login; retrying (fix the credentials if this persists)", args...)
				return
			}
			log.Warn("NATS reported an error", args...)
		}),
		nats.ClosedHandler(func(nc *nats.Conn) {
			if err := nc.LastError(); err != nil {
				log.Error("the NATS connection is closed and does not reconnect: restart the process", "addr", addr, "error", err)
			}
		}),
	}
}

// rateLog lets one line of a repeated kind through every natsLogEvery.
type rateLog struct {
	mu   sync.Mutex
	last time.Time
}

func (r *rateLog) due() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.last.IsZero() && time.Since(r.last) < natsLogEvery {
		return false
	}
	r.last = time.Now()
	return true
}

func (r *rateLog) seen() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return !r.last.IsZero()
}

func (r *rateLog) reset() {
	r.mu.Lock()
	r.last = time.Time{}
	r.mu.Unlock()
}
