// Package fleet holds fleet-level tests that span several packages.
package fleet

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/lovia-fleet/lovia/internal/fleettest"
	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/loop/compaction"
	"github.com/lovia-fleet/lovia/pkg/store"
	"github.com/lovia-fleet/lovia/pkg/worker"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/nats-io/nats.go/jetstream.(*jetStream).resetPendingAcksOnReconnect"))
}

// TestCompactionThroughTheFleet (compaction issue acceptance): a run whose
// tool output exceeds a small configured window completes, emits
// context_compacted, and a later recall_tool_result returns the full output
// from the JetStream object store, which any worker shares.
func TestCompactionThroughTheFleet(t *testing.T) {
	big := strings.Repeat("line of a large tool output\n", 1500) // ~42,000 chars
	digest := compaction.Digest(big)
	agents := fmt.Sprintf(`
agents:
  - name: reader
    model: scripted
    tools: [read_file, echo]
    script:
      - call: {name: read_file, args: {path: big.txt}, id: c1}
      - call: {name: echo, args: {text: small}, id: c2}
      - call: {name: recall_tool_result, args: {ref: %q}, id: c3}
      - text: done
`, digest)
	var results *store.ResultStore
	f := fleettest.Start(t, fleettest.Options{AgentsYAML: agents, Worker: func(c *worker.Config) {
		c.ContextPolicy = compaction.New(compaction.Config{
			ContextWindow:       4000,
			ReserveOutputTokens: 500,
			Stages:              []compaction.Stage{compaction.Offload{KeepLast: compaction.None}, compaction.Clear{}},
			Store:               lazyStore{&results},
		})
	}})
	ctx := context.Background()
	var err error
	results, err = store.OpenResultStore(ctx, f.JS, store.ResultStoreConfig{})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(f.Workspace, "big.txt"), []byte(big), 0o644))

	rep, err := f.Client.Submit(ctx, &bus.RunRequest{Agent: "reader", Input: bus.TextInput("read it")})
	require.NoError(t, err)
	envs := f.Events(rep.RunID, 20*time.Second)
	types := fleettest.Types(envs)
	require.Contains(t, types, "context_compacted")
	require.Equal(t, "run_completed", types[len(types)-1])

	var recalled string
	for _, e := range envs {
		if e.Type != loop.EventToolCallCompleted {
			continue
		}
		ev, err := e.Event()
		require.NoError(t, err)
		if tcc := ev.(*loop.ToolCallCompleted); tcc.Call.ID == "c3" {
			recalled = tcc.Output
		}
	}
	require.Equal(t, big, recalled, "recall_tool_result returns the full output")
	got, ok, err := results.Get(ctx, digest)
	require.NoError(t, err)
	require.True(t, ok, "the offloaded output is in the object store")
	require.Equal(t, big, got)

	// The checkpoint and the stored transcript keep the full output.
	snap, err := f.Store.Checkpointer().Load(ctx, rep.RunID)
	require.NoError(t, err)
	require.Equal(t, big, snap.Entries[2].Output)
}

// lazyStore defers to a result store opened after the fleet started.
type lazyStore struct{ rs **store.ResultStore }

func (l lazyStore) Put(ctx context.Context, k, v string) error { return (*l.rs).Put(ctx, k, v) }
func (l lazyStore) Get(ctx context.Context, k string) (string, bool, error) {
	return (*l.rs).Get(ctx, k)
}
