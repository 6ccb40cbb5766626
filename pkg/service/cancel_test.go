package service_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/internal/fleettest"
	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/client"
	"github.com/lovia-fleet/lovia/pkg/lifecycle"
	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/store"
	"github.com/lovia-fleet/lovia/pkg/worker"
)

const cancelAgents = `
agents:
  - name: quick
    model: scripted
    script:
      - text: ok
  - name: sleeper
    model: scripted
    tools: [sleep]
    script:
      - call: {name: sleep, args: {ms: 60000}, id: s1}
      - text: woke up
  - name: gated
    model: scripted
    tools: [echo]
    approval: [echo]
    approval_timeout: 10m
    script:
      - call: {name: echo, args: {text: "ship it"}, id: c1}
      - text: done
`

// runEvents reads a run's stored events, from the first (waiting up to
// 10s for it) to a pause of 500ms: every submission's, ended or not.
func runEvents(t *testing.T, f *fleettest.Fleet, runID string) []*bus.Envelope {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tail, err := f.Client.Tail(ctx, runID, bus.FromStart(), bus.Follow())
	require.NoError(t, err)
	defer tail.Close(context.Background())
	var out []*bus.Envelope
	for {
		wait := 500 * time.Millisecond
		if len(out) == 0 {
			wait = 10 * time.Second // a loaded machine is slow to start the read
		}
		pctx, pcancel := context.WithTimeout(ctx, wait)
		env, err := tail.Next(pctx)
		pcancel()
		if err != nil {
			return out
		}
		out = append(out, env)
	}
}

// checkCancelledUnheld checks that a run's events end with exactly one
// terminal event, a run_failed RunCancelled that names the run's agent,
// and that no tool ran.
func checkCancelledUnheld(t *testing.T, envs []*bus.Envelope, agent string) {
	t.Helper()
	require.NotEmpty(t, envs)
	terminals := 0
	for i, e := range envs {
		require.EqualValues(t, i+1, e.Seq, "types %v", fleettest.Types(envs))
		if e.IsTerminal() {
			terminals++
		}
	}
	require.Equal(t, 1, terminals, "types %v", fleettest.Types(envs))
	last := envs[len(envs)-1]
	failed := fleettest.Event[*loop.RunFailed](t, last)
	require.Equal(t, "RunCancelled", failed.Error.Type)
	require.False(t, failed.Error.Retryable, "a cancelled run is not retryable")
	require.Equal(t, agent, last.Agent)
	require.Empty(t, fleettest.OfType(envs, loop.EventToolCallStarted), "a cancelled run ran a tool: %v", fleettest.Types(envs))
}

// queuedRequests counts the requests the runs stream holds on subject.
func queuedRequests(t *testing.T, f *fleettest.Fleet, subject string) uint64 {
	t.Helper()
	s, err := f.JS.Stream(context.Background(), "LOVIA_RUNS")
	require.NoError(t, err)
	info, err := s.Info(context.Background(), jetstream.WithSubjectFilter(subject))
	require.NoError(t, err)
	return info.State.Subjects[subject]
}

