package memory_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/internal/fleettest"
	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/catalog"
	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/loop/scripted"
	"github.com/lovia-fleet/lovia/pkg/plugins/memory"
	"github.com/lovia-fleet/lovia/pkg/worker"
)

const fleetAgents = `
agents:
  - name: keeper
    model: scripted
    plugins:
      memory: {scope: user}
    script:
      - call: {name: remember, id: m1, args: {text: Allergic to peanuts.}}
      - text: Noted.
      - text: No peanuts, then.
`

// TestMemoryAcrossWorkers: a note written by a run on worker 1 is in the
// system prompt of the user's next run, on worker 2 — worker 1 stopped in
// between. Each worker has its own NATS
// connection and catalog, as separate processes would.
func TestMemoryAcrossWorkers(t *testing.T) {
	f := fleettest.Start(t, fleettest.Options{AgentsYAML: fleetAgents, Workers: -1})
	ctx := context.Background()
	start := func(id string) (*worker.Worker, *scripted.Provider) {
		nc := f.Connect()
		js, err := jetstream.New(nc)
		require.NoError(t, err)
		cat, err := catalog.Parse([]byte(fleetAgents), catalog.Options{Plugins: catalog.PluginStores{JetStream: js}})
		require.NoError(t, err)
		a, _ := cat.Get("keeper")
		return f.StartWorker(worker.Config{Conn: nc, Catalog: cat, ID: id, SkipProvision: true}), a.Provider.(*scripted.Provider)
	}
	meta := map[string]any{"user_id": "u-42"}

	w1, _ := start("w1")
	rep, err := f.Client.Submit(ctx, &bus.RunRequest{Agent: "keeper", SessionID: "monday", Metadata: meta, Input: bus.TextInput("I am allergic to peanuts")})
	require.NoError(t, err)
	envs := f.Events(rep.RunID, 30*time.Second)
	require.Equal(t, loop.EventRunCompleted, envs[len(envs)-1].Type, "%v", fleettest.Types(envs))
	stopCtx, cancel := context.WithTimeout(ctx, 15*time.Second)
	require.NoError(t, w1.Stop(stopCtx))
	cancel()

	_, model2 := start("w2")
	// The conversation continues on worker 2 (the script's third step).
	rep2, err := f.Client.Submit(ctx, &bus.RunRequest{Agent: "keeper", SessionID: "monday", Metadata: meta, Input: bus.TextInput("Dinner ideas?")})
	require.NoError(t, err)
	envs = f.Events(rep2.RunID, 30*time.Second)
	require.Equal(t, loop.EventRunCompleted, envs[len(envs)-1].Type, "%v", fleettest.Types(envs))
	var ran string
	for _, e := range envs {
		if e.Type == loop.EventRunStarted {
			ran = fleettest.Event[*bus.RunStarted](t, e).Worker
		}
	}
	require.Equal(t, "w2", ran)
	reqs := model2.Requests()
	require.NotEmpty(t, reqs)
	require.Contains(t, reqs[0].Entries[0].Content, "] Allergic to peanuts.", "worker 2's system prompt holds worker 1's note")

	// The note and both archives are in the fleet's bucket.
	kv, err := f.JS.KeyValue(ctx, bus.Names{}.MemoryBucket())
	require.NoError(t, err)
	keys, err := kv.Keys(ctx)
	require.NoError(t, err)
	tok := memory.ScopeToken("user:u-42")
	require.ElementsMatch(t, []string{
		tok + ".note." + memory.NoteID("Allergic to peanuts."),
		tok + ".archive." + rep.RunID,
		tok + ".archive." + rep2.RunID,
	}, keys)
}
