package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/internal/fleettest"
	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/catalog"
	"github.com/lovia-fleet/lovia/pkg/fleet"
	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/store"
	"github.com/lovia-fleet/lovia/pkg/worker"
)

// versionWorker is a worker config of build id build that takes over a
// dead worker's runs fast, and lets a run be given back many times (so
// that routing, not the delivery budget, decides who resumes it).
func versionWorker(t *testing.T, f *fleettest.Fleet, id, build string) worker.Config {
	return withConfig(workerConfig(t, f, id), func(c *worker.Config) {
		c.BuildID = build
		c.TakeoverInterval, c.TakeoverGrace = 100*time.Millisecond, 300*time.Millisecond
		c.SkipProvision = false
		c.Provision.Workers.MaxDeliver = 100
	})
}

// crashWorker cuts w's connection (conn) and ends its goroutines: it can
// no longer ack, heartbeat, publish or withdraw, as after a kill -9.
func crashWorker(t *testing.T, w *worker.Worker, conn interface{ Close() }) {
	conn.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.NoError(t, w.Stop(ctx))
}

// startGated submits n runs of the gated agent and waits until each asks
// for its approval (on the one worker live then).
func startGated(t *testing.T, f *fleettest.Fleet, n int) []string {
	var ids []string
	for range n {
		rep, err := f.Client.Submit(context.Background(), &bus.RunRequest{Agent: "gated", Input: bus.TextInput("deploy")})
		require.NoError(t, err)
		ids = append(ids, rep.RunID)
	}
	for _, id := range ids {
		waitEvent(t, f, id, loop.EventApprovalRequired, 10*time.Second)
	}
	return ids
}

// waitServes waits until the fleet registry lists worker id serving agent
// at version.
func waitServes(t *testing.T, f *fleettest.Fleet, id, agent, version string) {
	t.Helper()
	reg, err := fleet.Open(context.Background(), f.JS, bus.Names{})
	require.NoError(t, err)
	var seen []fleet.Member
	ok := waitFor(10*time.Second, func() bool {
		seen, _ = reg.Members(context.Background())
		for _, m := range seen {
			if m.Worker == id && m.ServesVersion(agent, version) {
				return true
			}
		}
		return false
	})
	require.True(t, ok, "worker %s never announced %s at version %s: %+v", id, agent, version, seen)
}

// TestRunRecordsItsVersion: run_started and the run record carry the
// claiming worker's version of the agent (its digest and build id), and
// the worker announces it.
func TestRunRecordsItsVersion(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t, fleettest.Options{AgentsYAML: fleetAgents, Workers: -1})
	f.StartWorker(versionWorker(t, f, "wA", "b1"))
	ag, _ := f.Catalog.Get("quick")
	v1 := catalog.VersionOf(ag, "b1")
	require.Regexp(t, `^[0-9a-f]{12}\+b1$`, v1)
	waitServes(t, f, "wA", "quick", v1)
	wr, err := f.Client.Workers(context.Background())
	require.NoError(t, err)
	require.Len(t, wr.Workers, 1)
	require.Equal(t, v1, wr.Workers[0].AgentVersions["quick"], "the workers list gives each agent's version")

	rep, err := f.Client.Submit(context.Background(), &bus.RunRequest{Agent: "quick", Input: bus.TextInput("hi")})
	require.NoError(t, err)
	envs := f.Events(rep.RunID, 10*time.Second)
	rs := fleettest.Event[*bus.RunStarted](t, envs[0])
	require.Equal(t, v1, rs.Version)
	e, err := f.Store.Runs().Get(context.Background(), rep.RunID)
	require.NoError(t, err)
	require.Equal(t, v1, e.Record.Version)
	claims := 0
	for _, a := range e.Record.Attempts {
		if a.Kind == store.StepClaim {
			claims++
			require.Equal(t, v1, a.Version, "the claim step records the claimer's version")
		}
	}
	require.Equal(t, 1, claims)
}

