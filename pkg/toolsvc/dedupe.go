package toolsvc

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/lovia-fleet/lovia/pkg/loop"
)

// dedupeKey is the bucket key of a call: the tool and the call id
// (base64url, so any id is a valid key).
func dedupeKey(tool, callID string) string {
	return tool + "." + base64.RawURLEncoding.EncodeToString([]byte(callID))
}

// dedupe answers a call at most once per call id: the first caller
// records a pending claim and runs the tool; a caller with the same id
// gets the stored reply, or waits for the running call's reply, or takes
// the call over when the claim's lease ran out (its instance died).
func (s *Service) dedupe(ctx context.Context, t *loop.Tool, callID string, args []byte) record {
	key := dedupeKey(t.Name, callID)
	lease := s.cfg.Dedupe.Lease
	if lease <= 0 {
		lease = t.Timeout
	}
	if lease <= 0 {
		lease = DefaultLease
	}
	for {
		if ctx.Err() != nil {
			return unavailable(fmt.Errorf("the call was cancelled: %w", context.Cause(ctx)))
		}
		claim := record{Lease: time.Now().Add(lease)}
		rev, err := s.kv.Create(ctx, key, claim.encode())
		if err == nil {
			return s.runAndStore(ctx, t, key, rev, args)
		}
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return unavailable(err)
		}
		entry, err := s.kv.Get(ctx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue // expired or purged since: claim again
		}
		if err != nil {
			return unavailable(err)
		}
		rec, ok := decodeRecord(entry.Value())
		switch {
		case ok && rec.Done:
			return rec
		case ok && time.Now().Before(rec.Lease):
			if !s.waitFor(ctx, key, entry.Revision(), rec.Lease) {
				return unavailable(fmt.Errorf("the call is still running on another instance: %w", context.Cause(ctx)))
			}
		default:
			// The claim's instance died (or wrote garbage): take it over.
			rev, err := s.kv.Update(ctx, key, claim.encode(), entry.Revision())
			if err == nil {
				return s.runAndStore(ctx, t, key, rev, args)
			}
		}
	}
}

func (s *Service) runAndStore(ctx context.Context, t *loop.Tool, key string, rev uint64, args []byte) record {
	rec := run(ctx, t, args)
	// Store even when ctx ended: the tool ran, and a new call must not
	// run it again.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if _, err := s.kv.Update(sctx, key, rec.encode(), rev); err != nil {
		s.cfg.Logger.Warn("tool service could not store a reply for dedupe", "key", key, "error", err)
	}
	return rec
}

// waitFor waits until key changes after rev or the lease ends; false when
// ctx ended first.
func (s *Service) waitFor(ctx context.Context, key string, rev uint64, lease time.Time) bool {
	wctx, cancel := context.WithDeadline(ctx, lease)
	defer cancel()
	w, err := s.kv.Watch(wctx, key, jetstream.UpdatesOnly())
	if err != nil {
		return ctx.Err() == nil
	}
	defer func() { _ = w.Stop() }()
	// The key may have changed between the read and the watch.
	if e, err := s.kv.Get(wctx, key); err != nil || e.Revision() != rev {
		return true
	}
	for {
		select {
		case e, ok := <-w.Updates():
			if !ok || e == nil {
				return ctx.Err() == nil
			}
			if e.Revision() != rev {
				return true
			}
		case <-wctx.Done():
			return ctx.Err() == nil
		}
	}
}

func unavailable(err error) record {
	return record{Done: true, Code: CodeUnavailable, Description: fmt.Sprintf("%v: %v (the call did not run; call again)", ErrDedupe, err)}
}
