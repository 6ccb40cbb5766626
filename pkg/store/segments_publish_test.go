package store

import (
	"context"
	"errors"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/bus"
)

var lastSeq = regexp.MustCompile(`sequence: [0-9]+`)

// TestSegmentPublishClassifiesAsTheLibrary: a segment append's publish
// (bus.JetStreamPublisher, as putIfLast sends it) fails as
// js.PublishMsg with WithExpectLastSequenceForSubject did, case by case —
// a compare-and-set lost, no stream, a timeout, a closed connection, a
// message past the max payload — so the store classifies it the same
// (sentinel, CAS, wrong last sequence, transient, retryable) and says it
// the same.
func TestSegmentPublishClassifiesAsTheLibrary(t *testing.T) {
	t.Parallel()
	srv, st := newStore(t, Config{})
	js := st.checkpoints.b.js
	name := st.checkpoints.b.name
	quiet, err := js.Conn().Subscribe("$KV.QUIET.>", func(*nats.Msg) {})
	require.NoError(t, err)
	t.Cleanup(func() { _ = quiet.Unsubscribe() })
	require.NoError(t, js.Conn().Flush())
	closedJS := srv.connect(t)
	closedJS.Conn().Close()

	type publish func(ctx context.Context, js jetstream.JetStream, subj, filter string, last uint64, val []byte) error
	library := func(ctx context.Context, js jetstream.JetStream, subj, filter string, last uint64, val []byte) error {
		_, err := js.PublishMsg(ctx, &nats.Msg{Subject: subj, Data: val, Header: nats.Header{}},
			jetstream.WithExpectLastSequenceForSubject(last, filter))
		return err
	}
	ours := func(ctx context.Context, js jetstream.JetStream, subj, filter string, last uint64, val []byte) error {
		_, err := bus.NewJetStreamPublisher(js.Conn()).PublishMsg(ctx, &nats.Msg{Subject: subj, Data: val, Header: nats.Header{
			jetstream.ExpectedLastSubjSeqSubjHeader: {filter},
			jetstream.ExpectedLastSubjSeqHeader:     {strconv.FormatUint(last, 10)},
		}})
		return err
	}
	kv := func(run, key string) (string, string) {
		return "$KV." + name + "." + run + "." + key, "$KV." + name + "." + run + ".c.*"
	}
	for _, c := range []struct {
		name    string
		js      jetstream.JetStream
		subject func(run string) (string, string)
		last    uint64
		size    int
		timeout time.Duration
		wantErr bool
	}{
		{name: "first append", js: js, subject: func(run string) (string, string) { return kv(run, "c.00000000") }},
		{name: "compare-and-set lost", js: js, subject: func(run string) (string, string) { return kv(run, "c.00000001") }, wantErr: true},
		{name: "wrong last sequence", js: js, subject: func(run string) (string, string) { return kv(run, "c.00000001") }, last: 1 << 40, wantErr: true},
		{name: "no stream", js: js, subject: func(string) (string, string) { return "$KV.NOPE.x", "$KV.NOPE.*" }, wantErr: true},
		{name: "timeout", js: js, subject: func(string) (string, string) { return "$KV.QUIET.x", "$KV.QUIET.*" }, timeout: 50 * time.Millisecond, wantErr: true},
		{name: "closed connection", js: closedJS, subject: func(run string) (string, string) { return kv(run, "c.00000000") }, wantErr: true},
		{name: "past the max payload", js: js, subject: func(run string) (string, string) { return kv(run, "c.00000001") }, size: 2 << 20, wantErr: true},
	} {
		var errs [2]error
		for i, pub := range []publish{library, ours} {
			run := []string{"lib", "bus"}[i]
			subj, filter := c.subject(run)
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			if c.timeout > 0 {
				ctx, cancel = context.WithTimeout(t.Context(), c.timeout)
			}
			errs[i] = pub(ctx, c.js, subj, filter, c.last, make([]byte, c.size))
			cancel()
		}
		lib, got := errs[0], errs[1]
		require.Equal(t, c.wantErr, lib != nil, "%s: library: %v", c.name, lib)
		if lib == nil {
			require.NoError(t, got, c.name)
			continue
		}
		require.Error(t, got, c.name)
		// The same text but for the stream's sequence each side is at.
		text := func(err error) string { return lastSeq.ReplaceAllString(err.Error(), "sequence: N") }
		require.Equal(t, text(lib), text(got), c.name)
		require.Equal(t, text(wrapErr("checkpoint append", "run-1", lib)), text(wrapErr("checkpoint append", "run-1", got)), c.name)
		require.Equal(t, classify(lib), classify(got), c.name)
		require.Equal(t, isWrongLast(lib), isWrongLast(got), c.name)
		require.Equal(t, isCAS(lib), isCAS(got), c.name)
		require.Equal(t, IsTransient(lib), IsTransient(got), c.name)
		require.Equal(t, retryable(lib), retryable(got), c.name)
		for _, s := range []error{context.DeadlineExceeded, nats.ErrConnectionClosed, nats.ErrMaxPayload, jetstream.ErrNoStreamResponse} {
			require.Equal(t, errors.Is(lib, s), errors.Is(got, s), "%s: errors.Is %v", c.name, s)
		}
		t.Logf("%s: %v → %v", c.name, got, classify(got))
	}
}
