package bus_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/bus"
)

// jsServer starts a JetStream server for one test (in domain, if set) with
// stream S on s.> (messages up to 256 bytes, a duplicate window) and
// returns a connection to it.
func jsServer(t *testing.T, domain string) *nats.Conn {
	t.Helper()
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true,
		JetStream: true, StoreDir: t.TempDir(), JetStreamDomain: domain})
	require.NoError(t, err)
	go s.Start()
	require.True(t, s.ReadyForConnections(10*time.Second))
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	nc, err := nats.Connect(s.ClientURL(), nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	_, err = js.CreateStream(ctxT(t), jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}, MaxMsgSize: 256, Duplicates: time.Minute})
	require.NoError(t, err)
	return nc
}

// referenceAck decodes a publish's reply as jetstream.PublishMsg does.
func referenceAck(b []byte) (jetstream.PubAck, error) {
	var resp struct {
		Type  string              `json:"type"`
		Error *jetstream.APIError `json:"error,omitempty"`
		*jetstream.PubAck
	}
	if err := json.Unmarshal(b, &resp); err != nil {
		return jetstream.PubAck{}, jetstream.ErrInvalidJSAck
	}
	if resp.Error != nil {
		return jetstream.PubAck{}, resp.Error
	}
	if resp.PubAck == nil || resp.Stream == "" {
		return jetstream.PubAck{}, jetstream.ErrInvalidJSAck
	}
	return *resp.PubAck, nil
}

// sentinels are the errors callers match publish errors against.
var sentinels = []error{
	jetstream.ErrKeyExists, jetstream.ErrKeyRevisionMismatch, jetstream.ErrStreamMessageExceedsMaximum,
	jetstream.ErrNoStreamResponse, jetstream.ErrInvalidJSAck, jetstream.ErrStreamNotFound,
	nats.ErrNoResponders, nats.ErrTimeout, context.DeadlineExceeded, nats.ErrConnectionClosed,
}

// requireSameOutcome fails unless got is want: the same ack, the same
// error text, the same sentinels matched, the same API error code.
func requireSameOutcome(t *testing.T, what string, wantAck jetstream.PubAck, wantErr error, gotAck jetstream.PubAck, gotErr error) {
	t.Helper()
	require.Equal(t, wantAck, gotAck, what)
	if wantErr == nil || gotErr == nil {
		require.Equal(t, wantErr, gotErr, what)
		return
	}
	require.Equal(t, wantErr.Error(), gotErr.Error(), what)
	for _, s := range sentinels {
		require.Equal(t, errors.Is(wantErr, s), errors.Is(gotErr, s), "%s: errors.Is(%v)", what, s)
	}
	var wa, ga *jetstream.APIError
	require.Equal(t, errors.As(wantErr, &wa), errors.As(gotErr, &ga), what)
	if wa != nil {
		require.Equal(t, *wa, *ga, what)
	}
}

// ackSteps are publishes that make the server answer each way it can: an
// ack (and one in a domain), a duplicate, the refusals of every expected
// header, a message too big, no stream at all.
func ackSteps() []struct {
	name string
	msg  func() *nats.Msg
} {
	m := func(subj string, size int, h ...string) func() *nats.Msg {
		return func() *nats.Msg {
			msg := &nats.Msg{Subject: subj, Data: []byte(strings.Repeat("x", size)), Header: nats.Header{}}
			for i := 0; i < len(h); i += 2 {
				msg.Header.Set(h[i], h[i+1])
			}
			return msg
		}
	}
	return []struct {
		name string
		msg  func() *nats.Msg
	}{
		{"stored", m("s.a", 10)},
		{"stored with an id", m("s.a", 10, jetstream.MsgIDHeader, "m1")},
		{"duplicate", m("s.b", 10, jetstream.MsgIDHeader, "m1")},
		{"wrong last sequence", m("s.a", 10, jetstream.ExpectedLastSeqHeader, "999")},
		{"wrong last subject sequence", m("s.a", 10, jetstream.ExpectedLastSubjSeqHeader, "999")},
		{"right last sequence for a filter", m("s.c.1", 10, jetstream.ExpectedLastSubjSeqHeader, "0", jetstream.ExpectedLastSubjSeqSubjHeader, "s.c.*")},
		{"wrong last sequence for a filter", m("s.c.2", 10, jetstream.ExpectedLastSubjSeqHeader, "0", jetstream.ExpectedLastSubjSeqSubjHeader, "s.c.*")},
		{"wrong last message id", m("s.a", 10, jetstream.ExpectedLastMsgIDHeader, "nope")},
		{"wrong stream", m("s.a", 10, jetstream.ExpectedStreamHeader, "T")},
		{"too big", m("s.a", 512)},
		{"no stream", m("x.y", 10)},
	}
}

