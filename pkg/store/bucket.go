package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/lovia-fleet/lovia/internal/jsapi"
	"github.com/lovia-fleet/lovia/pkg/bus"
)

// bucket wraps one KV bucket with the deadline rule (every network call
// gets Config.Timeout when its context has no deadline), the retry rule
// (transient failures are tried again within Config.OutageBudget, see
// withRetry; writes whose earlier attempt may have landed recognise it),
// the value layer
// (value.go) and subject purges on the bucket's stream. Its methods return
// NATS errors unwrapped; the stores translate them with wrapErr.
type bucket struct {
	js      jetstream.JetStream
	jsp     *bus.JetStreamPublisher // the store's, for segment appends
	kv      jetstream.KeyValue
	stream  jetstream.Stream
	name    string
	timeout time.Duration
	budget  time.Duration // Config.OutageBudget
	chunk   int           // largest value written as one message
	max     int           // largest encoded value
	log     *slog.Logger
}

func (b *bucket) callCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return callCtx(ctx, b.timeout)
}

func (b *bucket) get(ctx context.Context, key string) (jetstream.KeyValueEntry, error) {
	var e jetstream.KeyValueEntry
	err := b.withRetry(ctx, "get", func(ctx context.Context, _ int) error {
		var err error
		e, err = b.kv.Get(ctx, key)
		return err
	})
	return e, err
}

// put is idempotent: a retry writes the same value again.
func (b *bucket) put(ctx context.Context, key string, val []byte) (uint64, error) {
	var rev uint64
	err := b.withRetryBounded(ctx, "put", func(ctx context.Context, _ int) error {
		var err error
		rev, err = b.publish(ctx, key, val, noExpect)
		return err
	})
	return rev, err
}

// create writes key if it does not exist. A retry that finds the key
// holding val took the earlier attempt's write (whose reply was lost) for
// its own.
func (b *bucket) create(ctx context.Context, key string, val []byte) (uint64, error) {
	return b.createTTL(ctx, key, val, 0)
}

// createTTL is create for a value that expires ttl after the write (0:
// never; see ttlHeader).
func (b *bucket) createTTL(ctx context.Context, key string, val []byte, ttl time.Duration) (uint64, error) {
	var rev uint64
	err := b.withRetryBounded(ctx, "create", func(ctx context.Context, attempt int) error {
		var err error
		rev, err = b.createOnce(ctx, key, val, ttl)
		if err != nil && attempt > 1 && isCAS(err) {
			if r, ok := b.sameValue(ctx, key, val); ok {
				rev, err = r, nil
			}
		}
		return err
	})
	return rev, err
}

// update writes key if its revision is still rev. A retry that loses the
// compare-and-set to a key holding val took the earlier attempt's write
// for its own.
func (b *bucket) update(ctx context.Context, key string, val []byte, rev uint64) (uint64, error) {
	return b.updateTTL(ctx, key, val, rev, 0)
}

// updateTTL is update for a value that expires ttl after the write (0:
// never; see ttlHeader).
func (b *bucket) updateTTL(ctx context.Context, key string, val []byte, rev uint64, ttl time.Duration) (uint64, error) {
	var next uint64
	err := b.withRetryBounded(ctx, "update", func(ctx context.Context, attempt int) error {
		var err error
		next, err = b.publishTTL(ctx, key, val, rev, ttl)
		if err != nil && attempt > 1 && isCAS(err) {
			if r, ok := b.sameValue(ctx, key, val); ok && r > rev {
				next, err = r, nil
			}
		}
		return err
	})
	return next, err
}

// noExpect is publish's expectation for a put: none.
const noExpect = ^uint64(0)

// publish writes val under key — as jetstream.KeyValue's Put (expect
// noExpect) or Update (expect the revision the key must be at; 0: absent)
// do, with the same errors (a lost compare-and-set matches
// jetstream.ErrKeyRevisionMismatch, or ErrKeyExists for expect 0) — on the
// store's bus.JetStreamPublisher, which reads the ack itself instead of
// decoding it as JSON.
func (b *bucket) publish(ctx context.Context, key string, val []byte, expect uint64) (uint64, error) {
	return b.publishTTL(ctx, key, val, expect, 0)
}

