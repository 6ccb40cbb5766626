package catalog

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/broker"
	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/toolsvc"
)

type addIn struct {
	A int `json:"a"`
	B int `json:"b"`
}

// A tool service on an embedded NATS server, and a registry that has
// discovered it.
func startService(t *testing.T) (*toolsvc.Registry, *nats.Conn) {
	t.Helper()
	srv, err := broker.StartEmbedded(broker.EmbeddedConfig{StoreDir: t.TempDir(), Port: -1})
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	nc, err := srv.Connect()
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	add := loop.NewTool("add", "Add two integers.", func(_ context.Context, _ *loop.RunContext, in addIn) (int, error) { return in.A + in.B, nil })
	sub := loop.NewTool("sub", "Subtract.", func(_ context.Context, _ *loop.RunContext, in addIn) (int, error) { return in.A - in.B, nil })
	svc, err := toolsvc.New(toolsvc.Config{Conn: nc, Name: "mathsvc", Tools: []*loop.Tool{add, sub}})
	require.NoError(t, err)
	require.NoError(t, svc.Start(context.Background()))
	t.Cleanup(func() { _ = svc.Stop(context.Background()) })
	r, err := toolsvc.NewRegistry(toolsvc.RegistryConfig{Conn: nc, Refresh: time.Hour})
	require.NoError(t, err)
	require.NoError(t, r.Start(context.Background()))
	t.Cleanup(func() { _ = r.Stop(context.Background()) })
	require.Eventually(t, func() bool { _ = r.Refresh(context.Background()); return r.Has("mathsvc") }, 10*time.Second, 10*time.Millisecond, "waiting for the registry to discover mathsvc")
	return r, nc
}

func serveMath(t *testing.T, nc *nats.Conn, name string) {
	t.Helper()
	add := loop.NewTool("add", "Add two integers.", func(_ context.Context, _ *loop.RunContext, in addIn) (int, error) { return in.A + in.B, nil })
	svc, err := toolsvc.New(toolsvc.Config{Conn: nc, Name: name, Tools: []*loop.Tool{add}})
	require.NoError(t, err)
	require.NoError(t, svc.Start(context.Background()))
	t.Cleanup(func() { _ = svc.Stop(context.Background()) })
}

func TestToolServiceTools(t *testing.T) {
	t.Parallel()
	o := opts(t)
	reg, nc := startService(t)
	o.Services = reg

	c, err := Parse([]byte(`
agents:
  - name: math
    model: scripted
    tools: ["mathsvc__*"]
    approval: [mathsvc__sub]
    script:
      - call: {name: mathsvc__add, args: {a: 40, b: 2}}
      - text: done
`), o)
	require.NoError(t, err)
	a, _ := c.Get("math")
	require.Equal(t, map[string]bool{"mathsvc__add": false, "mathsvc__sub": true}, toolNames(a))
	res, err := loop.NewRunner(loop.RunnerConfig{}).Run(context.Background(), a.Agent, []loop.Entry{loop.UserText("x")})
	require.NoError(t, err)
	var outputs []string
	for _, e := range res.Entries {
		if e.Kind == loop.KindToolResult {
			outputs = append(outputs, e.Output)
		}
	}
	require.Equal(t, []string{"42"}, outputs)

	_, err = Parse([]byte("agents:\n  - {name: a, model: scripted, tools: [mathsvc__mul], script: [{text: x}]}\n"), o)
	require.ErrorContains(t, err, `unknown tool "mathsvc__mul" (tool service "mathsvc" has: mathsvc__add, mathsvc__sub)`)

	// A service that is not running when the catalog is built: the agent
	// is accepted, and each run checks it; its first run fails clearly.
	c, err = Parse([]byte("agents:\n  - {name: late, model: scripted, tools: [latesvc__add], approval: [latesvc__add], script: [{text: x}]}\n"), o)
	require.NoError(t, err)
	late, _ := c.Get("late")
	_, err = loop.NewRunner(loop.RunnerConfig{}).Run(context.Background(), late.Agent, []loop.Entry{loop.UserText("x")})
	require.ErrorContains(t, err, `tool "latesvc__add": no tool service "latesvc" is running (running: mathsvc)`)
	require.ErrorContains(t, err, "start the tool service")

	// Once it runs, the next run discovers it (the registry refreshes
	// hourly here) and gets its tools.
	serveMath(t, nc, "latesvc")
	require.Eventually(t, func() bool {
		found, err := toolsvc.Discover(context.Background(), nc, "lovia", 0)
		return err == nil && len(found) == 2
	}, 10*time.Second, 10*time.Millisecond, "waiting for latesvc to answer discovery")
	require.NoError(t, late.Plugins[0].(loop.PluginSetup).Setup(context.Background(), nil))
	require.Equal(t, map[string]bool{"latesvc__add": true}, toolNames(late))
}