// TestJetStreamPublisherMatchesTheLibrary: on three servers in the same
// state, the same publishes get the same outcome from jetstream.PublishMsg
// and JetStreamPublisher.PublishMsg, and each raw reply is read by the hand
// parser (not encoding/json) into what json.Unmarshal makes of it.
func TestJetStreamPublisherMatchesTheLibrary(t *testing.T) {
	t.Parallel()
	for _, domain := range []string{"", "hub"} {
		t.Run("domain "+domain, func(t *testing.T) {
			t.Parallel()
			lib, ours, raw := jsServer(t, domain), jsServer(t, domain), jsServer(t, domain)
			js, err := jetstream.New(lib)
			require.NoError(t, err)
			jsp := bus.NewJetStreamPublisher(ours)
			inbox := nats.NewInbox()
			replies, err := raw.SubscribeSync(inbox)
			require.NoError(t, err)
			ctx := ctxT(t)
			for _, step := range ackSteps() {
				wantAck, wantErr := js.PublishMsg(ctx, step.msg(), jetstream.WithRetryAttempts(0))
				gotAck, gotErr := jsp.PublishMsg(ctx, step.msg(), bus.PublishRetries(0, 0))
				var want jetstream.PubAck
				if wantAck != nil {
					want = *wantAck
				}
				requireSameOutcome(t, step.name, want, wantErr, gotAck, gotErr)

				m := step.msg()
				m.Reply = inbox
				require.NoError(t, raw.PublishMsg(m))
				reply, err := replies.NextMsg(5 * time.Second)
				if errors.Is(err, nats.ErrNoResponders) {
					// The server's 503 status, no body: no stream binds the subject.
					require.ErrorIs(t, gotErr, jetstream.ErrNoStreamResponse, step.name)
					continue
				}
				require.NoError(t, err, step.name)
				t.Logf("%s: %s", step.name, reply.Data)
				refAck, refErr := referenceAck(reply.Data)
				ack, err, fast := bus.ParseAckForTest(reply.Data)
				require.True(t, fast, "%s: the hand parser reads %s", step.name, reply.Data)
				requireSameOutcome(t, step.name+" (raw)", refAck, refErr, ack, err)
				if domain != "" && err == nil {
					require.Equal(t, domain, ack.Domain)
				}
			}
		})
	}
	t.Run("no-responder retries as the library's defaults", func(t *testing.T) {
		t.Parallel()
		nc := jsServer(t, "")
		js, err := jetstream.New(nc)
		require.NoError(t, err)
		start := time.Now()
		_, wantErr := js.PublishMsg(ctxT(t), &nats.Msg{Subject: "x.y"})
		libTook := time.Since(start)
		start = time.Now()
		_, gotErr := bus.NewJetStreamPublisher(nc).PublishMsg(ctxT(t), &nats.Msg{Subject: "x.y"})
		took := time.Since(start)
		requireSameOutcome(t, "no stream", jetstream.PubAck{}, wantErr, jetstream.PubAck{}, gotErr)
		require.GreaterOrEqual(t, libTook, 2*jetstream.DefaultPubRetryWait)
		require.GreaterOrEqual(t, took, 2*jetstream.DefaultPubRetryWait, "it tried again twice, 250ms apart")
	})
}

// TestAckParser: replies the server does not write go to encoding/json,
// and whatever the path, the result is json.Unmarshal's.
func TestAckParser(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		reply string
		fast  bool
	}{
		{`{"stream":"S","seq":1}`, true},
		{`{"stream":"S", "domain":"hub", "seq":18446744073709551615}`, false}, // 20 digits
		{` { "stream" : "S" , "seq" : 7 , "duplicate": true } `, true},
		{`{"stream":"S","seq":7,"duplicate":false}`, true},
		{`{"stream":"S","domain":"d","seq":2}`, true},
		{`{"error":{"code":400,"err_code":10071,"description":"wrong last sequence: 3"}}`, true},
		{`{"error":{}}`, true},
		{`{}`, true},
		{`{"seq":1}`, true},
		{`{"stream":"","seq":1}`, true},
		{`{"type":"io.nats.jetstream.api.v1.pub_ack","stream":"S","seq":1}`, false},
		{`{"Stream":"S","seq":1}`, false},
		{`{"stream":"S\u0041","seq":1}`, false},
		{`{"stream":"Sé","seq":1}`, false},
		{`{"stream":"S","seq":1,"stream":"T"}`, false},
		{`{"stream":"S","seq":1.0}`, false},
		{`{"stream":"S","seq":1e3}`, false},
		{`{"stream":"S","seq":-1}`, false},
		{`{"stream":"S","seq":01}`, false},
		{`{"stream":"S","seq":1,"batch":"b","count":3}`, false},
		{`{"stream":"S","seq":1,"val":"5"}`, false},
		{`{"error":null,"stream":"S","seq":1}`, false},
		{`{"error":{"code":400,"err_code":70000}}`, false},
		{`{"error":{"code":-1,"err_code":1}}`, false},
		{`{"error":{"code":503,"description":"a \"quoted\" word"}}`, false},
		{`{"stream":"S","seq":1}x`, false},
		{`{"stream":"S","seq":1`, false},
		{`{"stream":"S","seq":1,}`, false},
		{`{"stream":"S","seq":true}`, false},
		{`{"stream":"S","seq":1,"duplicate":tru}`, false},
		{``, false},
		{`null`, false},
		{`[]`, false},
	} {
		ack, err, fast := bus.ParseAckForTest([]byte(c.reply))
		require.Equal(t, c.fast, fast, "hand parser for %s", c.reply)
		refAck, refErr := referenceAck([]byte(c.reply))
		requireSameOutcome(t, c.reply, refAck, refErr, ack, err)
	}
}

