package lovia

import (
	"context"
	"fmt"
	"os"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/lovia-fleet/lovia/pkg/broker"
	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/catalog"
	"github.com/lovia-fleet/lovia/pkg/client"
	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/provider"
	"github.com/lovia-fleet/lovia/pkg/service"
	"github.com/lovia-fleet/lovia/pkg/store"
	"github.com/lovia-fleet/lovia/pkg/worker"
)

// Once runs one run of agent on an in-process fleet — an embedded NATS
// server reachable only from this process, with a temporary store, one
// worker and the API — and returns the run's output (a Go value of the
// agent's output type, as JSON decodes it, or its text). For tests and
// examples: the run goes through the fleet's path (a submission,
// checkpoints, events) as on a real one.
func Once(ctx context.Context, cfg Config, agent, input string) (any, error) {
	cat, err := catalog.FromAgents(cfg.Agents, catalog.CodeSettings{MaxTurns: cfg.MaxTurns, ApprovalTimeout: cfg.ApprovalTimeout})
	if err != nil {
		return nil, fmt.Errorf("lovia: %w", err)
	}
	dir, err := os.MkdirTemp("", "lovia-once")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	srv, err := broker.StartEmbedded(broker.EmbeddedConfig{StoreDir: dir, Port: -1})
	if err != nil {
		return nil, err
	}
	defer srv.Shutdown(context.WithoutCancel(ctx))
	nc, err := srv.Connect()
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	reg := provider.NewRegistry(provider.Config{Getenv: os.Getenv})
	w, err := worker.New(worker.Config{Conn: nc, Catalog: cat, Deps: cfg.Deps, ID: "once", Registry: reg})
	if err != nil {
		return nil, err
	}
	if err := w.Start(ctx); err != nil {
		return nil, err
	}
	defer w.Stop(context.WithoutCancel(ctx))
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	st, err := store.Open(ctx, js, store.Config{})
	if err != nil {
		return nil, err
	}
	api, err := service.NewAPI(service.Config{Conn: nc, Store: st, Catalog: cat})
	if err != nil {
		return nil, err
	}
	svc := service.New(api)
	if err := svc.Start(ctx); err != nil {
		return nil, err
	}
	defer svc.Stop(context.WithoutCancel(ctx))
	c, err := client.New(nc, client.Options{})
	if err != nil {
		return nil, err
	}
	rep, err := c.Submit(ctx, &bus.RunRequest{Agent: agent, Input: bus.TextInput(input)})
	if err != nil {
		return nil, err
	}
	tail, err := c.Tail(ctx, rep.RunID)
	if err != nil {
		return nil, err
	}
	defer tail.Close(context.WithoutCancel(ctx))
	for env, err := range tail.All(ctx) {
		if err != nil {
			return nil, err
		}
		ev, err := env.Event()
		if err != nil {
			return nil, err
		}
		switch e := ev.(type) {
		case *loop.RunCompleted:
			return e.Output, nil
		case *loop.RunFailed:
			return nil, fmt.Errorf("run %s failed: %s", rep.RunID, e.Error.Message)
		}
	}
	return nil, fmt.Errorf("run %s: its events ended without a terminal one", rep.RunID)
}
