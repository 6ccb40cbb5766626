package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/client"
	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/registry"
)

// agents apply sends an instructions_file's text to the registry, and a
// registry worker runs an agent whose compaction: section tunes its policy
// with the fleet's results store: a window small enough that the third
// long tool output makes the first one offloaded to lovia_results.
func TestRegistryWorkerRunsAgentSections(t *testing.T) {
	srv := startJetStream(t)
	url := srv.ClientURL()
	env := getenv(map[string]string{"NATS_URL": url})
	ctx := context.Background()

	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "prompts"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "prompts", "lead.md"), []byte("You lead.\n"), 0o644))
	long := strings.Repeat("x", 5000)
	file := filepath.Join(dir, "agents.yaml")
	require.NoError(t, os.WriteFile(file, []byte(`
agents:
  - name: lead
    model: scripted
    instructions_file: prompts/lead.md
    tools: [echo]
    compaction: {context_window: 4000, reserve_output_tokens: 0, compact_at: 50%, compact_to: 25%, keep_recent_tokens: 1, stages: [offload]}
    as_tools: [helper]
    script:
      - call: {name: echo, args: {text: a`+long+`}, id: e1}
      - call: {name: echo, args: {text: b`+long+`}, id: e2}
      - call: {name: echo, args: {text: c`+long+`}, id: e3}
      - call: {name: ask_helper, args: {input: sum up}, id: h1}
      - text: lead is done
  - name: helper
    model: scripted
    script: [{text: summed}]
`), 0o644))
	var out, errb bytes.Buffer
	// Applied from another folder: the file's path is the agents file's.
	require.Equal(t, ExitOK, Main(ctx, []string{"agents", "apply", file}, strings.NewReader(""), &out, &errb, env), errb.String())

	nc, err := nats.Connect(url)
	require.NoError(t, err)
	defer nc.Close()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	reg, err := registry.Ensure(ctx, js, bus.Names{}, 1)
	require.NoError(t, err)
	e, err := reg.Get(ctx, "lead")
	require.NoError(t, err)
	require.Equal(t, "You lead.\n", e.Spec.Instructions, "the registry holds the file's text")

	wctx, stop := context.WithCancel(ctx)
	werr := &syncBuf{}
	done := make(chan int, 1)
	go func() {
		done <- Main(wctx, []string{"worker", "--registry", "--workspace", t.TempDir(), "--log-level", "warn"}, strings.NewReader(""), &syncBuf{}, werr, env)
	}()
	t.Cleanup(func() {
		stop()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("the worker did not stop")
		}
	})
	require.Eventually(t, func() bool { return strings.Contains(werr.String(), "serving agents") }, 20*time.Second, 20*time.Millisecond, werr.String())

	c, err := client.New(nc, client.Options{})
	require.NoError(t, err)
	rep, err := c.Submit(ctx, &bus.RunRequest{Agent: "lead", Input: bus.TextInput("go")})
	require.NoError(t, err)
	tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	tail, err := c.Tail(tctx, rep.RunID, bus.FromStart())
	require.NoError(t, err)
	defer func() { _ = tail.Close(ctx) }()
	var output any
	for env, err := range tail.All(tctx) {
		require.NoError(t, err)
		if env.Type == loop.EventRunCompleted || env.Type == loop.EventRunFailed {
			ev, err := env.Event()
			require.NoError(t, err)
			rc, ok := ev.(*loop.RunCompleted)
			require.True(t, ok, "the run failed: %s", env.Data)
			output = rc.Output
			break
		}
	}
	require.Equal(t, "lead is done", output)

	obj, err := js.ObjectStore(ctx, bus.Names{}.ResultsBucket())
	require.NoError(t, err, "the tuned policy archives in the fleet's results store")
	list, err := obj.List(ctx)
	require.NoError(t, err, "an offloaded output is in the results store")
	require.NotEmpty(t, list)
}
