package store

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"slices"
	"strings"

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
//
// # Idempotency keys
//
// PushKey queues a message under a caller's idempotency key: its token is
// derived from the key ([KeyToken]), so every push with one key to one run
// targets the same KV key, and kv.Create lets exactly one of them — across
// processes and connections — store the message; the others answer the
// same token and store nothing. A keyed message is not deleted when it is
// consumed (Ack, Drain) or withdrawn (Remove): its entry is replaced, by
// compare-and-set on the revision read, with a spent record that holds no
// content, so a push with the key after the run applied the message is
// still a no-op. Spent records are invisible to Peek, Drain and Remove, and
// live as long as the run's mailbox: Clear purges them with it, and the
// bucket's MaxAge (Config.MailboxTTL, 7 days by default) expires them.
type Mailbox struct {
	b    *bucket
	run  string
	runs *Runs // the run index, whose Quiet flag a push clears first
}

// mailRecord is a queued message as stored.
type mailRecord struct {
	loop.MailMessage `msgpack:",inline"`
	// Taken is set by Peek: the run owns the message from then on.
	Taken bool `msgpack:"taken,omitempty"`
	// Keyed is set by PushKey: consuming or withdrawing the message leaves
	// a spent record, so its key stays used.
	Keyed bool `msgpack:"keyed,omitempty"`
	// Spent marks the record a keyed message leaves when it is consumed or
	// withdrawn: no content, never returned.
	Spent bool `msgpack:"spent,omitempty"`
}

// MaxKeyLen is the longest idempotency key PushKey takes, in bytes.
const MaxKeyLen = 256

// keyTokenPrefix starts every token derived from an idempotency key.
const keyTokenPrefix = "k-"

// KeyToken returns the mailbox token of the messages pushed with an
// idempotency key: "k-" and the first 32 hex digits of the key's SHA-256,
// a valid token whatever the key's characters.
func KeyToken(key string) string {
	sum := sha256.Sum256([]byte(key))
	return keyTokenPrefix + hex.EncodeToString(sum[:16])
}

// spentRecord is what a keyed message leaves behind.
func spentRecord(token string) *mailRecord {
	return &mailRecord{MailMessage: loop.MailMessage{Token: token}, Taken: true, Keyed: true, Spent: true}
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
	return m.push(ctx, op, &mailRecord{MailMessage: msg})
}

// PushKey queues msg under an idempotency key and returns its token,
// [KeyToken](key) (msg.Token is ignored). A second push with the same key
// to the same run — from any process, concurrently or after the first was
// consumed or withdrawn — stores nothing and returns the same token; the
// first push's content is the one the run gets. The key is any non-empty
// string of at most [MaxKeyLen] bytes.
func (m *Mailbox) PushKey(ctx context.Context, key string, msg loop.MailMessage) (string, error) {
	const op = "mailbox push"
	if key == "" || len(key) > MaxKeyLen {
		return "", fmt.Errorf("store: %s %s: %w: the idempotency key must be 1-%d bytes (it is %d)", op, m.run, ErrInvalidArgument, MaxKeyLen, len(key))
	}
	msg.Token = KeyToken(key)
	return m.push(ctx, op, &mailRecord{MailMessage: msg, Keyed: true})
}

// push creates rec's key; a key that exists already is a no-op.
func (m *Mailbox) push(ctx context.Context, op string, rec *mailRecord) (string, error) {
	if m.runs != nil {
		if err := m.runs.Unquiet(ctx, m.run); err != nil {
			return "", wrapErr(op, m.run, err)
		}
	}
	frame, chunks, err := m.b.encode(ctx, m.run, rec)
	if err != nil {
		return "", wrapErr(op, m.run, err)
	}
	if _, err := m.b.create(ctx, m.key(rec.Token), frame); err != nil {
		if isCAS(err) {
			m.b.purgeQuietly(ctx, chunks)
			return rec.Token, nil // queued (or spent) already
		}
		return "", wrapErr(op, m.run, err)
	}
	return rec.Token, nil
}

// take removes the message entry e read at its revision: a delete, or for
// a keyed message the spent record. Like a delete, it fails the revision
// check when a concurrent drainer, Peek or Remove wrote the key first.
func (m *Mailbox) take(ctx context.Context, e jetstream.KeyValueEntry, keyed bool, token string) error {
	if !keyed {
		return m.b.deleteKey(ctx, e.Key(), e.Revision())
	}
	frame, _, err := m.b.encode(ctx, m.run, spentRecord(token))
	if err != nil {
		return err
	}
	_, err = m.b.update(ctx, e.Key(), frame, e.Revision())
	return err
}

// Remove withdraws a queued message. It reports false when the token is
// not queued: never pushed, removed or drained already (for a keyed
// message: spent), taken by a concurrent Drain, or taken by the run (Peek).
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
	var rec mailRecord
	_, decErr := m.b.decode(ctx, e.Value(), &rec)
	if decErr == nil && (rec.Spent || rec.Taken && !taken) {
		return false, nil // consumed, withdrawn, or the run has it
	}
	// An undecodable keyed message still leaves its spent record.
	keyed := rec.Keyed || decErr != nil && strings.HasPrefix(token, keyTokenPrefix)
	chunks := chunksOf(e.Value())
	if err := m.take(ctx, e, keyed, token); err != nil {
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
		var rec mailRecord
		chunks, decErr := m.b.decode(ctx, e.Value(), &rec)
		if decErr == nil && rec.Spent {
			continue // a keyed message consumed already
		}
		token := e.Key()[len(m.run)+len(".m."):]
		keyed := rec.Keyed || decErr != nil && strings.HasPrefix(token, keyTokenPrefix)
		// A chunk missing means a concurrent drainer took the message; its
		// delete below then fails the revision check.
		if err := m.take(ctx, e, keyed, token); err != nil {
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
		msg := rec.MailMessage
		if msg.Token == "" {
			msg.Token = token
		}
		out = append(out, msg)
	}
	return out, nil
}

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
		if rec.Spent {
			continue // a keyed message consumed already
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

// Clear removes every message of the run, queued or spent (the record of a
// consumed keyed message), e.g. when the run ends.
func (m *Mailbox) Clear(ctx context.Context) error {
	return wrapErr("mailbox clear", m.run, m.b.purge(ctx, m.run+".>"))
}

// Pending returns the messages no one has taken, FIFO, and changes
// nothing: what a run that has ended left in its mailbox (a session's
// next run starts with them). Remove withdraws them afterwards.
func (m *Mailbox) Pending(ctx context.Context) ([]loop.MailMessage, error) {
	const op = "mailbox pending"
	listed, err := m.b.list(ctx, m.run+".m.*")
	if err != nil {
		return nil, wrapErr(op, m.run, err)
	}
	slices.SortFunc(listed, func(a, b jetstream.KeyValueEntry) int { return cmp.Compare(a.Revision(), b.Revision()) })
	var out []loop.MailMessage
	for _, e := range listed {
		var rec mailRecord
		if _, err := m.b.decode(ctx, e.Value(), &rec); err != nil || rec.Spent || rec.Taken {
			continue
		}
		msg := rec.MailMessage
		if msg.Token == "" {
			msg.Token = e.Key()[len(m.run)+len(".m."):]
		}
		out = append(out, msg)
	}
	return out, nil
}