// TestCancelOfAQueuedRunNobodyServes (issue 25, item 5): a cancel of a
// run that no worker holds ends it at once — one run_failed RunCancelled,
// status failed, its request gone from the runs stream — with no worker
// involved; a cancel again says it had ended; an unknown run is NotFound;
// a worker that turns up later with a copy of the request runs nothing.
func TestCancelOfAQueuedRunNobodyServes(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t, fleettest.Options{AgentsYAML: cancelAgents, Workers: -1})
	ctx := context.Background()
	rep, err := f.Client.Submit(ctx, &bus.RunRequest{Agent: "sleeper", Input: bus.TextInput("nap")})
	require.NoError(t, err)
	require.EqualValues(t, 1, queuedRequests(t, f, "lovia.submit.sleeper"))

	cr, err := f.Client.Cancel(ctx, rep.RunID, "never mind")
	require.NoError(t, err)
	require.Equal(t, bus.CancelReply{RunID: rep.RunID, Cancelled: true, Status: "failed"}, *cr, "the reply says the run is over")
	st, err := f.Client.Status(ctx, rep.RunID)
	require.NoError(t, err)
	require.Equal(t, bus.StateFailed, st.Status, "ended at once, with no worker")
	require.Equal(t, "RunCancelled", st.Error.Type)
	require.Equal(t, "never mind", st.Error.Message)
	envs := f.Events(rep.RunID, 10*time.Second)
	checkCancelledUnheld(t, envs, "sleeper")
	require.Len(t, envs, 1, "a lone run_failed: %v", fleettest.Types(envs))
	require.Equal(t, "never mind", fleettest.Event[*loop.RunFailed](t, envs[0]).Error.Message)
	require.Zero(t, queuedRequests(t, f, "lovia.submit.sleeper"), "the request was removed from the work queue")
	d, err := f.API.DescribeRun(ctx, rep.RunID)
	require.NoError(t, err)
	require.Equal(t, []string{"submit", "cancel"}, steps(d))

	again, err := f.Client.Cancel(ctx, rep.RunID, "again")
	require.NoError(t, err)
	require.Equal(t, bus.CancelReply{RunID: rep.RunID, Cancelled: false, Status: "failed"}, *again)
	_, err = f.Client.Cancel(ctx, "ghost", "")
	var ae *bus.APIError
	require.ErrorAs(t, err, &ae)
	require.Equal(t, bus.TypeNotFound, ae.Type)

	// A copy of the request (a requeue that raced the cancel) reaches a
	// worker that starts later: it terminates it without running it.
	body, err := bus.Marshal(bus.JSON, &bus.RunRequest{RunID: rep.RunID, Agent: "sleeper", Input: bus.TextInput("nap")})
	require.NoError(t, err)
	_, err = bus.PublishRequest(ctx, f.JS, f.API.Names(), "sleeper", body, bus.RequestMeta{RunID: rep.RunID, Suffix: ".requeue1", ContentType: bus.JSON.ContentType(), Submission: 1})
	require.NoError(t, err)
	metrics := prometheus.NewRegistry()
	f.StartWorker(worker.Config{Conn: f.Connect(), Catalog: f.Catalog, ID: "late", SkipProvision: true, Metrics: metrics})
	eventually(t, "the worker to take the copy of the request off the runs stream", func() bool {
		return queuedRequests(t, f, "lovia.submit.sleeper") == 0
	})
	checkCancelledUnheld(t, runEvents(t, f, rep.RunID), "sleeper")
	require.Len(t, runEvents(t, f, rep.RunID), 1, "the copy published nothing")
	st, err = f.Client.Status(ctx, rep.RunID)
	require.NoError(t, err)
	require.Equal(t, bus.StateFailed, st.Status)

	// Resubmitted, it runs again (a new submission), after the API's
	// run_failed: its events continue the run's seqs, and the worker is
	// not fenced by an event it did not expect.
	_, err = f.Client.Submit(ctx, &bus.RunRequest{RunID: rep.RunID, Agent: "sleeper", Input: bus.TextInput("nap")})
	require.NoError(t, err)
	eventually(t, "the resubmission to run", func() bool {
		st, err = f.Client.Status(ctx, rep.RunID)
		require.NoError(t, err)
		return st.Status == bus.StateRunning
	})
	cr, err = f.Client.Cancel(ctx, rep.RunID, "enough")
	require.NoError(t, err)
	require.True(t, cr.Cancelled)
	eventually(t, "the resubmission to end on its cancel", func() bool {
		envs = runEvents(t, f, rep.RunID)
		return len(fleettest.OfType(envs, loop.EventRunFailed)) == 2
	})
	for i, e := range envs {
		require.EqualValues(t, i+1, e.Seq, "%v", fleettest.Types(envs))
	}
	require.Equal(t, loop.EventRunStarted, envs[1].Type, "%v", fleettest.Types(envs))
	mfs, err := metrics.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == "lovia_runs_fenced_total" {
			require.Zero(t, mf.GetMetric()[0].GetCounter().GetValue(), "the resubmission's claim took the run for one without events, and was fenced by the API's run_failed")
		}
	}
}

