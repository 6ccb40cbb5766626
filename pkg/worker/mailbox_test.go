package worker

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/broker"
	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/store"
)

func TestRunMailboxReadsOnlyWhenSomethingMayHaveArrived(t *testing.T) {
	srv, err := broker.StartEmbedded(broker.EmbeddedConfig{StoreDir: t.TempDir()})
	require.NoError(t, err)
	defer func() { _ = srv.Shutdown(context.Background()) }()
	nc, err := srv.Connect()
	require.NoError(t, err)
	defer nc.Close()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	ctx := context.Background()
	_, err = bus.Provision(ctx, js, bus.ProvisionConfig{})
	require.NoError(t, err)
	st, err := store.Open(ctx, js, store.Config{})
	require.NoError(t, err)
	raw, err := st.Mailbox("r1")
	require.NoError(t, err)
	mb := newRunMailbox(raw)

	// A new run reads once (messages may have arrived while it was queued).
	_, err = raw.Push(ctx, loop.MailMessage{Content: "early"})
	require.NoError(t, err)
	msgs, err := mb.Peek(ctx)
	require.NoError(t, err)
	require.Len(t, msgs, 1)
	require.NoError(t, mb.Ack(ctx, []string{msgs[0].Token}))

	// Pushed behind its back without a notification: not read at once…
	_, err = raw.Push(ctx, loop.MailMessage{Content: "quiet"})
	require.NoError(t, err)
	msgs, err = mb.Peek(ctx)
	require.NoError(t, err)
	require.Empty(t, msgs)
	// …but after a notification it is.
	mb.touch()
	msgs, err = mb.Peek(ctx)
	require.NoError(t, err)
	require.Len(t, msgs, 1)
	// And without one, after the recheck interval at the latest.
	mb.last.Store(time.Now().Add(-mailboxRecheck).UnixNano())
	msgs, err = mb.Peek(ctx)
	require.NoError(t, err)
	require.Len(t, msgs, 1, "a lost notification delays a message, never loses it")
	// A push through the wrapper marks it too.
	require.NoError(t, mb.Ack(ctx, []string{msgs[0].Token}))
	_, err = mb.Push(ctx, loop.MailMessage{Content: "own"})
	require.NoError(t, err)
	msgs, err = mb.Peek(ctx)
	require.NoError(t, err)
	require.Len(t, msgs, 1)
}
