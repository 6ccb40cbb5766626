package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/lovia-fleet/lovia/pkg/bus"
)

// Backoff of the retries of transient failures: the first wait, and the
// cap the doubling stops at. Each wait is jittered to 50–100% of its value,
// so that the runs of a fleet do not retry in step after a leader election.
const (
	retryFirstWait = 50 * time.Millisecond
	retryMaxWait   = 2 * time.Second
)

// backoff is the jittered exponential backoff of one retried call.
type backoff struct{ next time.Duration }

// wait returns the next pause and doubles the one after it, up to the cap.
func (b *backoff) wait() time.Duration {
	if b.next == 0 {
		b.next = retryFirstWait
	}
	d := b.next/2 + rand.N(b.next/2+1)
	b.next = min(2*b.next, retryMaxWait)
	return d
}

// sleep waits d or until ctx ends; it reports whether it waited it all.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// withRetry runs op (each attempt under the bucket's call deadline) until
// it succeeds, fails with an error that is not retryable, ctx ends, or the
// next wait would pass the outage budget. The error returned is op's last.
// Attempt numbers start at 1, so op can tell a first try from a retry whose
// predecessor's outcome is unknown.
func (b *bucket) withRetry(ctx context.Context, what string, op func(ctx context.Context, attempt int) error) error {
	return b.retry(ctx, what, true, op)
}

// withRetryBounded is withRetry for an op that bounds its own waits by the
// bucket's timeout (a write through the store's bus.JetStreamPublisher,
// see send): op gets ctx itself, and no context and timer are made for
// each call. What else op calls it bounds with callCtx.
func (b *bucket) withRetryBounded(ctx context.Context, what string, op func(ctx context.Context, attempt int) error) error {
	return b.retry(ctx, what, false, op)
}

func (b *bucket) retry(ctx context.Context, what string, deadline bool, op func(ctx context.Context, attempt int) error) error {
	start := time.Now()
	var bo backoff
	for attempt := 1; ; attempt++ {
		cctx, cancel := ctx, context.CancelFunc(nil)
		if deadline {
			cctx, cancel = b.callCtx(ctx)
		}
		err := op(cctx, attempt)
		if cancel != nil {
			cancel()
		}
		if err != nil && ctx.Err() != nil {
			return stopped(ctx, err)
		}
		if err == nil || !retryable(err) || b.budget < 0 {
			return err
		}
		d := bo.wait()
		if time.Since(start)+d > b.budget {
			b.log.LogAttrs(ctx, slog.LevelWarn, "store: giving up after the outage budget",
				slog.String("bucket", b.name), slog.String("op", what), slog.Int("attempts", attempt),
				slog.Duration("budget", b.budget), slog.String("error", err.Error()))
			return err
		}
		level := slog.LevelDebug
		if attempt == 1 || attempt%10 == 0 {
			level = slog.LevelWarn
		}
		b.log.LogAttrs(ctx, level, "store: transient failure, retrying",
			slog.String("bucket", b.name), slog.String("op", what), slog.Int("attempt", attempt),
			slog.String("error", err.Error()), slog.Duration("next_wait", d))
		if !sleep(ctx, d) {
			return stopped(ctx, err)
		}
	}
}

// stopped is the error of a call whose context ended while it retried
// err: the context's error first (a cancelled call is not an outage), err
// after it.
func stopped(ctx context.Context, err error) error {
	if errors.Is(err, ctx.Err()) {
		return err
	}
	return fmt.Errorf("%w (while retrying: %w)", ctx.Err(), err)
}

// sameValue reports whether the key now holds val: after a write whose
// outcome was unknown, a compare-and-set that fails on a retry may have lost
// to that write itself. It returns the key's revision when it does.
func (b *bucket) sameValue(ctx context.Context, key string, val []byte) (uint64, bool) {
	ctx, cancel := b.callCtx(ctx)
	defer cancel()
	e, err := b.kv.Get(ctx, key)
	if err != nil || !bytes.Equal(e.Value(), val) {
		return 0, false
	}
	return e.Revision(), true
}

// gone reports whether key is absent or deleted now.
func (b *bucket) gone(ctx context.Context, key string) bool {
	_, err := b.kv.Get(ctx, key)
	return isNotFound(err)
}

// forming reports whether err is a cluster that cannot place replicas yet:
// 10005 "no suitable peers for placement" and 10023 "insufficient
// resources", which a cluster whose nodes are still joining answers to a
// create. Only start-up waits on them.
func forming(err error) bool {
	var ae *jetstream.APIError
	return errors.As(err, &ae) && (ae.ErrorCode == 10005 || ae.ErrorCode == 10023)
}

// WaitFor runs op until it succeeds, fails with an error that is not
// transient, or ctx ends: start-up on a cluster that is still forming
// (no meta leader yet, streams without a leader). Each failure is logged
// with the attempt, the error and the next wait.
func WaitFor(ctx context.Context, js jetstream.JetStream, log *slog.Logger, what string, op func(ctx context.Context) error) error {
	var bo backoff
	for attempt := 1; ; attempt++ {
		err := op(ctx)
		if err == nil || !retryable(err) && !forming(err) || ctx.Err() != nil {
			return err
		}
		if off := bus.JetStreamDisabled(ctx, js, err); off != nil {
			return off
		}
		d := bo.wait()
		log.LogAttrs(ctx, slog.LevelWarn, "store: waiting for the cluster",
			slog.String("op", what), slog.Int("attempt", attempt), slog.String("error", err.Error()), slog.Duration("next_wait", d))
		if !sleep(ctx, d) {
			return err
		}
	}
}

// ErrJetStreamDisabled is a server that answers but has JetStream off: a
// configuration to fix, not a cluster forming. Open, EnsureBuckets and
// OpenResultStore fail with it at once instead of waiting. It is
// bus.ErrJetStreamDisabled, which Provision returns for the same server.
var ErrJetStreamDisabled = bus.ErrJetStreamDisabled
