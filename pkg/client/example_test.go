package client_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/lovia-fleet/lovia/pkg/broker"
	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/catalog"
	"github.com/lovia-fleet/lovia/pkg/client"
	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/service"
	"github.com/lovia-fleet/lovia/pkg/store"
	"github.com/lovia-fleet/lovia/pkg/tools"
	"github.com/lovia-fleet/lovia/pkg/worker"
)

// Example submits a run to a fleet in one process — an embedded NATS
// server, the API service and a worker — streams its events to the end
// and reads its result.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dir := must(os.MkdirTemp("", "lovia-example"))
	defer os.RemoveAll(dir)
	srv := must(broker.StartEmbedded(broker.EmbeddedConfig{StoreDir: dir, Port: -1})) // in-process only
	defer srv.Shutdown(context.Background())
	nc := must(srv.Connect())
	defer nc.Close()
	js := must(jetstream.New(nc))
	must(bus.Provision(ctx, js, bus.ProvisionConfig{}))
	st := must(store.Open(ctx, js, store.Config{}))

	// An agent whose scripted model calls a tool, then answers; it needs
	// no model API.
	cat := must(catalog.Parse([]byte(`
agents:
  - name: calc
    model: scripted
    tools: [calculator]
    script:
      - call: {name: calculator, args: {expression: "12*7"}, id: c1}
      - text: 12*7 is 84.
`), catalog.Options{Tools: must(tools.Builtin(tools.Config{Workspace: dir}))}))

	// The fleet side: the API service and a worker.
	svc := service.New(must(service.NewAPI(service.Config{Conn: nc, Store: st, Catalog: cat})))
	check(svc.Start(ctx))
	defer svc.Stop(context.Background())
	w := must(worker.New(worker.Config{Conn: nc, Catalog: cat, ID: "w1", SkipProvision: true}))
	check(w.Start(ctx))
	defer w.Stop(context.Background())

	// The client side.
	c := must(client.New(nc, client.Options{}))
	rep := must(c.Submit(ctx, &bus.RunRequest{Agent: "calc", Input: bus.TextInput("What is 12*7?")}))
	fmt.Println("submitted:", rep.Status)

	tail := must(c.Tail(ctx, rep.RunID, bus.FromStart()))
	defer tail.Close(context.Background())
	for env, err := range tail.All(ctx) {
		check(err)
		ev := must(env.Event())
		switch e := ev.(type) {
		case *loop.ToolCallCompleted:
			fmt.Printf("%d %s %s\n", env.Seq, env.Type, e.Output)
		case *loop.RunCompleted:
			fmt.Printf("%d %s %v\n", env.Seq, env.Type, e.Output)
		case *loop.TextDelta:
			fmt.Printf("%d %s %q\n", env.Seq, env.Type, e.Delta)
		default:
			fmt.Printf("%d %s\n", env.Seq, env.Type)
		}
	}

	// The status is written just after the terminal event.
	for {
		status := must(c.Status(ctx, rep.RunID))
		if status.Status == bus.StateCompleted {
			fmt.Println("status:", status.Status, "turns:", status.Turns, "tokens:", status.Result.Usage.TotalTokens)
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Output:
	// submitted: queued
	// 1 run_started
	// 2 turn_started
	// 3 message_completed
	// 4 tool_call_started
	// 5 tool_call_completed 84
	// 6 turn_ended
	// 7 turn_started
	// 8 text_delta "12*7 "
	// 9 text_delta "is "
	// 10 text_delta "84."
	// 11 message_completed
	// 12 turn_ended
	// 13 run_completed 12*7 is 84.
	// status: completed turns: 2 tokens: 4
}

func must[T any](v T, err error) T {
	check(err)
	return v
}

func check(err error) {
	if err != nil {
		panic(err)
	}
}
