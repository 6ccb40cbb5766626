package bus

import (
	"context"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ParseAckForTest is parseAck with the async form of its error, and
// whether the hand parser read the reply itself.
func ParseAckForTest(b []byte) (ack jetstream.PubAck, err error, fast bool) {
	_, fast = scanAck(b, &nameCache{})
	r, err := parseAck(b, &nameCache{})
	if err == nil {
		err = r.err(false)
	}
	return r.ack, err, fast
}

// AsyncWaitForTest is one asynchronous publish of a JetStreamPublisher.
type AsyncWaitForTest struct {
	p *JetStreamPublisher
	w *ackWait
}

// PublishAsyncForTest is publishAsync.
func PublishAsyncForTest(p *JetStreamPublisher, m *nats.Msg, stallWait time.Duration) (*AsyncWaitForTest, error) {
	w := &ackWait{notify: make(chan struct{}, 1)}
	if err := p.publishAsync(m, w, stallWait); err != nil {
		return nil, err
	}
	return &AsyncWaitForTest{p: p, w: w}, nil
}

// Wait waits for the outcome within ctx; the error is the one
// RunPublisher would see (asyncErr).
func (a *AsyncWaitForTest) Wait(ctx context.Context) (jetstream.PubAck, error) {
	for !a.w.settled() {
		select {
		case <-a.w.notify:
		case <-ctx.Done():
			return jetstream.PubAck{}, ctx.Err()
		}
	}
	return a.w.ack, asyncErr(a.w.err)
}

// Forget is forget.
func (a *AsyncWaitForTest) Forget() { a.p.forget(a.w) }

// PendingAcksForTest is how many publishes of p await acks.
func PendingAcksForTest(p *JetStreamPublisher) (all, async int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.acks), p.async
}

// MaxAsyncPendingForTest is maxAsyncPending.
const MaxAsyncPendingForTest = maxAsyncPending

// PublisherJetStreamForTest is the JetStreamPublisher a Publisher
// publishes with.
func PublisherJetStreamForTest(p *Publisher) *JetStreamPublisher { return p.jsp }
