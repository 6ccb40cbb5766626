package service_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/lovia-fleet/lovia/pkg/broker"
	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/catalog"
	"github.com/lovia-fleet/lovia/pkg/service"
	"github.com/lovia-fleet/lovia/pkg/store"
	"github.com/lovia-fleet/lovia/pkg/tools"
)

// Example serves the API on an in-process NATS server and calls it the
// way any NATS client can (`nats req lovia.api.agents ""`): plain
// requests with JSON bodies, JSON replies, and errors as micro error
// headers with an {"error": …} body.
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
	cat := must(catalog.Parse([]byte(`
agents:
  - name: oracle
    model: scripted
    tools: [calculator]
    script:
      - text: Forty-two.
`), catalog.Options{Tools: must(tools.Builtin(tools.Config{Workspace: dir}))}))

	api := must(service.NewAPI(service.Config{Conn: nc, Store: st, Catalog: cat}))
	svc := service.New(api)
	check(svc.Start(ctx))
	defer svc.Stop(context.Background())

	request := func(subject, body string) {
		rep := must(nc.RequestWithContext(ctx, subject, []byte(body)))
		if code := rep.Header.Get(bus.HeaderServiceErrorCode); code != "" {
			fmt.Printf("%s -> error %s: %s\n", subject, code, rep.Data)
			return
		}
		fmt.Printf("%s -> %s\n", subject, rep.Data)
	}
	request("lovia.api.agents", "")
	// Submit enqueues the run on the RUNS stream for a worker to claim; no
	// worker runs here, so it stays queued.
	request("lovia.api.submit", `{"run_id": "run-1", "agent": "oracle", "input": "The answer?"}`)
	request("lovia.api.run.run-1.status", "")
	request("lovia.api.run.ghost.status", "")
	request("lovia.api.submit", `{"agent": "sphinx", "input": "A riddle?"}`)
	// Output:
	// lovia.api.agents -> {"agents":[{"name":"oracle","model":"scripted","tools":["calculator"],"handoffs":[],"schemas":[{"name":"calculator","description":"Evaluate an arithmetic expression (+ - * / % ^ and parentheses).","parameters":{"type":"object","properties":{"expression":{"type":"string","description":"Arithmetic expression, e.g. (12*7)+3^2.","minLength":1,"maxLength":1000}},"required":["expression"]}}]}]}
	// lovia.api.submit -> {"run_id":"run-1","events_subject":"lovia.events.run-1","agent":"oracle","status":"queued"}
	// lovia.api.run.run-1.status -> {"run_id":"run-1","agent":"oracle","session_id":"","status":"queued","worker":"","attempt":0,"turns":0,"waiting":"no worker serves agent \"oracle\"; the run starts when a worker whose agents file defines it joins the fleet"}
	// lovia.api.run.ghost.status -> error 404: {"error":{"type":"NotFound","message":"run ghost not found","hint":"check the id: the fleet never saw it, or the run ended longer ago than the retention age (lovia worker --retention, 7 days by default) and expired; lovia runs list (GET /v1/runs) lists the runs the fleet knows"}}
	// lovia.api.submit -> error 404: {"error":{"type":"UnknownAgent","message":"unknown agent \"sphinx\"","hint":"use one of the agents the fleet serves: oracle; or start a worker whose agents file defines sphinx"}}
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
