package service_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/lovia-fleet/lovia/pkg/broker"
	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/catalog"
	"github.com/lovia-fleet/lovia/pkg/client"
	"github.com/lovia-fleet/lovia/pkg/service"
	"github.com/lovia-fleet/lovia/pkg/store"
	"github.com/lovia-fleet/lovia/pkg/tools"
)

// BenchmarkSubmit is one submit through the NATS API (the client's
// request, the service's validation, the index record's create, the
// publish to the runs stream, the reply) on an embedded server, with no
// worker claiming. A first submission writes no request sequence: its
// claim records it.
func BenchmarkSubmit(b *testing.B) {
	ctx := context.Background()
	dir := b.TempDir()
	srv, err := broker.StartEmbedded(broker.EmbeddedConfig{StoreDir: dir, Port: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Shutdown(context.Background())
	nc, err := srv.Connect()
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := bus.Provision(ctx, js, bus.ProvisionConfig{}); err != nil {
		b.Fatal(err)
	}
	st, err := store.Open(ctx, js, store.Config{})
	if err != nil {
		b.Fatal(err)
	}
	ts, err := tools.Builtin(tools.Config{Workspace: dir})
	if err != nil {
		b.Fatal(err)
	}
	cat, err := catalog.Parse([]byte("agents:\n  - name: oracle\n    model: scripted\n    script:\n      - text: Forty-two.\n"), catalog.Options{Tools: ts})
	if err != nil {
		b.Fatal(err)
	}
	api, err := service.NewAPI(service.Config{Conn: nc, Store: st, Catalog: cat})
	if err != nil {
		b.Fatal(err)
	}
	svc := service.New(api)
	if err := svc.Start(ctx); err != nil {
		b.Fatal(err)
	}
	defer svc.Stop(context.Background())
	c, err := client.New(nc, client.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		req := &bus.RunRequest{RunID: "bench-" + strconv.Itoa(i), Agent: "oracle", Input: bus.TextInput("The answer?")}
		if _, err := c.Submit(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}
