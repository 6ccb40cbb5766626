package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/internal/fleettest"
	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/worker"
)

// TestStatusAndMetrics checks the status reply's fields through a run's
// life (queued/running with worker and attempt; completed with turns and
// the stored result as run_completed carried it; failed with the error)
// and that the worker registers and moves its Prometheus metrics on the
// registry given in Config.Metrics.
func TestStatusAndMetrics(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	f := fleettest.Start(t, fleettest.Options{AgentsYAML: fleetAgents, Worker: func(c *worker.Config) { c.Metrics = reg }})
	ctx := context.Background()

	// Running: the owner and the attempt are known.
	rep, err := f.Client.Submit(ctx, &bus.RunRequest{Agent: "gated", Input: bus.TextInput("deploy"), SessionID: "sess-1"})
	require.NoError(t, err)
	waitEvent(t, f, rep.RunID, loop.EventApprovalRequired, 10*time.Second)
	st, err := f.Client.Status(ctx, rep.RunID)
	require.NoError(t, err)
	require.Equal(t, bus.StateRunning, st.Status)
	require.Equal(t, "w1", st.Worker)
	require.Equal(t, 1, st.Attempt)
	require.Equal(t, "gated", st.Agent)
	require.Equal(t, "sess-1", st.SessionID)
	require.Nil(t, st.Result)
	require.Nil(t, st.Error)
	require.Equal(t, 1.0, gauge(t, reg, "lovia_runs_in_flight"))
	_, err = f.Client.Approve(ctx, rep.RunID, "c1", loop.Approve, "")
	require.NoError(t, err)

	// Completed: turns and the stored result match run_completed.
	envs := f.Events(rep.RunID, 10*time.Second)
	rc := fleettest.Event[*loop.RunCompleted](t, envs[len(envs)-1])
	require.Eventually(t, func() bool {
		st, err = f.Client.Status(ctx, rep.RunID)
		return err == nil && st.Status == bus.StateCompleted
	}, 5*time.Second, 10*time.Millisecond)
	require.Equal(t, rc.Turns, st.Turns)
	require.Equal(t, 2, st.Turns)
	require.NotNil(t, st.Result)
	require.Equal(t, rc.Output, st.Result.Output)
	require.Equal(t, rc.Turns, st.Result.Turns)
	require.Equal(t, rc.FinalAgent, st.Result.FinalAgent)
	require.Equal(t, rc.Usage, st.Result.Usage, "the stored result carries the run's usage")
	require.Nil(t, st.Error)

	// Failed: the error is in the status.
	fail, err := f.Client.Submit(ctx, &bus.RunRequest{Agent: "sleeper", Input: bus.TextInput("nap")})
	require.NoError(t, err)
	waitEvent(t, f, fail.RunID, loop.EventToolCallStarted, 10*time.Second)
	_, err = f.Client.Cancel(ctx, fail.RunID, "stop")
	require.NoError(t, err)
	f.Events(fail.RunID, 10*time.Second)
	waitIdle(t, f, 10*time.Second)
	st, err = f.Client.Status(ctx, fail.RunID)
	require.NoError(t, err)
	require.Equal(t, bus.StateFailed, st.Status)
	require.Equal(t, "RunCancelled", st.Error.Type)
	require.Nil(t, st.Result)
	require.Equal(t, "w1", st.Worker)

	_, err = f.Client.Status(ctx, "no-such-run")
	apiError(t, err, bus.TypeNotFound)
	_, err = f.Client.Status(ctx, "bad.id")
	require.Error(t, err)

	// Metrics.
	publishRaw(t, f, "sleeper", []byte(`{"input":"x","max_turns":-1}`), nats.Header{"Nats-Msg-Id": []string{"m-bad"}})
	f.Events("m-bad", 10*time.Second)
	waitIdle(t, f, 10*time.Second)
	require.Equal(t, 1.0, counter(t, reg, "lovia_runs_started_total", "agent", "gated"))
	require.Equal(t, 1.0, counter(t, reg, "lovia_runs_started_total", "agent", "sleeper"))
	require.Equal(t, 1.0, counter(t, reg, "lovia_runs_completed_total", "agent", "gated"))
	require.Equal(t, 1.0, counter(t, reg, "lovia_runs_failed_total", "agent", "sleeper", "type", "RunCancelled"))
	require.Equal(t, 1.0, counter(t, reg, "lovia_poison_requests_total", "type", "InvalidRequest"))
	require.Equal(t, 2.0, counter(t, reg, "lovia_tokens_total", "agent", "gated", "kind", "input"))
	require.Equal(t, 0.0, gauge(t, reg, "lovia_runs_in_flight"))
	require.EqualValues(t, 1, histCount(t, reg, "lovia_tool_seconds", "tool", "echo"))
	require.EqualValues(t, 2, histCount(t, reg, "lovia_turn_seconds", "agent", "gated"))
	require.Positive(t, histCount(t, reg, "lovia_event_publish_seconds"))
	// What an operator asks for (the operate issue's list).
	require.Equal(t, 1.0, counter(t, reg, "lovia_runs_failed_total", "agent", "sleeper", "type", "InvalidRequest"), "a poison request counts as a failed run")
	require.EqualValues(t, 1, histCount(t, reg, "lovia_approval_wait_seconds", "agent", "gated", "decision", "approve"))
	require.Positive(t, histCount(t, reg, "lovia_run_queue_wait_seconds", "agent", "gated"))
	require.EqualValues(t, 1, histCount(t, reg, "lovia_run_duration_seconds", "agent", "gated", "outcome", "completed"))
	require.EqualValues(t, 1, histCount(t, reg, "lovia_run_duration_seconds", "agent", "sleeper", "outcome", "failed"))
	require.Equal(t, 1.0, gauge(t, reg, "lovia_worker_info", "worker", "w1"))
	require.Eventually(t, func() bool {
		mfs, err := reg.Gather()
		if err != nil {
			return false
		}
		for _, mf := range mfs {
			if mf.GetName() == "lovia_runs_pending" {
				return true
			}
		}
		return false
	}, 15*time.Second, 50*time.Millisecond, "lovia_runs_pending (the work-queue depth) was never exported")
	names := map[string]bool{}
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		names[mf.GetName()] = true
	}
	for _, n := range []string{"lovia_runs_started_total", "lovia_runs_completed_total", "lovia_runs_failed_total", "lovia_runs_in_flight",
		"lovia_tool_seconds", "lovia_turn_seconds", "lovia_model_seconds", "lovia_tokens_total", "lovia_event_publish_seconds", "lovia_poison_requests_total"} {
		require.True(t, names[n], "metric %s not registered (have %v)", n, names)
	}
}

