package store

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// TestKVWritesClassifyAsTheLibrary: the bucket's puts, creates and
// updates (published on the store's bus.JetStreamPublisher) succeed and
// fail as jetstream.KeyValue's Put, Create and Update do, case by case —
// a lost compare-and-set, a key that exists, a create over a delete
// marker, a timeout, a closed connection, a value past the max payload —
// so the store classifies them the same (sentinels, CAS, not found,
// transient, retryable) and says them the same.
func TestKVWritesClassifyAsTheLibrary(t *testing.T) {
	t.Parallel()
	srv, st := newStore(t, Config{})
	b := st.runs.b
	closed := srv.connect(t)
	closedKV, err := closed.KeyValue(t.Context(), b.name)
	require.NoError(t, err)
	closedStore, err := Open(t.Context(), closed, Config{})
	require.NoError(t, err)
	closed.Conn().Close()
	// A bucket whose stream answers nothing: its writes time out.
	quiet, err := b.js.Conn().Subscribe("$KV.QUIET.>", func(*nats.Msg) {})
	require.NoError(t, err)
	t.Cleanup(func() { _ = quiet.Unsubscribe() })
	require.NoError(t, b.js.Conn().Flush())
	quietBucket := *b
	quietBucket.name = "QUIET"

	type op func(ctx context.Context, key string, val []byte, rev uint64) (uint64, error)
	lib := func(kv jetstream.KeyValue, what string) op {
		return func(ctx context.Context, key string, val []byte, rev uint64) (uint64, error) {
			switch what {
			case "put":
				return kv.Put(ctx, key, val)
			case "create":
				return kv.Create(ctx, key, val)
			}
			return kv.Update(ctx, key, val, rev)
		}
	}
	ours := func(b *bucket, what string) op {
		return func(ctx context.Context, key string, val []byte, rev uint64) (uint64, error) {
			switch what {
			case "put":
				return b.publish(ctx, key, val, noExpect)
			case "create":
				return b.createOnce(ctx, key, val, 0)
			}
			return b.publish(ctx, key, val, rev)
		}
	}
	ctx := t.Context()
	for _, c := range []struct {
		name    string
		what    string
		setup   func(key string) uint64 // the revision the write expects
		closed  bool
		quiet   bool
		size    int
		wantErr bool
	}{
		{name: "put", what: "put"},
		{name: "create", what: "create"},
		{name: "create over an existing key", what: "create", setup: func(key string) uint64 {
			_, err := b.kv.Put(ctx, key, []byte("x"))
			require.NoError(t, err)
			return 0
		}, wantErr: true},
		{name: "create over a delete marker", what: "create", setup: func(key string) uint64 {
			_, err := b.kv.Put(ctx, key, []byte("x"))
			require.NoError(t, err)
			require.NoError(t, b.kv.Delete(ctx, key))
			return 0
		}},
		{name: "update", what: "update", setup: func(key string) uint64 {
			rev, err := b.kv.Put(ctx, key, []byte("x"))
			require.NoError(t, err)
			return rev
		}},
		{name: "update at a stale revision", what: "update", setup: func(key string) uint64 {
			rev, err := b.kv.Put(ctx, key, []byte("x"))
			require.NoError(t, err)
			_, err = b.kv.Put(ctx, key, []byte("y"))
			require.NoError(t, err)
			return rev
		}, wantErr: true},
		{name: "update of a missing key", what: "update", setup: func(string) uint64 { return 7 }, wantErr: true},
		{name: "timeout", what: "update", quiet: true, wantErr: true},
		{name: "closed connection", what: "put", closed: true, wantErr: true},
		{name: "past the max payload", what: "put", size: 2 << 20, wantErr: true},
	} {
		var errs [2]error
		var revs [2]uint64
		for i, side := range []string{"lib", "ours"} {
			key := "kvpub." + side + "." + time.Now().Format("150405.000000000")
			var rev uint64
			if c.setup != nil {
				rev = c.setup(key)
			}
			var write op
			switch {
			case c.closed && i == 0:
				write = lib(closedKV, c.what)
			case c.closed:
				write = ours(closedStore.runs.b, c.what)
			case c.quiet && i == 0:
				// What the library's Update sends, to a bucket's subject
				// no stream answers (no KeyValue binds to one).
				write = func(ctx context.Context, key string, val []byte, rev uint64) (uint64, error) {
					m := &nats.Msg{Subject: "$KV.QUIET." + key, Data: val, Header: nats.Header{}}
					_, err := b.js.PublishMsg(ctx, m, jetstream.WithExpectLastSequencePerSubject(rev))
					return 0, err
				}
			case c.quiet:
				write = ours(&quietBucket, c.what)
			case i == 0:
				write = lib(b.kv, c.what)
			default:
				write = ours(b, c.what)
			}
			wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			if c.quiet {
				wctx, cancel = context.WithTimeout(ctx, 50*time.Millisecond)
			}
			revs[i], errs[i] = write(wctx, key, make([]byte, c.size), rev)
			cancel()
		}
		libErr, got := errs[0], errs[1]
		require.Equal(t, c.wantErr, libErr != nil, "%s: library: %v", c.name, libErr)
		if libErr == nil {
			require.NoError(t, got, c.name)
			require.NotZero(t, revs[1], c.name)
			continue
		}
		require.Error(t, got, c.name)
		text := func(err error) string { return lastSeq.ReplaceAllString(err.Error(), "sequence: N") }
		require.Equal(t, text(libErr), text(got), c.name)
		require.Equal(t, classify(libErr), classify(got), c.name)
		require.Equal(t, isCAS(libErr), isCAS(got), c.name)
		require.Equal(t, isNotFound(libErr), isNotFound(got), c.name)
		require.Equal(t, IsTransient(libErr), IsTransient(got), c.name)
		require.Equal(t, retryable(libErr), retryable(got), c.name)
		for _, s := range []error{jetstream.ErrKeyExists, jetstream.ErrKeyRevisionMismatch, context.DeadlineExceeded,
			nats.ErrConnectionClosed, nats.ErrMaxPayload, jetstream.ErrNoStreamResponse} {
			require.Equal(t, errors.Is(libErr, s), errors.Is(got, s), "%s: errors.Is %v", c.name, s)
		}
		t.Logf("%s: %v → %v", c.name, got, classify(got))
	}
}

