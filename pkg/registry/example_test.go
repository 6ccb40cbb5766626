package registry_test

import (
	"context"
	"fmt"
	"os"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/lovia-fleet/lovia/pkg/broker"
	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/catalog"
	"github.com/lovia-fleet/lovia/pkg/registry"
)

// Apply an agent, update it, and read both revisions; a worker's Source
// serves the current one.
func Example() {
	dir, _ := os.MkdirTemp("", "registry-example")
	defer os.RemoveAll(dir)
	srv, _ := broker.StartEmbedded(broker.EmbeddedConfig{StoreDir: dir, Port: -1})
	ctx := context.Background()
	defer srv.Shutdown(ctx)
	nc, _ := srv.Connect()
	defer nc.Close()
	js, _ := jetstream.New(nc)

	reg, err := registry.Ensure(ctx, js, bus.Names{}, 1)
	if err != nil {
		fmt.Println(err)
		return
	}
	greeter := func(text string) catalog.Spec {
		return catalog.Spec{Name: "greeter", Model: "scripted", Script: []catalog.ScriptStep{{Text: text}}}
	}
	first, _ := reg.Apply(ctx, []catalog.Spec{greeter("hello")}, false, catalog.Options{})
	second, _ := reg.Apply(ctx, []catalog.Spec{greeter("good morning")}, false, catalog.Options{})
	fmt.Println("created", first.Created, "updated", second.Updated)

	old, _ := reg.GetRevision(ctx, "greeter", first.Revision)
	cur, _ := reg.Get(ctx, "greeter")
	fmt.Println(old.Spec.Script[0].Text, "->", cur.Spec.Script[0].Text)

	src := registry.NewSource(reg, catalog.Options{}, nil, nil)
	if err := src.Start(ctx); err != nil {
		fmt.Println(err)
		return
	}
	defer src.Stop(ctx)
	fmt.Println("serving", src.Served())
	// Output:
	// created [greeter] updated [greeter]
	// hello -> good morning
	// serving [greeter]
}
