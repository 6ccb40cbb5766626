package store_test

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/lovia-fleet/lovia/pkg/broker"
	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/store"
)

// Open the stores on an embedded server, checkpoint a run, fence a stale
// writer, and append the finished run to a session.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "lovia-store-example")
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

	cfg := store.Config{} // lovia_checkpoints, lovia_sessions, lovia_mailbox, lovia_runs
	if err := store.EnsureBuckets(ctx, js, cfg); err != nil {
		fmt.Println(err)
		return
	}
	st, err := store.Open(ctx, js, cfg)
	if err != nil {
		fmt.Println(err)
		return
	}

	cp := st.Checkpointer()
	turn := []loop.Entry{loop.UserText("What is 2+3?"), loop.AssistantText("5")}
	rev, _ := cp.Append(ctx, "run-1", loop.CheckpointWrite{Entries: turn, Head: loop.RunHead{Agent: "math", Turns: 1, Status: loop.StatusRunning}})
	_, _ = cp.Append(ctx, "run-1", loop.CheckpointWrite{Base: 2, Head: loop.RunHead{Agent: "math", Turns: 1, Status: loop.StatusCompleted, Output: "5"}, Revision: rev})

	// A writer still holding the first revision lost the run.
	_, err = cp.Append(ctx, "run-1", loop.CheckpointWrite{Base: 2, Revision: rev})
	fmt.Println(err != nil && errors.Is(err, loop.ErrFenced))

	snap, _ := cp.Load(ctx, "run-1")
	fmt.Println(snap.Status, snap.Output, len(snap.Entries))

	_, _ = st.Session().Append(ctx, "user-42", loop.Segment{RunID: "run-1", Entries: snap.Entries})
	_, _ = st.Session().Append(ctx, "user-42", loop.Segment{RunID: "run-1", Entries: snap.Entries}) // idempotent
	history, _ := loop.LoadSession(ctx, st.Session(), "user-42")
	fmt.Println(len(history), history[1].Text)
	// Output:
	// true
	// completed 5 2
	// 2 5
}