// TestKVWriteErrOfReplicatedStreams: a KV write refused with 10071 is a
// lost compare-and-set (as jetstream.KeyValue says), one refused with
// 10164 — a replicated stream's wrong last sequence while another write
// of the key is still being proposed — is retried as an outage, as a
// checkpoint segment's is, and a put's error is left as it is.
func TestKVWriteErrOfReplicatedStreams(t *testing.T) {
	t.Parallel()
	wrongLast := func(code jetstream.ErrorCode) error {
		return fmt.Errorf("nats: %w", &jetstream.APIError{Code: 400, ErrorCode: code, Description: "wrong last sequence"})
	}
	lost := kvWriteErr(wrongLast(jetstream.JSErrCodeStreamWrongLastSequence), 5)
	require.ErrorIs(t, lost, jetstream.ErrKeyRevisionMismatch)
	require.True(t, isCAS(lost))
	require.ErrorIs(t, classify(lost), ErrConflict)
	require.False(t, retryable(lost), "a lost compare-and-set is not retried")
	exists := kvWriteErr(wrongLast(jetstream.JSErrCodeStreamWrongLastSequence), 0)
	require.ErrorIs(t, exists, jetstream.ErrKeyExists)

	for _, expect := range []uint64{0, 5} {
		proposing := kvWriteErr(wrongLast(jetstream.JSErrCodeStreamWrongLastSequenceConstant), expect)
		require.False(t, isCAS(proposing), "expect %d", expect)
		require.ErrorIs(t, classify(proposing), ErrUnavailable, "expect %d", expect)
		require.True(t, retryable(proposing), "expect %d", expect)
	}
	put := wrongLast(jetstream.JSErrCodeStreamWrongLastSequence)
	require.Equal(t, put, kvWriteErr(put, noExpect))
}
