package toolsvc_test

import (
	"context"
	"fmt"
	"os"

	"github.com/lovia-fleet/lovia/pkg/broker"
	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/toolsvc"
)

// Serve a loop tool as a tool service, discover it and call it as an
// agent's tool.
func Example() {
	dir, _ := os.MkdirTemp("", "toolsvc-example")
	defer os.RemoveAll(dir)
	srv, _ := broker.StartEmbedded(broker.EmbeddedConfig{StoreDir: dir, Port: -1})
	ctx := context.Background()
	defer srv.Shutdown(ctx)
	nc, _ := srv.Connect()
	defer nc.Close()

	type in struct {
		Name string `json:"name"`
	}
	greet := loop.NewTool("greet", "Greet someone.", func(_ context.Context, _ *loop.RunContext, a in) (string, error) {
		return "Hello, " + a.Name + "!", nil
	})
	svc, err := toolsvc.New(toolsvc.Config{Conn: nc, Name: "greeter", Tools: []*loop.Tool{greet}})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := svc.Start(ctx); err != nil {
		fmt.Println(err)
		return
	}
	defer svc.Stop(ctx)

	services, _ := toolsvc.Discover(ctx, nc, "lovia", 0)
	for _, s := range services {
		fmt.Println(s.Name, s.Instances, s.Tools[0].Name, s.Tools[0].Subject)
	}
	tool, _ := toolsvc.Tool(toolsvc.CallerConfig{Conn: nc}, services[0].Tools[0])
	out, err := tool.Func(ctx, nil, []byte(`{"name":"Ada"}`))
	fmt.Println(out, err)
	// Output:
	// greeter 1 greeter__greet lovia.tools.greeter.greet
	// Hello, Ada! <nil>
}
