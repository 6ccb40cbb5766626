package loop

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
)

// MemoryMailbox is an in-process [Mailbox] for one run. It is safe for
// concurrent use and copies messages on the way in and out; the zero value is
// not usable, call [NewMemoryMailbox].
//
// Push uses msg.Token when it is set, else a generated token that sorts by
// push time; pushing a token that is still queued is a no-op that returns the
// token, so a retried push does not queue the message twice.
type MemoryMailbox struct {
	mu    sync.Mutex
	items []MailMessage
	seq   uint64
}

var _ Mailbox = (*MemoryMailbox)(nil)

// NewMemoryMailbox returns an empty in-memory mailbox.
func NewMemoryMailbox() *MemoryMailbox { return &MemoryMailbox{} }

// Push queues a copy of msg and returns its token.
func (m *MemoryMailbox) Push(ctx context.Context, msg MailMessage) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("loop: mailbox push: %w", err)
	}
	msg.Parts = slices.Clone(msg.Parts)
	m.mu.Lock()
	defer m.mu.Unlock()
	if msg.Token == "" {
		m.seq++
		msg.Token = fmt.Sprintf("%012x%08x", uint64(time.Now().UnixMilli()), m.seq)
	} else if slices.ContainsFunc(m.items, func(it MailMessage) bool { return it.Token == msg.Token }) {
		return msg.Token, nil
	}
	m.items = append(m.items, msg)
	return msg.Token, nil
}

// Remove withdraws a queued message; it reports false when the token is not
// queued (never pushed, removed or drained already).
func (m *MemoryMailbox) Remove(ctx context.Context, token string) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("loop: mailbox remove: %w", err)
	}
	if token == "" {
		return false, fmt.Errorf("loop: mailbox remove: %w", ErrMailboxTokenEmpty)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	i := slices.IndexFunc(m.items, func(it MailMessage) bool { return it.Token == token })
	if i < 0 {
		return false, nil
	}
	m.items = slices.Delete(m.items, i, i+1)
	return true, nil
}

// Drain takes every queued message in push order.
func (m *MemoryMailbox) Drain(ctx context.Context) ([]MailMessage, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("loop: mailbox drain: %w", err)
	}
	m.mu.Lock()
	items := m.items
	m.items = nil
	m.mu.Unlock()
	return items, nil
}
