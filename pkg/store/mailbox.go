package store

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/lovia-fleet/lovia/pkg/loop"
)

// Mailbox is a [loop.Mailbox] for one run on a KV bucket: one key per
// queued message, <run>.m.<token>.
//
// Push writes with kv.Create. Its token is msg.Token when set (1–128
// characters of [A-Za-z0-9_-]) and otherwise a lowercase ULID, unique and
// ordered by time; pushing a token that is still queued is a no-op, so a
// client can retry a push safely.
//
// Drain lists the run's message keys through one short-lived ordered
// consumer, orders them by KV revision — the order in which the server
// stored the pushes, so FIFO holds across processes — and takes each message
// by deleting its key conditionally on the revision it read. Of two
// concurrent drainers (or a drainer and Remove) exactly one deletes a given
// message, and only that one returns it: a message is never returned twice.
// A delete whose outcome is unknown (a timeout) drops the message from that
// drain's result and ends the drain, so a message may be lost to a network
// failure but is never duplicated. It is safe for concurrent use.
//
// Peek (the run owner's read, see [loop.MailboxPeeker]) marks each message
// it returns as taken, with a compare-and-set; Remove withdraws only
// messages not taken, so a withdrawal either happens before the run reads
// the message or reports false: "removed" never names a message the run
// applied. Ack deletes taken messages.
type Mailbox struct {
	b   *bucket
	run string
}

// mailRecord is a queued message as stored.
type mailRecord struct {
	loop.MailMessage `msgpack:",inline"`
	// Taken is set by Peek: the run owns the message from then on.
	Taken bool `msgpack:"taken,omitempty"`
}

var _ loop.Mailbox = (*Mailbox)(nil)

func (m *Mailbox) key(token string) string { return m.run + ".m." + token }

// Push queues msg and returns its token.
func (m *Mailbox) Push(ctx context.Context, msg loop.MailMessage) (string, error) {
	const op = "mailbox push"
	if msg.Token == "" {
		msg.Token = newToken()
	} else if err := checkID(op, "token", msg.Token); err != nil {
		return "", err
	}
	frame, chunks, err := m.b.encode(ctx, m.run, &mailRecord{MailMessage: msg})
	if err != nil {
		return "", wrapErr(op, m.run, err)
	}
	if _, err := m.b.create(ctx, m.key(msg.Token), frame); err != nil {
		if isCAS(err) {
			m.b.purgeQuietly(ctx, chunks)
			return msg.Token, nil // queued already
		}
		return "", wrapErr(op, m.run, err)
	}
	return msg.Token, nil
}

// Remove withdraws a queued message. It reports false when the token is
// not queued: never pushed, removed or drained already, taken by a
// concurrent Drain, or taken by the run (Peek).
func (m *Mailbox) Remove(ctx context.Context, token string) (bool, error) {
	return m.remove(ctx, "mailbox remove", token, false)
}

// remove deletes a message; a taken one only when taken is true.
func (m *Mailbox) remove(ctx context.Context, op, token string, taken bool) (bool, error) {
	if token == "" {
		return false, fmt.Errorf("store: %s %s: %w", op, m.run, loop.ErrMailboxTokenEmpty)
	}
	if err := checkID(op, "token", token); err != nil {
		return false, err
	}
	e, err := m.b.get(ctx, m.key(token))
	if isNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, wrapErr(op, m.run, err)
	}
	if !taken {
		var rec mailRecord
		if _, err := m.b.decode(ctx, e.Value(), &rec); err == nil && rec.Taken {
			return false, nil // the run has it
		}
	}
	chunks := chunksOf(e.Value())
	if err := m.b.deleteKey(ctx, m.key(token), e.Revision()); err != nil {
		if isCAS(err) {
			return false, nil
		}
		return false, wrapErr(op, m.run, err)
	}
	m.b.purgeQuietly(ctx, chunks)
	return true, nil
}

