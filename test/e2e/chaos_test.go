package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/client"
	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/store"
)

// TestChaosRepeatedKills: three `lovia worker` processes run 24 scripted
// runs, submitted in waves, with tools that append to a file; every 700 ms
// one worker, chosen at random, is killed with SIGKILL and a fresh one
// started, five times. Every
// run still completes exactly once (contiguous seqs, one terminal event),
// its stored transcript holds each tool result once, and no tool call ran
// more often than the kills could explain.
func TestChaosRepeatedKills(t *testing.T) {
	srv, nc, js := startNATS(t)
	ctx := context.Background()

	const runs, kills = 24, 5
	agents := slowAgents(t, runs, 600, 600)
	workspace := t.TempDir()
	live := map[string]*proc{}
	next := 0
	spawn := func() {
		next++
		id := fmt.Sprintf("w%d", next)
		live[id] = startWorker(t, srv.ClientURL(), agents, workspace, id)
	}
	for range 3 {
		spawn()
	}
	c, err := client.New(nc, client.Options{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, err := c.Agents(ctx)
		return err == nil
	}, 20*time.Second, 50*time.Millisecond)

	// Runs arrive in waves, one before each kill, so that every kill finds
	// runs in flight (each lasts about 1.5 s).
	var ids []string
	submit := func(n int) {
		for range n {
			i := len(ids)
			rep, err := c.Submit(ctx, &bus.RunRequest{Agent: fmt.Sprintf("slow%d", i), Input: bus.TextInput("go")})
			require.NoError(t, err)
			ids = append(ids, rep.RunID)
		}
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	for range kills {
		submit(runs / (kills + 1))
		time.Sleep(700 * time.Millisecond)
		victim := pickVictim(t, js, live, rng)
		p := live[victim]
		require.NoError(t, p.cmd.Process.Signal(syscall.SIGKILL))
		_, _ = p.cmd.Process.Wait()
		delete(live, victim)
		t.Logf("killed %s", victim)
		spawn()
	}
	submit(runs - len(ids))

	st, err := store.Open(ctx, js, store.Config{})
	require.NoError(t, err)
	resumed := 0
	for i, id := range ids {
		label := fmt.Sprintf("run %d (%s)", i, id)
		for _, env := range completedRun(t, c, id, label) {
			if env.Type == bus.EventRunResumed {
				resumed++
			}
		}
		snap, err := st.Checkpointer().Load(ctx, id)
		require.NoError(t, err, label)
		results := map[string]int{}
		for _, e := range snap.Entries {
			if e.Kind == loop.KindToolResult {
				results[e.CallID]++
			}
		}
		require.Equal(t, map[string]int{"a": 1, "s1": 1, "b": 1, "s2": 1, "c": 1}, results, "%s: each tool result stored once", label)
	}
	t.Logf("%d kills, %d run_resumed events", kills, resumed)
	require.Positive(t, resumed, "no run was interrupted by the kills")

	counts := map[string]int{}
	for _, l := range readLines(t, filepath.Join(workspace, "log.txt")) {
		counts[l]++
	}
	for i := range ids {
		for _, call := range []string{"a", "b", "c"} {
			line := fmt.Sprintf("r%d-%s", i, call)
			require.GreaterOrEqual(t, counts[line], 1, "%s ran", line)
			require.LessOrEqual(t, counts[line], 1+kills, "%s ran more often than the kills explain", line)
		}
	}
}

// pickVictim picks a random live worker, preferring those that hold runs
// (their holdings records, hold.<worker> in the runs bucket).
func pickVictim(t *testing.T, js jetstream.JetStream, live map[string]*proc, rng *rand.Rand) string {
	t.Helper()
	var busy, all []string
	kv, err := js.KeyValue(context.Background(), "lovia_runs")
	require.NoError(t, err)
	holds := map[string]bool{}
	if lister, err := kv.ListKeysFiltered(context.Background(), "hold.*"); err == nil {
		for k := range lister.Keys() {
			holds[strings.TrimPrefix(k, "hold.")] = true
		}
	}
	for id := range live {
		all = append(all, id)
		if holds[id] {
			busy = append(busy, id)
		}
	}
	slices.Sort(all)
	slices.Sort(busy)
	if len(busy) > 0 {
		return busy[rng.IntN(len(busy))]
	}
	return all[rng.IntN(len(all))]
}