// TestResumeRoutedToItsVersion: runs started on v1 whose worker dies,
// with a v1 worker and a v2 worker live, all resume on the v1 worker (the
// v2 worker gives back those it claims); run_resumed and the history say
// no version changed.
func TestResumeRoutedToItsVersion(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t, fleettest.Options{AgentsYAML: fleetAgents, Workers: -1})
	cfgA := versionWorker(t, f, "wA", "b1")
	a := f.StartWorker(cfgA)
	ag, _ := f.Catalog.Get("gated")
	v1, v2 := catalog.VersionOf(ag, "b1"), catalog.VersionOf(ag, "b2")
	ids := startGated(t, f, 6) // each lands on the v2 worker half the time without routing

	f.StartWorker(versionWorker(t, f, "wB", "b1"))
	f.StartWorker(versionWorker(t, f, "wC", "b2"))
	waitServes(t, f, "wB", "gated", v1)
	waitServes(t, f, "wC", "gated", v2)
	crashWorker(t, a, cfgA.Conn)
	ctx := context.Background()
	for _, id := range ids {
		ar, err := f.Client.Approve(ctx, id, "c1", loop.Approve, "")
		require.NoError(t, err)
		require.True(t, ar.Accepted)
	}
	for _, id := range ids {
		envs := f.Events(id, 20*time.Second)
		checkOneSubmission(t, id, envs)
		resumed := fleettest.OfType(envs, bus.EventRunResumed)
		require.Len(t, resumed, 1, "run %s: %v", id, fleettest.Types(envs))
		rr := fleettest.Event[*bus.RunResumed](t, resumed[0])
		require.Equal(t, "wB", rr.Worker, "run %s started on %s resumed on the %s worker", id, v1, rr.Version)
		require.Equal(t, v1, rr.Version)
		require.Equal(t, v1, rr.StartedVersion)
		require.Equal(t, v1, rr.PreviousVersion)
		require.False(t, rr.VersionChanged())
	}
}

// TestResumeCrossesVersionsWhenOnlyAnotherIsLive: a run started on v1
// whose worker dies, with only a v2 worker live, resumes on it (routing
// is bounded by the old version's liveness), and run_resumed and the
// run's history record the change from v1 to v2.
func TestResumeCrossesVersionsWhenOnlyAnotherIsLive(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t, fleettest.Options{AgentsYAML: fleetAgents, Workers: -1})
	cfgA := versionWorker(t, f, "wA", "b1")
	a := f.StartWorker(cfgA)
	ag, _ := f.Catalog.Get("gated")
	v1, v2 := catalog.VersionOf(ag, "b1"), catalog.VersionOf(ag, "b2")
	ids := startGated(t, f, 1)
	id := ids[0]

	crashWorker(t, a, cfgA.Conn)
	f.StartWorker(versionWorker(t, f, "wC", "b2"))
	ar, err := f.Client.Approve(context.Background(), id, "c1", loop.Approve, "")
	require.NoError(t, err)
	require.True(t, ar.Accepted)
	t0 := time.Now()
	envs := f.Events(id, 20*time.Second)
	t.Logf("resumed and completed %s after the approval", time.Since(t0))
	checkOneSubmission(t, id, envs)
	resumed := fleettest.OfType(envs, bus.EventRunResumed)
	require.Len(t, resumed, 1, "%v", fleettest.Types(envs))
	rr := fleettest.Event[*bus.RunResumed](t, resumed[0])
	require.Equal(t, "wC", rr.Worker)
	require.Equal(t, v2, rr.Version)
	require.Equal(t, v1, rr.StartedVersion)
	require.Equal(t, v1, rr.PreviousVersion)
	require.True(t, rr.VersionChanged())
	require.Equal(t, "done", fleettest.Event[*loop.RunCompleted](t, envs[len(envs)-1]).Output)

	e, err := f.Store.Runs().Get(context.Background(), id)
	require.NoError(t, err)
	require.Equal(t, v1, e.Record.Version, "the record keeps the version the run started on")
	// The claims in the history: wA's on v1, then wC's resume (or
	// takeover, when wC found wA's claim before the reaper released it)
	// on v2.
	var steps []string
	for _, s := range e.Record.Attempts {
		if s.Version != "" {
			kind := s.Kind
			if kind == store.StepTakeover {
				kind = store.StepResume
			}
			steps = append(steps, kind+"@"+s.Worker+"="+s.Version)
		}
	}
	require.Equal(t, []string{"claim@wA=" + v1, "resume@wC=" + v2}, steps, "history %+v", e.Record.Attempts)
}