// TestCancelOfARawRequestForAnUnservedAgent: the issue's own case — a raw
// publish for an agent no worker serves, indexed queued by the sweep, is
// ended by its cancel.
func TestCancelOfARawRequestForAnUnservedAgent(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t, fleettest.Options{AgentsYAML: cancelAgents, Worker: func(c *worker.Config) {
		c.SweepInterval = 100 * time.Millisecond
	}})
	ctx := context.Background()
	_, err := f.JS.PublishMsg(ctx, &nats.Msg{Subject: "lovia.submit.nosuchagent", Data: []byte(`{"input":"x"}`),
		Header: nats.Header{"Nats-Msg-Id": {"noagent-1"}}})
	require.NoError(t, err)
	eventually(t, "the sweep to index the run as queued", func() bool {
		st, err := f.Client.Status(ctx, "noagent-1")
		return err == nil && st.Status == bus.StateQueued
	})
	cr, err := f.Client.Cancel(ctx, "noagent-1", "")
	require.NoError(t, err)
	require.Equal(t, bus.CancelReply{RunID: "noagent-1", Cancelled: true, Status: "failed"}, *cr)
	envs := f.Events("noagent-1", 10*time.Second)
	checkCancelledUnheld(t, envs, "nosuchagent")
	require.Equal(t, "cancelled by request", fleettest.Event[*loop.RunFailed](t, envs[0]).Error.Message)
	require.Zero(t, queuedRequests(t, f, "lovia.submit.nosuchagent"), "the request was removed from the work queue")
	st, err := f.Client.Status(ctx, "noagent-1")
	require.NoError(t, err)
	require.Equal(t, bus.StateFailed, st.Status)
}

// TestCancelOfAParkedRun: a run parked on its approval (no worker holds
// it) is ended by its cancel at once, as its active agent, after its own
// events; a decision for it afterwards is refused.
func TestCancelOfAParkedRun(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t, fleettest.Options{AgentsYAML: cancelAgents,
		Worker: func(c *worker.Config) { c.ParkAfter = 200 * time.Millisecond }})
	ctx := context.Background()
	rep, err := f.Client.Submit(ctx, &bus.RunRequest{Agent: "gated", Input: bus.TextInput("deploy")})
	require.NoError(t, err)
	eventually(t, "the run to park", func() bool {
		d, err := f.API.DescribeRun(ctx, rep.RunID)
		require.NoError(t, err)
		return d.Status == bus.StateParked
	})
	cr, err := f.Client.Cancel(ctx, rep.RunID, "not today")
	require.NoError(t, err)
	require.Equal(t, bus.CancelReply{RunID: rep.RunID, Cancelled: true, Status: "failed"}, *cr)
	envs := f.Events(rep.RunID, 10*time.Second)
	checkCancelledUnheld(t, envs, "gated")
	require.Len(t, fleettest.OfType(envs, loop.EventApprovalRequired), 1)
	d, err := f.API.DescribeRun(ctx, rep.RunID)
	require.NoError(t, err)
	require.Equal(t, bus.StateFailed, d.Status)
	require.Nil(t, d.Awaiting)
	require.Equal(t, []string{"submit", "claim", "park", "cancel"}, steps(d))
	_, err = f.Client.Approve(ctx, rep.RunID, "c1", loop.Approve, "")
	var ae *bus.APIError
	require.ErrorAs(t, err, &ae, "a decision for an ended run is refused")
	require.Equal(t, bus.TypeInvalidRequest, ae.Type)
}