// Drain takes every queued message, in push order.
func (m *Mailbox) Drain(ctx context.Context) ([]loop.MailMessage, error) {
	const op = "mailbox drain"
	listed, err := m.b.list(ctx, m.run+".m.*")
	if err != nil {
		return nil, wrapErr(op, m.run, err)
	}
	slices.SortFunc(listed, func(a, b jetstream.KeyValueEntry) int { return cmp.Compare(a.Revision(), b.Revision()) })
	var out []loop.MailMessage
	for _, e := range listed {
		var msg loop.MailMessage
		chunks, decErr := m.b.decode(ctx, e.Value(), &msg)
		// A chunk missing means a concurrent drainer took the message; its
		// delete below then fails the revision check.
		if err := m.b.deleteKey(ctx, e.Key(), e.Revision()); err != nil {
			if isCAS(err) {
				continue // taken by a concurrent drainer or Remove
			}
			if len(out) > 0 {
				// Hand over what is ours; the rest stays queued.
				m.b.log.LogAttrs(ctx, slog.LevelWarn, "store: mailbox drain stopped early",
					slog.String("run", m.run), slog.String("error", err.Error()))
				return out, nil
			}
			return nil, wrapErr(op, m.run, err)
		}
		m.b.purgeQuietly(ctx, chunks)
		if decErr != nil {
			m.b.log.LogAttrs(ctx, slog.LevelWarn, "store: mailbox dropped an undecodable message",
				slog.String("run", m.run), slog.String("key", e.Key()), slog.String("error", decErr.Error()))
			continue
		}
		out = append(out, msg)
	}
	return out, nil
}

// Clear removes every queued message of the run, e.g. when the run ends.
var _ loop.MailboxPeeker = (*Mailbox)(nil)

// Peek returns the queued messages, FIFO, and marks them taken (Remove
// then reports false for them) without deleting them: Ack does, once the
// run has checkpointed them. A message withdrawn while Peek marks it is
// left out.
func (m *Mailbox) Peek(ctx context.Context) ([]loop.MailMessage, error) {
	const op = "mailbox peek"
	listed, err := m.b.list(ctx, m.run+".m.*")
	if err != nil {
		return nil, wrapErr(op, m.run, err)
	}
	if len(listed) == 0 {
		return nil, nil
	}
	slices.SortFunc(listed, func(a, b jetstream.KeyValueEntry) int { return cmp.Compare(a.Revision(), b.Revision()) })
	out := make([]loop.MailMessage, 0, len(listed))
	for _, e := range listed {
		var rec mailRecord
		chunks, err := m.b.decode(ctx, e.Value(), &rec)
		if err != nil {
			m.b.log.LogAttrs(ctx, slog.LevelWarn, "store: mailbox skipped an undecodable message",
				slog.String("run", m.run), slog.String("key", e.Key()), slog.String("error", err.Error()))
			continue
		}
		if !rec.Taken {
			rec.Taken = true
			frame, newChunks, err := m.b.encode(ctx, m.run, &rec)
			if err != nil {
				return nil, wrapErr(op, m.run, err)
			}
			if _, err := m.b.update(ctx, e.Key(), frame, e.Revision()); err != nil {
				m.b.purgeQuietly(ctx, newChunks)
				if isCAS(err) {
					continue // withdrawn (or taken) meanwhile
				}
				if len(out) > 0 {
					return out, nil // what is marked is ours; the rest waits
				}
				return nil, wrapErr(op, m.run, err)
			}
			m.b.purgeQuietly(ctx, chunks)
		}
		msg := rec.MailMessage
		if msg.Token == "" {
			msg.Token = e.Key()[len(m.run)+len(".m."):]
		}
		out = append(out, msg)
	}
	return out, nil
}

// Ack deletes the messages with these tokens (absent ones are ignored).
func (m *Mailbox) Ack(ctx context.Context, tokens []string) error {
	var first error
	for _, t := range tokens {
		if t == "" {
			continue
		}
		if _, err := m.remove(ctx, "mailbox ack", t, true); err != nil && first == nil {
			first = err
		}
	}
	return first
}

func (m *Mailbox) Clear(ctx context.Context) error {
	return wrapErr("mailbox clear", m.run, m.b.purge(ctx, m.run+".>"))
}
