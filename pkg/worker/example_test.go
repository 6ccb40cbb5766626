package worker_test

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

// Example runs a worker on an in-process NATS server: Start provisions the
// streams and buckets and starts claiming runs; a run submitted through
// the API service is executed by the worker, and its answer is read from
// the run's terminal event and its status.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dir := must(os.MkdirTemp("", "lovia-example"))
	defer os.RemoveAll(dir)
	srv := must(broker.StartEmbedded(broker.EmbeddedConfig{StoreDir: dir, Port: -1})) // in-process only
	defer srv.Shutdown(context.Background())
	nc := must(srv.Connect())
	defer nc.Close()

	// The catalog: a scripted agent that echoes a note, then answers.
	cat := must(catalog.Parse([]byte(`
agents:
  - name: support
    model: scripted
    tools: [echo]
    script:
      - call: {name: echo, args: {text: "ticket 42 reopened"}, id: c1}
      - text: I reopened ticket 42.
`), catalog.Options{Tools: must(tools.Builtin(tools.Config{Workspace: dir}))}))

	// The worker provisions the streams and buckets when it starts.
	w := must(worker.New(worker.Config{Conn: nc, Catalog: cat, ID: "w1"}))
	check(w.Start(ctx))
	defer w.Stop(context.Background())

	// The API service (run by every worker process and gateway) accepts
	// submissions and answers status requests.
	st := must(store.Open(ctx, must(jetstream.New(nc)), store.Config{}))
	svc := service.New(must(service.NewAPI(service.Config{Conn: nc, Store: st, Catalog: cat})))
	check(svc.Start(ctx))
	defer svc.Stop(context.Background())

	c := must(client.New(nc, client.Options{}))
	rep := must(c.Submit(ctx, &bus.RunRequest{RunID: "run-1", Agent: "support", Input: bus.TextInput("Please reopen ticket 42.")}))
	tail := must(c.Tail(ctx, rep.RunID))
	defer tail.Close(context.Background())
	for env, err := range tail.All(ctx) {
		check(err)
		ev := must(env.Event())
		switch e := ev.(type) {
		case *loop.ToolCallCompleted:
			fmt.Println("tool:", e.Output)
		case *loop.RunCompleted:
			fmt.Println("answer:", e.Output)
		}
	}
	for {
		status := must(c.Status(ctx, rep.RunID))
		if status.Status == bus.StateCompleted {
			fmt.Printf("%s %s by %s after %d turns\n", status.RunID, status.Status, status.Worker, status.Turns)
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Output:
	// tool: ticket 42 reopened
	// answer: I reopened ticket 42.
	// run-1 completed by w1 after 2 turns
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
