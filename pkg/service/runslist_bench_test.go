package service_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/lovia-fleet/lovia/pkg/broker"
	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/client"
	"github.com/lovia-fleet/lovia/pkg/lifecycle"
	"github.com/lovia-fleet/lovia/pkg/service"
	"github.com/lovia-fleet/lovia/pkg/store"
)

// BenchmarkRunsListAPI is a listing end to end — the client's request over
// NATS, the API service, the run index, the reply — against an embedded
// server holding 10,000 or 100,000 run records (20 agents; 90% completed,
// 5% failed, 5% running), the index loaded.
func BenchmarkRunsListAPI(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("runs=%d", n), func(b *testing.B) {
			ctx := context.Background()
			srv, err := broker.StartEmbedded(broker.EmbeddedConfig{StoreDir: b.TempDir(), Port: -1})
			if err != nil {
				b.Fatal(err)
			}
			defer srv.Shutdown(context.Background())
			nc, err := srv.Connect()
			if err != nil {
				b.Fatal(err)
			}
			defer nc.Close()
			js, _ := jetstream.New(nc)
			if _, err := bus.Provision(ctx, js, bus.ProvisionConfig{}); err != nil {
				b.Fatal(err)
			}
			st, err := store.Open(ctx, js, store.Config{})
			if err != nil {
				b.Fatal(err)
			}
			var wg sync.WaitGroup
			for w := range 8 {
				wg.Go(func() {
					for i := w; i < n; i += 8 {
						r := lifecycle.Submit(lifecycle.Submission{RunID: fmt.Sprintf("run-%07d", i), Agent: fmt.Sprintf("agent-%02d", i%20)})
						r.Status, r.Worker, r.Attempt = store.RunCompleted, fmt.Sprintf("w%d", i%10), 1
						switch i % 20 {
						case 0:
							r.Status = store.RunFailed
						case 1:
							r.Status = store.RunRunning
						}
						if _, err := st.Runs().Create(ctx, r); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			api, err := service.NewAPI(service.Config{Conn: nc, Store: st})
			if err != nil {
				b.Fatal(err)
			}
			svc := service.New(api)
			if err := svc.Start(ctx); err != nil {
				b.Fatal(err)
			}
			defer svc.Stop(ctx)
			c, err := client.New(nc, client.Options{})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := c.ListRuns(ctx, nil); err != nil { // loads the index
				b.Fatal(err)
			}
			for _, tc := range []struct {
				name string
				req  bus.RunsListRequest
			}{
				{"all", bus.RunsListRequest{}},
				{"status=running", bus.RunsListRequest{Status: []string{"running"}}},
				{"agent+status=failed", bus.RunsListRequest{Agent: "agent-00", Status: []string{"failed"}}},
				{"worker", bus.RunsListRequest{Worker: "w3"}},
			} {
				b.Run(tc.name, func(b *testing.B) {
					for b.Loop() {
						if _, err := c.ListRuns(ctx, &tc.req); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		})
	}
}