// TestCancelRacingClaims: queued runs cancelled while a worker starts and
// claims them each end with exactly one terminal event, a run_failed
// RunCancelled — by the API when the cancel came first, by the worker
// when its claim did — and no tool of a cancelled run runs to its end.
func TestCancelRacingClaims(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t, fleettest.Options{AgentsYAML: cancelAgents, Workers: -1})
	ctx := context.Background()
	const n = 8
	ids := make([]string, n)
	for i := range ids {
		rep, err := f.Client.Submit(ctx, &bus.RunRequest{Agent: "sleeper", Input: bus.TextInput(fmt.Sprint("nap ", i))})
		require.NoError(t, err)
		ids[i] = rep.RunID
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		f.StartWorker(worker.Config{Conn: f.Connect(), Catalog: f.Catalog, ID: "racer", SkipProvision: true})
	})
	for _, id := range ids {
		wg.Go(func() {
			_, err := f.Client.Cancel(ctx, id, "race")
			require.NoError(t, err)
		})
	}
	wg.Wait()
	for _, id := range ids {
		envs := f.Events(id, 30*time.Second)
		require.Len(t, fleettest.OfType(envs, loop.EventRunFailed), 1, "run %s: %v", id, fleettest.Types(envs))
		require.Equal(t, "RunCancelled", fleettest.Event[*loop.RunFailed](t, envs[len(envs)-1]).Error.Type)
	}
	eventually(t, "every request to be off the runs stream and no claim left", func() bool {
		if queuedRequests(t, f, "lovia.submit.sleeper") != 0 {
			return false
		}
		c, err := f.JS.Consumer(ctx, "LOVIA_RUNS", "agent-sleeper")
		require.NoError(t, err)
		info, err := c.Info(ctx)
		require.NoError(t, err)
		return info.NumPending == 0 && info.NumAckPending == 0
	})
	for _, id := range ids {
		envs := runEvents(t, f, id)
		terminals := 0
		for i, e := range envs {
			require.EqualValues(t, i+1, e.Seq, "run %s: %v", id, fleettest.Types(envs))
			if e.IsTerminal() {
				terminals++
			}
		}
		require.Equal(t, 1, terminals, "run %s: %v", id, fleettest.Types(envs))
		st, err := f.Client.Status(ctx, id)
		require.NoError(t, err)
		require.Equal(t, bus.StateFailed, st.Status, "run %s", id)
	}
}

// TestCancelAgainPublishesALostRunFailed: an API that died between ending
// a run no worker held and publishing its run_failed (the record failed,
// no terminal event, its request still queued) is mended by the next
// cancel of the run, once.
func TestCancelAgainPublishesALostRunFailed(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t, fleettest.Options{AgentsYAML: cancelAgents, Workers: -1})
	ctx := context.Background()
	rep, err := f.Client.Submit(ctx, &bus.RunRequest{Agent: "sleeper", Input: bus.TextInput("nap")})
	require.NoError(t, err)
	info := loop.ErrorInfo{Type: "RunCancelled", Message: "the first cancel", Hint: loop.CancelledHint}
	_, err = f.Store.Runs().Modify(ctx, rep.RunID, lifecycle.Modify(func(r store.RunRecord) (store.RunRecord, error) {
		return lifecycle.CancelUnheld(r, info, time.Now(), 1)
	}))
	require.NoError(t, err)
	for range 2 {
		cr, err := f.Client.Cancel(ctx, rep.RunID, "again")
		require.NoError(t, err)
		require.Equal(t, bus.CancelReply{RunID: rep.RunID, Cancelled: false, Status: "failed"}, *cr)
	}
	envs := runEvents(t, f, rep.RunID)
	checkCancelledUnheld(t, envs, "sleeper")
	require.Len(t, envs, 1, "%v", fleettest.Types(envs))
	require.Equal(t, "the first cancel", fleettest.Event[*loop.RunFailed](t, envs[0]).Error.Message)
	require.Zero(t, queuedRequests(t, f, "lovia.submit.sleeper"), "the request the first cancel left was removed")
}

// TestCancelledRunFailedInTheRunsEncoding: the run_failed the API
// publishes for a run no worker held is in the encoding the run's request
// asked for (msgpack here), as a worker's would be.
func TestCancelledRunFailedInTheRunsEncoding(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t, fleettest.Options{AgentsYAML: cancelAgents, Workers: -1})
	ctx := context.Background()
	mp, err := client.New(f.Conn, client.Options{Encoding: bus.Msgpack})
	require.NoError(t, err)
	rep, err := mp.Submit(ctx, &bus.RunRequest{Agent: "sleeper", Input: bus.TextInput("nap")})
	require.NoError(t, err)
	cr, err := mp.Cancel(ctx, rep.RunID, "")
	require.NoError(t, err)
	require.Equal(t, "failed", cr.Status)
	envs := f.Events(rep.RunID, 10*time.Second)
	checkCancelledUnheld(t, envs, "sleeper")
	require.Equal(t, bus.Msgpack, envs[0].Encoding)
}
