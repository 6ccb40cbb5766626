package fleet_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/lovia-fleet/lovia/pkg/broker"
	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/fleet"
)

// A worker announces the agents it serves; the API's view answers whether
// the live fleet serves an agent.
func Example() {
	dir, _ := os.MkdirTemp("", "fleet-example")
	defer os.RemoveAll(dir)
	srv, _ := broker.StartEmbedded(broker.EmbeddedConfig{StoreDir: dir, Port: -1})
	ctx := context.Background()
	defer srv.Shutdown(ctx)
	nc, _ := srv.Connect()
	defer nc.Close()
	js, _ := jetstream.New(nc)

	reg, err := fleet.Ensure(ctx, js, bus.Names{}, 1)
	if err != nil {
		fmt.Println(err)
		return
	}
	ann := fleet.NewAnnouncer(reg, fleet.Member{Worker: "w1", Agents: []bus.AgentInfo{{Name: "support"}}}, 2*time.Second, nil)
	if err := ann.Start(ctx); err != nil {
		fmt.Println(err)
		return
	}
	view := fleet.NewView(reg, time.Second)
	ok, _, _ := view.Serves(ctx, "support")
	fmt.Println("support served:", ok)
	ok, live, _ := view.Serves(ctx, "billing")
	fmt.Println("billing served:", ok, "live agents:", live)
	_ = ann.Stop(ctx)
	ms, _ := reg.Members(ctx)
	fmt.Println("members after stop:", len(ms))
	// Output:
	// support served: true
	// billing served: false live agents: [support]
	// members after stop: 0
}
