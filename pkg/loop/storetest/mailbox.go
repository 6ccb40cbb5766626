package storetest

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/loop"
)

// NewMailbox returns a fresh, empty mailbox for one subtest and a reopen
// function. Each reopen call returns another handle on the same queue — for
// a networked store, over its own connection — so the suite can test
// persistence and concurrent drainers.
type NewMailbox func(t *testing.T) (mb loop.Mailbox, reopen func(t *testing.T) loop.Mailbox)

// RunMailbox runs the [loop.Mailbox] conformance suite.
func RunMailbox(t *testing.T, newMailbox NewMailbox) {
	t.Helper()
	type bundle struct {
		mb     loop.Mailbox
		reopen func(t *testing.T) loop.Mailbox
	}
	setup := func(t *testing.T) bundle {
		t.Helper()
		t.Parallel()
		mb, reopen := newMailbox(t)
		return bundle{mb: mb, reopen: reopen}
	}
	push := func(t *testing.T, mb loop.Mailbox, content string) string {
		t.Helper()
		tok, err := mb.Push(testContext(t), loop.MailMessage{Content: content})
		require.NoError(t, err)
		require.Regexp(t, validID, tok, "tokens are valid identifiers")
		return tok
	}
	drain := func(t *testing.T, mb loop.Mailbox) []loop.MailMessage {
		t.Helper()
		msgs, err := mb.Drain(testContext(t))
		require.NoError(t, err)
		return msgs
	}
	contents := func(msgs []loop.MailMessage) []string {
		out := make([]string, len(msgs))
		for i := range msgs {
			out[i] = msgs[i].Content
		}
		return out
	}

	t.Run("DrainEmpty", func(t *testing.T) {
		b := setup(t)
		require.Empty(t, drain(t, b.mb))
	})

	t.Run("DrainIsFIFO", func(t *testing.T) {
		b := setup(t)
		var tokens []string
		for i := range 12 {
			tokens = append(tokens, push(t, b.mb, fmt.Sprintf("m%02d", i)))
		}
		msgs := drain(t, b.mb)
		require.Len(t, msgs, 12)
		for i, m := range msgs {
			require.Equal(t, fmt.Sprintf("m%02d", i), m.Content)
			require.Equal(t, tokens[i], m.Token, "a drained message carries its push token")
		}
		seen := map[string]bool{}
		for _, tok := range tokens {
			require.False(t, seen[tok], "token %s issued twice", tok)
			seen[tok] = true
		}
	})

	t.Run("DrainIsDestructive", func(t *testing.T) {
		b := setup(t)
		push(t, b.mb, "a")
		push(t, b.mb, "b")
		require.Equal(t, []string{"a", "b"}, contents(drain(t, b.mb)))
		require.Empty(t, drain(t, b.mb))
		require.Empty(t, drain(t, b.reopen(t)), "another handle sees nothing either")
	})

	t.Run("PushAfterDrain", func(t *testing.T) {
		b := setup(t)
		push(t, b.mb, "a")
		require.Equal(t, []string{"a"}, contents(drain(t, b.mb)))
		push(t, b.mb, "b")
		push(t, b.mb, "c")
		require.Equal(t, []string{"b", "c"}, contents(drain(t, b.mb)))
	})

	t.Run("RemoveByToken", func(t *testing.T) {
		b := setup(t)
		ctx := testContext(t)
		push(t, b.mb, "draft")
		tok := push(t, b.mb, "withdrawn")
		push(t, b.mb, "keep")
		removed, err := b.mb.Remove(ctx, tok)
		require.NoError(t, err)
		require.True(t, removed)
		removed, err = b.mb.Remove(ctx, tok)
		require.NoError(t, err)
		require.False(t, removed, "a token is removed once")
		require.Equal(t, []string{"draft", "keep"}, contents(drain(t, b.mb)))
	})

	t.Run("RemoveAfterDrainIsFalse", func(t *testing.T) {
		b := setup(t)
		tok := push(t, b.mb, "a")
		drain(t, b.mb)
		removed, err := b.mb.Remove(testContext(t), tok)
		require.NoError(t, err)
		require.False(t, removed)
	})

	t.Run("RemoveUnknownToken", func(t *testing.T) {
		b := setup(t)
		push(t, b.mb, "a")
		removed, err := b.mb.Remove(testContext(t), "no-such-token")
		require.NoError(t, err)
		require.False(t, removed)
		require.Len(t, drain(t, b.mb), 1)
	})

	t.Run("RemoveEmptyTokenIsAnError", func(t *testing.T) {
		b := setup(t)
		_, err := b.mb.Remove(testContext(t), "")
		require.ErrorIs(t, err, loop.ErrMailboxTokenEmpty)
	})

	t.Run("CallerTokenMakesPushIdempotent", func(t *testing.T) {
		b := setup(t)
		ctx := testContext(t)
		for range 3 {
			tok, err := b.mb.Push(ctx, loop.MailMessage{Token: "inject-1", Content: "once"})
			require.NoError(t, err)
			require.Equal(t, "inject-1", tok)
		}
		msgs := drain(t, b.mb)
		require.Len(t, msgs, 1)
		require.Equal(t, "inject-1", msgs[0].Token)
	})

	t.Run("PartsRoundTripAndAreCopied", func(t *testing.T) {
		b := setup(t)
		msg := loop.MailMessage{Content: "look", Parts: []loop.Part{{Type: loop.PartImage, URL: "https://example.com/a.png"}, {Type: loop.PartText, Text: "and this"}}}
		_, err := b.mb.Push(testContext(t), msg)
		require.NoError(t, err)
		msg.Parts[1].Text = "mutated"
		msgs := drain(t, b.mb)
		require.Len(t, msgs, 1)
		require.Equal(t, []loop.Part{{Type: loop.PartImage, URL: "https://example.com/a.png"}, {Type: loop.PartText, Text: "and this"}}, msgs[0].Parts)
	})

	t.Run("AnotherHandleSeesTheQueue", func(t *testing.T) {
		b := setup(t)
		tok := push(t, b.mb, "a")
		push(t, b.mb, "b")
		other := b.reopen(t)
		removed, err := other.Remove(testContext(t), tok)
		require.NoError(t, err)
		require.True(t, removed)
		require.Equal(t, []string{"b"}, contents(drain(t, other)))
		require.Empty(t, drain(t, b.mb))
	})

	t.Run("ConcurrentDrainersNeverShareAMessage", func(t *testing.T) {
		b := setup(t)
		ctx := testContext(t)
		const (
			producers   = 3
			perProducer = 40
			drainers    = 4
		)
		handles := make([]loop.Mailbox, drainers)
		for i := range handles {
			handles[i] = b.reopen(t)
		}
		var (
			wg        sync.WaitGroup
			produced  atomic.Bool
			mu        sync.Mutex
			got       = map[string]int{}
			drainErrs = make([]error, drainers)
			pushErrs  = make([]error, producers)
		)
		var pwg sync.WaitGroup
		for p := range producers {
			pwg.Add(1)
			go func() {
				defer pwg.Done()
				for i := range perProducer {
					if _, err := b.mb.Push(ctx, loop.MailMessage{Content: fmt.Sprintf("p%d-%03d", p, i)}); err != nil {
						pushErrs[p] = err
						return
					}
				}
			}()
		}
		for d := range drainers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					done := produced.Load()
					msgs, err := handles[d].Drain(ctx)
					if err != nil {
						drainErrs[d] = err
						return
					}
					// Within one drain, each producer's messages keep their order.
					last := map[byte]string{}
					for _, m := range msgs {
						p := m.Content[1]
						if prev, ok := last[p]; ok && prev >= m.Content {
							drainErrs[d] = fmt.Errorf("drain out of order: %s after %s", m.Content, prev)
							return
						}
						last[p] = m.Content
					}
					mu.Lock()
					for _, m := range msgs {
						got[m.Content]++
					}
					mu.Unlock()
					if done && len(msgs) == 0 {
						return
					}
				}
			}()
		}
		pwg.Wait()
		produced.Store(true)
		wg.Wait()
		for _, err := range pushErrs {
			require.NoError(t, err)
		}
		for _, err := range drainErrs {
			require.NoError(t, err)
		}
		require.Len(t, got, producers*perProducer, "every message was drained")
		for content, n := range got {
			require.Equal(t, 1, n, "message %s was drained %d times", content, n)
		}
		require.Empty(t, drain(t, b.mb))
	})
}