// TestMetricsRegistryShared checks that two workers may share one
// registry (a process with several workers): New does not fail on the
// second registration.
func TestMetricsRegistryShared(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	f := fleettest.Start(t, fleettest.Options{AgentsYAML: fleetAgents, Workers: 2, Worker: func(c *worker.Config) { c.Metrics = reg }})
	rep, err := f.Client.Submit(context.Background(), &bus.RunRequest{Agent: "quick", Input: bus.TextInput("x")})
	require.NoError(t, err)
	f.Events(rep.RunID, 10*time.Second)
	waitIdle(t, f, 10*time.Second)
	require.Equal(t, 1.0, counter(t, reg, "lovia_runs_completed_total", "agent", "quick"))
}

func metric(t testing.TB, reg *prometheus.Registry, name string, labels ...string) *dto.Metric {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				found := false
				for _, lp := range m.GetLabel() {
					if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
						found = true
					}
				}
				if !found {
					continue next
				}
			}
			return m
		}
	}
	t.Fatalf("no metric %s%v", name, labels)
	return nil
}

func counter(t testing.TB, reg *prometheus.Registry, name string, labels ...string) float64 {
	return metric(t, reg, name, labels...).GetCounter().GetValue()
}

func gauge(t testing.TB, reg *prometheus.Registry, name string, labels ...string) float64 {
	return metric(t, reg, name, labels...).GetGauge().GetValue()
}

func histCount(t testing.TB, reg *prometheus.Registry, name string, labels ...string) uint64 {
	return metric(t, reg, name, labels...).GetHistogram().GetSampleCount()
}