// publishTTL is publish for a value the server removes ttl after the write
// (header Nats-TTL; 0: never). On a bucket whose stream does not allow
// per-message TTLs (provisioned by an earlier release and not since) the
// value is written without one, and a warning says what to do.
func (b *bucket) publishTTL(ctx context.Context, key string, val []byte, expect uint64, ttl time.Duration) (uint64, error) {
	msg := &nats.Msg{Subject: b.subject(key), Data: val}
	if expect != noExpect || ttl > 0 {
		msg.Header = nats.Header{}
	}
	if expect != noExpect {
		msg.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(expect, 10))
	}
	if ttl > 0 {
		msg.Header.Set(jetstream.MsgTTLHeader, ttlHeader(ttl))
	}
	rev, err := b.send(ctx, msg, expect)
	if ttl > 0 && isTTLDisabled(err) {
		b.log.LogAttrs(ctx, slog.LevelWarn, "store: the bucket does not allow per-message TTLs; an ended run's key is kept for ever",
			slog.String("bucket", b.name), slog.String("key", key),
			slog.String("hint", "start a worker of this release once: its provisioning turns on allow_msg_ttl for the bucket"))
		msg.Header.Del(jetstream.MsgTTLHeader)
		return b.send(ctx, msg, expect)
	}
	return rev, err
}

// ttlHeader is the Nats-TTL of ttl: whole seconds, at least one (the
// server refuses less).
func ttlHeader(ttl time.Duration) string {
	return strconv.FormatInt(max(int64(ttl/time.Second), 1), 10) + "s"
}

// isTTLDisabled reports the server's refusal of a Nats-TTL on a stream
// without allow_msg_ttl (10166).
func isTTLDisabled(err error) bool {
	var ae *jetstream.APIError
	return errors.As(err, &ae) && ae.ErrorCode == 10166
}

// subject is key's subject in the bucket's stream.
func (b *bucket) subject(key string) string { return "$KV." + b.name + "." + key }

// send publishes a write of the bucket, expecting expect (see
// kvWriteErr), and returns the revision it was stored at. The deadline
// rule holds as for callCtx: a ctx without a deadline gets the bucket's
// timeout (bounding the publisher's wait, without deriving a context).
func (b *bucket) send(ctx context.Context, msg *nats.Msg, expect uint64) (uint64, error) {
	var within time.Duration
	if _, ok := ctx.Deadline(); !ok {
		within = b.timeout
	}
	ack, err := b.jsp.PublishMsgWithin(ctx, msg, within)
	if err != nil {
		return 0, kvWriteErr(err, expect)
	}
	return ack.Sequence, nil
}

// kvWriteErr is the error of a KV write expecting revision expect (or
// noExpect) as jetstream.KeyValue says it: a wrong last sequence (10071)
// is a lost compare-and-set, jetstream.ErrKeyRevisionMismatch
// (ErrKeyExists for a create). Unlike the library, 10164 — the wrong last
// sequence a replicated stream answers while another write of the same
// key is still being proposed, most often this writer's own earlier
// attempt after a leader change — stays what transientAPICodes makes it:
// an outage to retry, as for checkpoint segments (putIfLast). The retry
// then finds its own write (sameValue) or loses the compare-and-set with
// 10071; taking 10164 for a lost one could make a claim re-read a record
// that does not show its own write yet and claim the run a second time.
func kvWriteErr(err error, expect uint64) error {
	if expect == noExpect || !isWrongLast(err) {
		return err
	}
	cas := jetstream.ErrKeyRevisionMismatch
	if expect == 0 {
		cas = jetstream.ErrKeyExists
	}
	return fmt.Errorf("%w: %w", err, cas)
}

// createOnce is jetstream.KeyValue's Create: a write expecting no key.
// When the key exists the library's Create decides (its last entry may be
// a delete or purge marker, which a create replaces), and says it.
func (b *bucket) createOnce(ctx context.Context, key string, val []byte, ttl time.Duration) (uint64, error) {
	rev, err := b.publishTTL(ctx, key, val, 0, ttl)
	if err != nil && isCAS(err) {
		ctx, cancel := b.callCtx(ctx)
		defer cancel()
		if ttl > 0 {
			return b.kv.Create(ctx, key, val, jetstream.KeyTTL(ttl.Truncate(time.Second)))
		}
		return b.kv.Create(ctx, key, val)
	}
	return rev, err
}