// quietSubject is a subject with a subscriber that never answers: a
// publish to it gets neither an ack nor "no responders".
func quietSubject(t *testing.T, nc *nats.Conn, subj string) {
	t.Helper()
	sub, err := nc.Subscribe(subj, func(*nats.Msg) {})
	require.NoError(t, err)
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	require.NoError(t, nc.Flush())
}

// quietPublisher is a publisher on a server of its own where subject q.1
// has a subscriber that never answers: a publish to it gets no ack.
func quietPublisher(t *testing.T) (*nats.Conn, *bus.JetStreamPublisher) {
	t.Helper()
	nc := jsServer(t, "")
	quietSubject(t, nc, "q.1")
	return nc, bus.NewJetStreamPublisher(nc)
}

func TestJetStreamPublisherAsync(t *testing.T) {
	t.Parallel()

	t.Run("an ack settles the wait", func(t *testing.T) {
		t.Parallel()
		nc := jsServer(t, "")
		jsp := bus.NewJetStreamPublisher(nc)
		w, err := bus.PublishAsyncForTest(jsp, &nats.Msg{Subject: "s.a", Data: []byte("x")}, time.Second)
		require.NoError(t, err)
		ack, err := w.Wait(ctxT(t))
		require.NoError(t, err)
		require.Equal(t, jetstream.PubAck{Stream: "S", Sequence: 1}, ack)
		w, err = bus.PublishAsyncForTest(jsp, &nats.Msg{Subject: "x.y"}, time.Second)
		require.NoError(t, err)
		_, err = w.Wait(ctxT(t))
		require.ErrorIs(t, err, jetstream.ErrNoStreamResponse, "no stream, as PublishMsgAsync says it")
		all, async := bus.PendingAcksForTest(jsp)
		require.Zero(t, all+async)
	})

	t.Run("a reconnect fails the acks it may have lost", func(t *testing.T) {
		t.Parallel()
		nc, jsp := quietPublisher(t)
		w, err := bus.PublishAsyncForTest(jsp, &nats.Msg{Subject: "q.1"}, time.Second)
		require.NoError(t, err)
		require.NoError(t, nc.ForceReconnect())
		ctx, cancel := context.WithTimeout(ctxT(t), 10*time.Second)
		defer cancel()
		_, err = w.Wait(ctx)
		require.ErrorIs(t, err, nats.ErrDisconnected, "waited for the reconnect to fail the wait")
		all, async := bus.PendingAcksForTest(jsp)
		require.Zero(t, all+async)
	})

	t.Run("a closed connection fails every wait", func(t *testing.T) {
		t.Parallel()
		nc, jsp := quietPublisher(t)
		w, err := bus.PublishAsyncForTest(jsp, &nats.Msg{Subject: "q.1"}, time.Second)
		require.NoError(t, err)
		syncErr := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			_, err := jsp.PublishMsg(ctx, &nats.Msg{Subject: "q.1"})
			syncErr <- err
		}()
		require.Eventually(t, func() bool { all, _ := bus.PendingAcksForTest(jsp); return all == 2 }, 10*time.Second, time.Millisecond,
			"waited for the sync publish to be sent")
		nc.Close()
		ctx, cancel := context.WithTimeout(ctxT(t), 10*time.Second)
		defer cancel()
		_, err = w.Wait(ctx)
		require.ErrorIs(t, err, nats.ErrConnectionClosed)
		select {
		case err := <-syncErr:
			require.ErrorIs(t, err, nats.ErrConnectionClosed)
		case <-ctx.Done():
			t.Fatal("the sync publish still waits 10s after the connection closed")
		}
		_, err = jsp.PublishMsg(ctx, &nats.Msg{Subject: "s.a"})
		require.ErrorIs(t, err, nats.ErrConnectionClosed)
	})

	t.Run("too many awaiting acks stall a publish", func(t *testing.T) {
		t.Parallel()
		_, jsp := quietPublisher(t)
		var first *bus.AsyncWaitForTest
		for i := range bus.MaxAsyncPendingForTest {
			w, err := bus.PublishAsyncForTest(jsp, &nats.Msg{Subject: "q.1"}, time.Second)
			require.NoError(t, err, "publish %d", i)
			if first == nil {
				first = w
			}
		}
		start := time.Now()
		_, err := bus.PublishAsyncForTest(jsp, &nats.Msg{Subject: "q.1"}, 50*time.Millisecond)
		require.ErrorIs(t, err, jetstream.ErrTooManyStalledMsgs)
		require.GreaterOrEqual(t, time.Since(start), 50*time.Millisecond, "it waited the stall wait")
		// A sync publish is not held up by them.
		_, err = jsp.PublishMsg(ctxT(t), &nats.Msg{Subject: "s.a"})
		require.NoError(t, err)

		done := make(chan error, 1)
		go func() {
			_, err := bus.PublishAsyncForTest(jsp, &nats.Msg{Subject: "q.1"}, 20*time.Second)
			done <- err
		}()
		first.Forget()
		select {
		case err := <-done:
			require.NoError(t, err, "a settled wait makes room")
		case <-time.After(15 * time.Second):
			t.Fatal("the stalled publish did not go out when a wait settled")
		}
	})

	t.Run("a sync publish that times out is forgotten", func(t *testing.T) {
		t.Parallel()
		_, jsp := quietPublisher(t)
		ctx, cancel := context.WithTimeout(ctxT(t), 50*time.Millisecond)
		defer cancel()
		_, err := jsp.PublishMsg(ctx, &nats.Msg{Subject: "q.1"})
		require.ErrorIs(t, err, context.DeadlineExceeded)
		all, async := bus.PendingAcksForTest(jsp)
		require.Zero(t, all+async)
	})
}

