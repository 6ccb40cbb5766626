package worker

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/store"
)

// mailboxRecheck bounds how long a steering message can wait when its
// notification was lost (notifications are core NATS, at most once).
const mailboxRecheck = 2 * time.Second

// runMailbox is a run's durable mailbox that skips the store read at turn
// start while nothing can have arrived: it reads when the run starts, when
// the API notified this worker of an inject, when this process pushed, and
// at least every mailboxRecheck. Listing a mailbox costs a short-lived
// consumer on the server, which an idle check per turn does not need.
type runMailbox struct {
	*store.Mailbox
	dirty atomic.Bool
	last  atomic.Int64 // unix nanos of the last read
}

var (
	_ loop.Mailbox       = (*runMailbox)(nil)
	_ loop.MailboxPeeker = (*runMailbox)(nil)
)

func newRunMailbox(mb *store.Mailbox) *runMailbox {
	m := &runMailbox{Mailbox: mb}
	m.dirty.Store(true)
	return m
}

func (m *runMailbox) touch() { m.dirty.Store(true) }

// settle marks the mailbox read just now, found empty.
func (m *runMailbox) settle() {
	m.last.Store(time.Now().UnixNano())
	m.dirty.Store(false)
}

// Push queues a message (and marks the mailbox for reading).
func (m *runMailbox) Push(ctx context.Context, msg loop.MailMessage) (string, error) {
	tok, err := m.Mailbox.Push(ctx, msg)
	m.touch()
	return tok, err
}

// Peek reads the queue only when something may be in it.
func (m *runMailbox) Peek(ctx context.Context) ([]loop.MailMessage, error) {
	now := time.Now().UnixNano()
	if !m.dirty.Swap(false) && now-m.last.Load() < int64(mailboxRecheck) {
		return nil, nil
	}
	m.last.Store(now)
	msgs, err := m.Mailbox.Peek(ctx)
	if err != nil {
		m.touch()
	}
	return msgs, err
}

// Drain takes the queue (used by callers that do not peek).
func (m *runMailbox) Drain(ctx context.Context) ([]loop.MailMessage, error) {
	m.dirty.Store(false)
	m.last.Store(time.Now().UnixNano())
	return m.Mailbox.Drain(ctx)
}
