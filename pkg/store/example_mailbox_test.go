package store_test

import (
	"context"
	"fmt"
	"os"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/lovia-fleet/lovia/pkg/broker"
	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/store"
)

// A message pushed twice with one idempotency key is queued once, and a
// push with the key after the run took the message queues nothing.
func ExampleMailbox_PushKey() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "lovia-mailbox-example")
	defer os.RemoveAll(dir)
	srv, err := broker.StartEmbedded(broker.EmbeddedConfig{StoreDir: dir, Port: -1})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Shutdown(ctx)
	nc, err := srv.Connect()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	if err := store.EnsureBuckets(ctx, js, store.Config{}); err != nil {
		fmt.Println(err)
		return
	}
	st, err := store.Open(ctx, js, store.Config{})
	if err != nil {
		fmt.Println(err)
		return
	}
	mb, _ := st.Mailbox("run-1")

	first, _ := mb.PushKey(ctx, "subagent:child-1", loop.MailMessage{Content: "<report>7 files</report>"})
	second, _ := mb.PushKey(ctx, "subagent:child-1", loop.MailMessage{Content: "<report>7 files</report>"})
	fmt.Println(first == second, first == store.KeyToken("subagent:child-1"))
	msgs, _ := mb.Drain(ctx)
	fmt.Println(len(msgs), msgs[0].Content)

	// The run took it; the key stays used.
	third, _ := mb.PushKey(ctx, "subagent:child-1", loop.MailMessage{Content: "<report>7 files</report>"})
	msgs, _ = mb.Drain(ctx)
	fmt.Println(third == first, len(msgs))
	// Output:
	// true true
	// 1 <report>7 files</report>
	// true 0
}