// purgeKey removes a key's history, if its revision is still rev (whatever
// its revision when rev is 0). A retry that finds the key gone took the
// earlier attempt's purge for its own.
func (b *bucket) purgeKey(ctx context.Context, key string, rev uint64) error {
	return b.withRetry(ctx, "purge key", func(ctx context.Context, attempt int) error {
		var err error
		if rev == 0 {
			err = b.kv.Purge(ctx, key)
		} else {
			err = b.kv.Purge(ctx, key, jetstream.LastRevision(rev))
		}
		if err != nil && attempt > 1 && isCAS(err) && b.gone(ctx, key) {
			err = nil
		}
		return err
	})
}

// clearKey is purgeKey for cleanup: a key that is gone, or that another
// writer has moved past rev, is not an error.
func (b *bucket) clearKey(ctx context.Context, key string, rev uint64) error {
	if err := b.purgeKey(ctx, key, rev); err != nil && !isNotFound(err) && !isCAS(err) {
		return err
	}
	return nil
}

// deleteKey places a delete marker on key, if its revision is still rev.
// A retry that finds the key deleted took the earlier attempt's delete for
// its own.
func (b *bucket) deleteKey(ctx context.Context, key string, rev uint64) error {
	return b.withRetry(ctx, "delete key", func(ctx context.Context, attempt int) error {
		err := b.kv.Delete(ctx, key, jetstream.LastRevision(rev))
		if err != nil && attempt > 1 && isCAS(err) && b.gone(ctx, key) {
			err = nil
		}
		return err
	})
}

// purge removes every message whose key matches filter (wildcards allowed)
// from the bucket's stream, leaving no markers behind.
func (b *bucket) purge(ctx context.Context, filter string) error {
	return b.withRetry(ctx, "purge", func(ctx context.Context, _ int) error {
		return b.stream.Purge(ctx, jetstream.WithPurgeSubject(b.subject(filter)))
	})
}

// purgeQuietly is purge for cleanup nobody waits on: failures are logged,
// and what stays behind goes with the next purge of the owning id.
func (b *bucket) purgeQuietly(ctx context.Context, filter string) {
	if filter == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.timeout)
	defer cancel()
	if err := b.purge(ctx, filter); err != nil {
		b.log.LogAttrs(ctx, slog.LevelWarn, "store: cleanup left keys behind",
			slog.String("bucket", b.name), slog.String("keys", filter), slog.String("error", err.Error()))
	}
}

// list returns the current value of every key that matches filter, in
// stream order (ascending revision), skipping deleted keys. It first asks
// the stream leader for the last message matching filter: when there is
// none (a fresh run's mailbox, a run without batches), it returns nothing
// without the short-lived ordered consumer that reading the keys takes
// (consumer creation is the costly part of a listing on the server).
func (b *bucket) list(ctx context.Context, filter string) ([]jetstream.KeyValueEntry, error) {
	var out []jetstream.KeyValueEntry
	err := b.withRetry(ctx, "list", func(ctx context.Context, _ int) error {
		var err error
		out, err = b.listOnce(ctx, filter)
		return err
	})
	return out, err
}

func (b *bucket) listOnce(ctx context.Context, filter string) ([]jetstream.KeyValueEntry, error) {
	last, err := jsapi.LeaderGet(ctx, b.js, "KV_"+b.name, jsapi.LastBySubject(b.subject(filter)))
	if err != nil {
		return nil, err
	}
	if last == nil {
		return nil, nil
	}
	w, err := b.kv.Watch(ctx, filter, jetstream.IgnoreDeletes())
	if err != nil {
		return nil, err
	}
	defer stopWatch(w)
	var out []jetstream.KeyValueEntry
	for {
		select {
		case e, ok := <-w.Updates():
			if !ok {
				return nil, fmt.Errorf("watch %s closed before its initial values: %w", filter, jetstream.ErrConnectionClosed)
			}
			if e == nil {
				return out, nil
			}
			out = append(out, e)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// stopWatch unsubscribes and waits for the subscription's delivery goroutine
// to finish (it closes the updates channel on its way out); draining also
// unblocks a delivery stuck on a full channel.
func stopWatch(w jetstream.KeyWatcher) {
	_ = w.Stop()
	timeout := time.NewTimer(5 * time.Second)
	defer timeout.Stop()
	for {
		select {
		case _, ok := <-w.Updates():
			if !ok {
				return
			}
		case <-timeout.C:
			return
		}
	}
}
