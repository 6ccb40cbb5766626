package store

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/loop"
)

func TestMailbox(t *testing.T) {
	t.Parallel()
	_, st := newStore(t, Config{})

	t.Run("LargeMessage", func(t *testing.T) {
		ctx := t.Context()
		mb, err := st.Mailbox("run-large")
		require.NoError(t, err)
		img := strings.Repeat("QUJD", 1<<19) // 2 MiB of base64
		_, err = mb.Push(ctx, loop.MailMessage{Content: "see attached", Parts: []loop.Part{{Type: loop.PartImage, Data: img, MimeType: "image/png"}}})
		require.NoError(t, err)
		tok, err := mb.Push(ctx, loop.MailMessage{Content: "withdrawn", Parts: []loop.Part{{Type: loop.PartImage, Data: img, MimeType: "image/png"}}})
		require.NoError(t, err)
		removed, err := mb.Remove(ctx, tok)
		require.NoError(t, err)
		require.True(t, removed)
		msgs, err := mb.Drain(ctx)
		require.NoError(t, err)
		require.Len(t, msgs, 1)
		require.Equal(t, img, msgs[0].Parts[0].Data)
		require.Empty(t, keys(t, st, st.mailbox, "run-large.>"), "drained and removed messages leave no chunks")
	})

	// A message the run has peeked is the run's: withdrawing it reports
	// false (the run will apply it), and Ack deletes it. One withdrawn
	// before the peek never reaches the run. Peeking again (a resumed run
	// after a crash before Ack) returns the taken messages again.
	t.Run("PeekTakesRemoveYields", func(t *testing.T) {
		ctx := t.Context()
		mb, err := st.Mailbox("run-peek")
		require.NoError(t, err)
		a, err := mb.Push(ctx, loop.MailMessage{Content: "a"})
		require.NoError(t, err)
		b, err := mb.Push(ctx, loop.MailMessage{Content: "b", Parts: []loop.Part{{Type: loop.PartImage, Data: strings.Repeat("QUJD", 1<<19), MimeType: "image/png"}}})
		require.NoError(t, err)
		c, err := mb.Push(ctx, loop.MailMessage{Content: "c"})
		require.NoError(t, err)
		removed, err := mb.Remove(ctx, c)
		require.NoError(t, err)
		require.True(t, removed, "not peeked yet: withdrawn")

		msgs, err := mb.Peek(ctx)
		require.NoError(t, err)
		require.Equal(t, []string{"a", "b"}, contents(msgs))
		for _, tok := range []string{a, b} {
			removed, err := mb.Remove(ctx, tok)
			require.NoError(t, err)
			require.False(t, removed, "the run peeked %s: it is no longer withdrawable", tok)
		}
		again, err := mb.Peek(ctx)
		require.NoError(t, err)
		require.Equal(t, []string{"a", "b"}, contents(again), "taken messages stay until Ack")
		require.Equal(t, msgs[1].Parts, again[1].Parts, "a large taken message keeps its parts")

		require.NoError(t, mb.Ack(ctx, []string{a, b}))
		left, err := mb.Peek(ctx)
		require.NoError(t, err)
		require.Empty(t, left)
		require.Empty(t, keys(t, st, st.mailbox, "run-peek.>"), "acked messages leave no chunks")
	})

	t.Run("TokensAndRunsAreValidated", func(t *testing.T) {
		ctx := t.Context()
		_, err := st.Mailbox("bad run")
		require.ErrorIs(t, err, ErrInvalidID)
		mb, err := st.Mailbox("run-v")
		require.NoError(t, err)
		_, err = mb.Push(ctx, loop.MailMessage{Token: "a.b", Content: "x"})
		require.ErrorIs(t, err, ErrInvalidID)
		_, err = mb.Remove(ctx, "a*")
		require.ErrorIs(t, err, ErrInvalidID)
		tok, err := mb.Push(ctx, loop.MailMessage{Content: "x"})
		require.NoError(t, err)
		require.Regexp(t, `^[0-9a-z]{26}$`, tok, "generated tokens are lowercase ULIDs")
	})

	t.Run("Clear", func(t *testing.T) {
		ctx := t.Context()
		mb, err := st.Mailbox("run-clear")
		require.NoError(t, err)
		other, err := st.Mailbox("run-other")
		require.NoError(t, err)
		_, err = mb.Push(ctx, loop.MailMessage{Content: "a"})
		require.NoError(t, err)
		_, err = other.Push(ctx, loop.MailMessage{Content: "b"})
		require.NoError(t, err)
		require.NoError(t, mb.Clear(ctx))
		msgs, err := mb.Drain(ctx)
		require.NoError(t, err)
		require.Empty(t, msgs)
		msgs, err = other.Drain(ctx)
		require.NoError(t, err)
		require.Len(t, msgs, 1, "other runs' mailboxes are untouched")
	})
}

func contents(msgs []loop.MailMessage) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.Content
	}
	return out
}
