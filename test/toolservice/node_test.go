package toolservice_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/internal/fleettest"
	"github.com/lovia-fleet/lovia/internal/mcptest"
	"github.com/lovia-fleet/lovia/pkg/broker"
	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/catalog"
	"github.com/lovia-fleet/lovia/pkg/client"
	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/service"
	"github.com/lovia-fleet/lovia/pkg/store"
	"github.com/lovia-fleet/lovia/pkg/tools"
	"github.com/lovia-fleet/lovia/pkg/toolsvc"
	"github.com/lovia-fleet/lovia/pkg/worker"
)

const agents = `
agents:
  - name: counter
    model: scripted
    tools: ["texttools__*"]
    script:
      - call: {name: texttools__word_count, args: {text: "the quick brown fox"}}
      - call: {name: texttools__shout, args: {text: "  "}}
      - text: done
`

// startNode starts the example Node.js tool service against url and stops
// it (SIGTERM) at cleanup.
func startNode(t *testing.T, url string) {
	t.Helper()
	dir := filepath.Join(mcptest.Root(t), "examples", "tool-service-node")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@nats-io", "services")); err != nil {
		t.Fatalf("the Node tool service's packages are not installed (%v): run `make npm-deps`", err)
	}
	cmd := exec.Command("node", "index.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "NATS_URL="+url)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		t.Log("node tool service stderr:\n" + stderr.String())
	})
}

func TestAgentCallsNodeToolService(t *testing.T) {
	srv, err := broker.StartEmbedded(broker.EmbeddedConfig{StoreDir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	connect := func() *nats.Conn {
		nc, err := nats.Connect(srv.ClientURL())
		require.NoError(t, err)
		t.Cleanup(nc.Close)
		return nc
	}
	nc := connect()
	startNode(t, srv.ClientURL())

	// The worker's registry discovers the Node service.
	reg, err := toolsvc.NewRegistry(toolsvc.RegistryConfig{Conn: nc, Refresh: time.Hour, Caller: toolsvc.CallerConfig{
		CallOf: func(_ context.Context, rc *loop.RunContext) toolsvc.Call {
			return toolsvc.Call{RunID: rc.RunID, Agent: rc.Agent().Name}
		},
	}})
	require.NoError(t, err)
	require.NoError(t, reg.Start(context.Background()))
	t.Cleanup(func() { _ = reg.Stop(context.Background()) })
	require.Eventually(t, func() bool {
		_ = reg.Refresh(context.Background())
		return reg.Has("texttools")
	}, 30*time.Second, 20*time.Millisecond, "waiting for the Node tool service to be discovered")
	si := reg.Services()[0]
	require.Equal(t, 1, si.Instances)
	require.Equal(t, "1.0.0", si.Version)
	require.Len(t, si.Tools, 2)
	require.Equal(t, "lovia.tools.texttools.shout", si.Tools[0].Subject)
	require.Contains(t, string(si.Tools[1].Schema), `"required":["text"]`)

	ts, err := tools.Builtin(tools.Config{Workspace: t.TempDir()})
	require.NoError(t, err)
	cat, err := catalog.Parse([]byte(agents), catalog.Options{Tools: ts, Registry: &loop.Registry{}, Services: reg})
	require.NoError(t, err)

	ctx := context.Background()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	_, err = bus.Provision(ctx, js, bus.ProvisionConfig{})
	require.NoError(t, err)
	st, err := store.Open(ctx, js, store.Config{})
	require.NoError(t, err)
	api, err := service.NewAPI(service.Config{Conn: nc, Store: st, Catalog: cat})
	require.NoError(t, err)
	svc := service.New(api)
	require.NoError(t, svc.Start(ctx))
	t.Cleanup(func() { _ = svc.Stop(context.Background()) })
	w, err := worker.New(worker.Config{Conn: connect(), Catalog: cat, Registry: &loop.Registry{}, ID: "w1", SkipProvision: true})
	require.NoError(t, err)
	require.NoError(t, w.Start(ctx))
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		_ = w.Stop(sctx)
	})

	c, err := client.New(nc, client.Options{})
	require.NoError(t, err)
	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	rep, err := c.Submit(rctx, &bus.RunRequest{Agent: "counter", Input: bus.TextInput("count")})
	require.NoError(t, err)
	tail, err := c.Tail(rctx, rep.RunID, bus.FromStart())
	require.NoError(t, err)
	defer tail.Close(context.Background())
	var envs []*bus.Envelope
	for env, err := range tail.All(rctx) {
		require.NoError(t, err)
		envs = append(envs, env)
	}
	require.Equal(t, loop.EventRunCompleted, envs[len(envs)-1].Type, "events: %v", fleettest.Types(envs))
	var res []*loop.ToolCallCompleted
	for _, e := range fleettest.OfType(envs, loop.EventToolCallCompleted) {
		res = append(res, fleettest.Event[*loop.ToolCallCompleted](t, e))
	}
	require.Len(t, res, 2)
	require.Equal(t, "4 words", res[0].Output)
	require.False(t, res[0].IsError)
	// The service's error reply is an error result the model sees.
	require.True(t, res[1].IsError)
	require.Contains(t, res[1].Output, "nothing to shout: give some text")

	// A raw caller may send anything: the service answers 400 naming what
	// is wrong, and keeps serving.
	for _, tc := range []struct{ body, want string }{
		{`not json`, "the arguments must be a JSON object"},
		{`42`, "the arguments must be a JSON object"},
		{`null`, "the arguments must be a JSON object"},
		{`{}`, `"text" is required`},
		{`{"text": 7}`, `"text" must be a string`},
	} {
		reply, err := nc.Request("lovia.tools.texttools.shout", []byte(tc.body), 10*time.Second)
		require.NoError(t, err, "raw call with %s", tc.body)
		require.Equal(t, toolsvc.CodeInvalidArguments, reply.Header.Get(bus.HeaderServiceErrorCode), "raw call with %s", tc.body)
		require.Contains(t, reply.Header.Get(bus.HeaderServiceError), tc.want, "raw call with %s", tc.body)
	}
	reply, err := nc.Request("lovia.tools.texttools.shout", []byte(`{"text":"hi"}`), 10*time.Second)
	require.NoError(t, err)
	require.Equal(t, "HI!", string(reply.Data), "the service serves on after bad calls")
}
