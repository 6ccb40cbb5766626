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
