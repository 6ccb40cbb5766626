package toolsvc

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/lovia-fleet/lovia/pkg/loop"
)

// callKey is the bucket key of a call: <service>.<tool>.<digest>, the
// digest the base64url (unpadded) SHA-256 of the run id's length in bytes
// (decimal), a colon, the run id and the call id. A call id is unique
// only within its run (a scripted model reuses its ids in every run), so
// the key holds both, and no run id and call id of one run can give the
// key of another's; hashing keeps any id a valid key of fixed length.
func callKey(service, tool string, c Call) string {
	h := sha256.New()
	h.Write([]byte(strconv.Itoa(len(c.RunID)) + ":" + c.RunID + c.CallID))
	return service + "." + tool + "." + base64.RawURLEncoding.EncodeToString(h.Sum(nil))
}

// argsDigest identifies a call's arguments: the SHA-256 of the JSON with
// its keys sorted and no spaces (of the bytes as they are when they are
// not one JSON value), so a call made again with the same arguments
// matches however its JSON was laid out.
func argsDigest(args []byte) string {
	canon := args
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) == nil && errors.Is(dec.Decode(new(any)), io.EOF) {
		if b, err := json.Marshal(v); err == nil {
			canon = b
		}
	}
	sum := sha256.Sum256(canon)
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// dedupe answers a call at most once per run and call id: the first
// caller records a pending claim and runs the tool; a caller with the
// same ids gets the stored reply, or waits for the running call's reply,
// or takes the call over when the claim's lease ran out (its instance
// died). The same ids with other arguments are a conflict, answered as
// an error and not stored.
func (s *Service) dedupe(ctx context.Context, t *loop.Tool, c Call, args []byte) record {
	key := callKey(s.cfg.Name, t.Name, c)
	digest := argsDigest(args)
	lease := s.cfg.Dedupe.Lease
	for {
		if ctx.Err() != nil {
			return unavailable(fmt.Errorf("the call was cancelled: %w", context.Cause(ctx)))
		}
		claim := record{Args: digest, Lease: time.Now().Add(lease)}
		rev, err := s.kv.Create(ctx, key, claim.encode())
		if err == nil {
			return s.runAndStore(ctx, t, key, rev, digest, args, lease)
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
		case ok && rec.Args != digest:
			return conflict(c, s.cfg.Dedupe.Window)
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
				return s.runAndStore(ctx, t, key, rev, digest, args, lease)
			}
		}
	}
}

// runAndStore runs the call it holds the claim (at rev) of, renewing the
// claim's lease while the tool runs, then stores the reply: or, for
// arguments the tool refused, frees the key, since nothing ran.
func (s *Service) runAndStore(ctx context.Context, t *loop.Tool, key string, rev uint64, digest string, args []byte, lease time.Duration) record {
	stop, renewed := make(chan struct{}), make(chan uint64)
	go func() { renewed <- s.keepClaim(ctx, key, rev, digest, lease, stop) }()
	rec := run(ctx, t, args)
	close(stop)
	rev = <-renewed
	rec.Args = digest
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	switch {
	case rec.Code == CodeInvalidArguments:
		// The tool refused the arguments: nothing ran.
		s.release(sctx, key, rev, "a refused call")
		return rec
	case rec.Code != "" && s.ctx.Err() != nil:
		// The instance stopped during the call and cancelled it: as for an
		// instance that died, the call made again runs.
		s.release(sctx, key, rev, "a call cancelled by the service's stop")
		return unavailableAfterStop()
	}
	// Store even when the call's own deadline ended it: the tool ran, and a
	// new call must not run it again.
	value := rec.encode()
	if len(value) > s.maxRecord() {
		value = record{Done: true, Args: digest, Code: CodeToolError, Description: fmt.Sprintf(
			"the call ran, but its reply (%d bytes) was too large for the dedupe store, so it is not sent again; it did not run a second time", len(rec.Body))}.encode()
	}
	if _, err := s.kv.Update(sctx, key, value, rev); err != nil {
		s.cfg.Logger.Warn("tool service could not store a reply for dedupe", "key", key, "error", err)
	}
	return rec
}

// release frees the key of a call whose claim this instance holds at rev.
func (s *Service) release(ctx context.Context, key string, rev uint64, what string) {
	if err := s.kv.Delete(ctx, key, jetstream.LastRevision(rev)); err != nil {
		s.cfg.Logger.Warn("tool service could not free the dedupe key of "+what, "key", key, "error", err)
	}
}

// maxRecord is the largest record the bucket takes: the server's max
// payload, less room for the message's headers.
func (s *Service) maxRecord() int {
	return int(s.cfg.Conn.MaxPayload()) - 1024
}

func unavailableAfterStop() record {
	return record{Done: true, Code: CodeUnavailable, Description: "the tool service instance stopped during the call and cancelled it; call again (another instance runs it)"}
}

// keepClaim renews the claim at rev every third of its lease until stop
// closes, and returns the claim's last revision. A claim that another
// instance took over (this one was cut off from NATS past the lease) is
// left to it.
func (s *Service) keepClaim(ctx context.Context, key string, rev uint64, digest string, lease time.Duration, stop <-chan struct{}) uint64 {
	tick := time.NewTicker(lease / 3)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return rev
		case <-tick.C:
		}
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), lease/3)
		r, err := s.kv.Update(rctx, key, record{Args: digest, Lease: time.Now().Add(lease)}.encode(), rev)
		cancel()
		switch {
		case err == nil:
			rev = r
		case errors.Is(err, jetstream.ErrKeyRevisionMismatch):
			s.cfg.Logger.Warn("tool service lost the claim of a running call: its lease ran out and another instance took it over", "key", key)
			<-stop
			return rev
		default:
			s.cfg.Logger.Warn("tool service could not renew the claim of a running call; retrying", "key", key, "error", err)
		}
	}
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

// conflict is the reply to a call whose run and call id an earlier call
// with other arguments used: it did not run, and the earlier reply stays.
func conflict(c Call, window time.Duration) record {
	return record{Done: true, Code: CodeConflict, Description: fmt.Sprintf(
		"%v: call id %q of run %q was used by an earlier call with other arguments, whose reply is kept for %s; this call did not run: give each call its own Lovia-Call-Id",
		ErrCallConflict, c.CallID, c.RunID, shortDuration(window))}
}

// shortDuration writes 24h, not 24h0m0s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
