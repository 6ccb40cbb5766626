package bus_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/lovia-fleet/lovia/pkg/broker"
	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/loop"
)

func ExampleNames() {
	names, err := bus.NewNames("lovia")
	if err != nil {
		panic(err)
	}
	submit, _ := names.Submit("support")
	events, _ := names.Events("01jz8x4kq2run")
	approve, _ := names.RunAPI("01jz8x4kq2run", bus.OpApprove)
	fmt.Println(submit)
	fmt.Println(events)
	fmt.Println(approve)
	fmt.Println(names.RunsStream(), names.EventsStream(), names.SessionsBucket())

	// Identifiers become subject tokens, so anything else is refused.
	_, err = names.Events("run.1")
	fmt.Println(errors.Is(err, bus.ErrInvalidToken))
	fmt.Println(err)
	// Output:
	// lovia.submit.support
	// lovia.events.01jz8x4kq2run
	// lovia.api.run.01jz8x4kq2run.approve
	// LOVIA_RUNS LOVIA_EVENTS lovia_sessions
	// true
	// invalid request: run_id: "run.1" contains '.', which separates subject tokens; use 1–128 characters of [A-Za-z0-9_-]
}

// Example publishes a run's events to an in-process server and tails them
// from the first one to the terminal one.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	dir, _ := os.MkdirTemp("", "lovia-example")
	defer os.RemoveAll(dir)
	srv, err := broker.StartEmbedded(broker.EmbeddedConfig{StoreDir: dir, Port: -1}) // in-process only
	if err != nil {
		panic(err)
	}
	defer srv.Shutdown(context.Background())
	nc, err := srv.Connect()
	if err != nil {
		panic(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)

	// Create the streams and buckets (idempotent: every process may do it).
	if _, err := bus.Provision(ctx, js, bus.ProvisionConfig{}); err != nil {
		panic(err)
	}

	// A worker publishes the run's events ...
	pub, _ := bus.NewPublisher(js, bus.PublisherConfig{})
	run, err := pub.Open(ctx, "run-1", bus.JSON)
	if err != nil {
		panic(err)
	}
	at := loop.EventHeader{Agent: "demo", Turn: 1}
	for _, ev := range []loop.Event{
		&bus.RunStarted{RunStarted: loop.RunStarted{Input: []loop.Entry{loop.UserText("hi")}}, Worker: "w1"},
		&loop.TurnStarted{EventHeader: at, TurnNo: 1},
		&loop.TextDelta{EventHeader: at, Delta: "Hello"},
		&loop.TextDelta{EventHeader: at, Delta: ", world"},
		&loop.TurnEnded{EventHeader: at, TurnNo: 1},
		&loop.RunCompleted{EventHeader: at, Output: "Hello, world", Turns: 1, FinalAgent: "demo"},
	} {
		if _, err := run.Publish(ctx, ev); err != nil {
			panic(err)
		}
	}
	if err := run.Flush(ctx); err != nil { // a checkpoint: wait for every ack
		panic(err)
	}

	// ... and anyone tails them, here from the first event to the terminal one.
	tailer, _ := bus.NewTailer(js, bus.TailerConfig{})
	tail, err := tailer.Tail(ctx, "run-1", bus.FromStart())
	if err != nil {
		panic(err)
	}
	defer tail.Close(context.Background())
	for env, err := range tail.All(ctx) {
		if err != nil {
			panic(err)
		}
		ev, _ := env.Event()
		switch e := ev.(type) {
		case *loop.TextDelta:
			fmt.Printf("%d %s %q\n", env.Seq, env.Type, e.Delta)
		case *loop.RunCompleted:
			fmt.Printf("%d %s %v\n", env.Seq, env.Type, e.Output)
		default:
			fmt.Printf("%d %s\n", env.Seq, env.Type)
		}
	}
	// Output:
	// 1 run_started
	// 2 turn_started
	// 3 text_delta "Hello"
	// 4 text_delta ", world"
	// 5 turn_ended
	// 6 run_completed Hello, world
}