// A run publisher that gives up on an ack forgets it: the connection's
// map of awaiting acks does not keep it.
func TestRunPublisherForgetsAcksItGaveUpOn(t *testing.T) {
	t.Parallel()
	b := setup(t)
	quietSubject(t, b.nc, "lovia.events.run-q")
	p := newPublisher(t, b, bus.PublisherConfig{AckTimeout: 50 * time.Millisecond, RetryAttempts: 0, OutageBudget: -1})
	rp, err := p.Resume("run-q", bus.JSON, 0)
	require.NoError(t, err)
	for range 3 {
		_, err := rp.Publish(ctxT(t), delta("x"))
		require.NoError(t, err)
	}
	require.ErrorIs(t, rp.Flush(ctxT(t)), bus.ErrPublish)
	all, async := bus.PendingAcksForTest(bus.PublisherJetStreamForTest(p))
	require.Zero(t, all, fmt.Sprintf("awaiting acks left: %d (%d async)", all, async))
	require.Zero(t, async)
}

// TestPublishMsgWithinBoundsTheWait: PublishMsgWithin fails a publish
// whose ack does not come within its bound with context.DeadlineExceeded,
// as a context with that timeout would; the bound covers the no-responder
// retries too; the context still stops it first when it ends first; a
// publish acked in time returns its ack; and its pooled wait (and timer)
// serves the next publish.
func TestPublishMsgWithinBoundsTheWait(t *testing.T) {
	t.Parallel()
	nc := jsServer(t, "")
	p := bus.NewJetStreamPublisher(nc)
	quietSubject(t, nc, "quiet.x")
	const bound = 100 * time.Millisecond
	for _, subj := range []string{"quiet.x", "nobody.x"} {
		t0 := time.Now()
		_, err := p.PublishMsgWithin(context.Background(), &nats.Msg{Subject: subj, Data: []byte("x")}, bound)
		took := time.Since(t0)
		require.ErrorIs(t, err, context.DeadlineExceeded, "%s: no ack within the bound", subj)
		require.GreaterOrEqual(t, took, bound, "%s: gave up before its bound", subj)
		require.Less(t, took, bound+2*time.Second, "%s: waited past its bound (the no-responder retries take 500ms)", subj)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	t0 := time.Now()
	_, err := p.PublishMsgWithin(ctx, &nats.Msg{Subject: "quiet.x", Data: []byte("x")}, time.Minute)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Less(t, time.Since(t0), 30*time.Second, "the context's end did not stop the wait")
	for i := range 3 {
		ack, err := p.PublishMsgWithin(context.Background(), &nats.Msg{Subject: "s.within", Data: []byte("x")}, 5*time.Second)
		require.NoError(t, err, "publish %d", i)
		require.Equal(t, "S", ack.Stream)
	}
}
