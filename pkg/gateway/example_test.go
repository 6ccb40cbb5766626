package gateway_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/lovia-fleet/lovia/pkg/broker"
	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/catalog"
	"github.com/lovia-fleet/lovia/pkg/client"
	"github.com/lovia-fleet/lovia/pkg/gateway"
	"github.com/lovia-fleet/lovia/pkg/service"
	"github.com/lovia-fleet/lovia/pkg/store"
	"github.com/lovia-fleet/lovia/pkg/tools"
	"github.com/lovia-fleet/lovia/pkg/worker"
)

// A fleet in one process — embedded NATS, a worker, the gateway — and a
// run submitted over HTTP with its events streamed back as SSE.
func Example() {
	ctx := context.Background()
	dir := must(os.MkdirTemp("", "lovia-example"))
	defer os.RemoveAll(dir)
	srv := must(broker.StartEmbedded(broker.EmbeddedConfig{StoreDir: dir}))
	defer srv.Shutdown(ctx)
	nc := must(srv.Connect())
	defer nc.Close()
	js := must(jetstream.New(nc))
	must(bus.Provision(ctx, js, bus.ProvisionConfig{}))
	st := must(store.Open(ctx, js, store.Config{}))

	// An agent whose scripted model answers without calling a model API.
	cat := must(catalog.Parse([]byte(`
agents:
  - name: oracle
    model: scripted
    script:
      - text: Forty-two.
`), catalog.Options{Tools: must(tools.Builtin(tools.Config{}))}))
	w := must(worker.New(worker.Config{Conn: nc, Catalog: cat, ID: "w1", SkipProvision: true}))
	check(w.Start(ctx))
	defer w.Stop(ctx)

	api := must(service.NewAPI(service.Config{Conn: nc, Store: st, Catalog: cat}))
	gw := must(gateway.New(gateway.Config{API: api, Client: must(client.New(nc, client.Options{})), Conn: nc, Addr: "127.0.0.1:0"}))
	check(gw.Start(ctx))
	defer gw.Stop(ctx)

	// curl -N -H 'Accept: text/event-stream' -d '{"agent": "oracle", "input": "…"}' http://…/v1/runs
	req := must(http.NewRequest(http.MethodPost, "http://"+gw.Addr()+"/v1/runs",
		strings.NewReader(`{"agent": "oracle", "input": "The answer?"}`)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp := must((&http.Client{Transport: tr}).Do(req))
	defer resp.Body.Close()

	sc := bufio.NewScanner(resp.Body)
	id := ""
	for sc.Scan() {
		field, value, _ := strings.Cut(sc.Text(), ": ")
		switch field {
		case "id":
			id = value
		case "event":
			fmt.Println(id, value)
		}
	}
	// Output:
	// 1 run_started
	// 2 turn_started
	// 3 text_delta
	// 4 message_completed
	// 5 turn_ended
	// 6 run_completed
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
