package worker_test

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/internal/fleettest"
	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/store"
	"github.com/lovia-fleet/lovia/pkg/worker"
)

const parkAgents = `
agents:
  - name: gated
    model: scripted
    tools: [echo]
    approval: [echo]
    approval_timeout: 10m
    script:
      - call: {name: echo, args: {text: "ship it"}, id: c1}
      - text: done
  - name: gated_short
    model: scripted
    tools: [echo]
    approval: [echo]
    approval_timeout: 3s
    script:
      - call: {name: echo, args: {text: "ship it"}, id: c1}
      - text: done
`

// parkedFleet is a fleet whose workers park approval waits after 200ms.
func parkedFleet(t *testing.T, workers int) *fleettest.Fleet {
	return fleettest.Start(t, fleettest.Options{AgentsYAML: parkAgents, Workers: workers,
		Worker: func(c *worker.Config) { c.ParkAfter = 200 * time.Millisecond }})
}

// submitParked submits a run of agent and waits until it has asked for
// an approval and parked: its request has left the runs stream, and no
// worker slot or claim holds it.
func submitParked(t *testing.T, f *fleettest.Fleet, agent string) string {
	t.Helper()
	rep, err := f.Client.Submit(context.Background(), &bus.RunRequest{Agent: agent, Input: bus.TextInput("deploy")})
	require.NoError(t, err)
	waitEvent(t, f, rep.RunID, loop.EventApprovalRequired, 10*time.Second)
	waitParked(t, f, rep.RunID)
	return rep.RunID
}

// waitParked waits until the run is parked and nothing is pending in the
// runs stream.
func waitParked(t *testing.T, f *fleettest.Fleet, runID string) {
	t.Helper()
	ok := waitFor(10*time.Second, func() bool {
		e, err := f.Store.Runs().Get(context.Background(), runID)
		return err == nil && e.Record.Status == store.RunParked
	})
	require.True(t, ok, "run %s never parked", runID)
	waitIdle(t, f, 10*time.Second)
}

// TestApprovalParksAndResumesOnDecision: a run waiting for an approval
// longer than ParkAfter parks — its request is acknowledged, it holds no
// claim, its status still says running — and the decision, made through the
// API while no worker holds the run, resumes it on a worker: the tool runs
// once, the run completes, and its events are one gapless submission.
func TestApprovalParksAndResumesOnDecision(t *testing.T) {
	t.Parallel()
	f := parkedFleet(t, 2)
	ctx := context.Background()
	runID := submitParked(t, f, "gated")
	st, err := f.Client.Status(ctx, runID)
	require.NoError(t, err)
	require.Equal(t, bus.StateRunning, st.Status, "a parked run is running, as docs/protocol.md names it")
	require.NotNil(t, st.Awaiting, "the status says what the parked run waits for")
	require.Equal(t, "c1", st.Awaiting.CallID)
	require.WithinDuration(t, time.Now().Add(10*time.Minute), st.Awaiting.Deadline, time.Minute)

	ar, err := f.Client.Approve(ctx, runID, "c1", loop.Approve, "go")
	require.NoError(t, err)
	require.True(t, ar.Accepted)
	envs := f.Events(runID, 15*time.Second)
	checkOneSubmission(t, runID, envs)
	t.Logf("events: %v", fleettest.Types(envs))
	require.Len(t, fleettest.OfType(envs, bus.EventRunResumed), 1, "%v", fleettest.Types(envs))
	res := fleettest.OfType(envs, loop.EventApprovalResolved)
	require.Len(t, res, 1, "%v", fleettest.Types(envs))
	require.Equal(t, loop.Approve, fleettest.Event[*loop.ApprovalResolved](t, res[0]).Decision)
	require.Len(t, fleettest.OfType(envs, loop.EventToolCallStarted), 1, "the approved tool ran once")
	require.Equal(t, "done", fleettest.Event[*loop.RunCompleted](t, envs[len(envs)-1]).Output)
	require.Len(t, fleettest.OfType(envs, loop.EventRunStarted), 1)

	waitIdle(t, f, 10*time.Second)
	e, err := f.Store.Runs().Get(ctx, runID)
	require.NoError(t, err)
	require.Equal(t, store.RunCompleted, e.Record.Status)
	require.Nil(t, e.Record.Parked)
	require.Equal(t, 1, e.Record.Wakes)
}

// TestParkedApprovalTimesOut: nobody decides; a worker's park timer wakes
// the run at the approval deadline — counted from the first ask, not from
// the resume — and the call is denied (fail closed).
func TestParkedApprovalTimesOut(t *testing.T) {
	t.Parallel()
	f := parkedFleet(t, 1)
	runID := submitParked(t, f, "gated_short")

	envs := f.Events(runID, 15*time.Second)
	checkOneSubmission(t, runID, envs)
	req := fleettest.OfType(envs, loop.EventApprovalRequired)
	res := fleettest.OfType(envs, loop.EventApprovalResolved)
	require.Len(t, res, 1, "%v", fleettest.Types(envs))
	r := fleettest.Event[*loop.ApprovalResolved](t, res[0])
	require.Equal(t, loop.Reject, r.Decision)
	require.Contains(t, r.Reason, "approval timeout")
	wait := res[0].Time.Sub(req[0].Time)
	require.GreaterOrEqual(t, wait, 2900*time.Millisecond, "denied before the deadline")
	// Woken at the deadline, the resumed run denies at once: a deadline
	// restarted on resume would make it wait the whole timeout again.
	resumed := fleettest.OfType(envs, bus.EventRunResumed)
	require.Len(t, resumed, 1, "%v", fleettest.Types(envs))
	require.Less(t, res[0].Time.Sub(resumed[0].Time), 2*time.Second, "the deadline restarted on resume")
	require.Empty(t, fleettest.OfType(envs, loop.EventToolCallStarted))
	require.Equal(t, loop.EventRunCompleted, envs[len(envs)-1].Type)
}

// TestCancelParkedRun: a cancel of a parked run (no worker holds it) ends
// it at once with run_failed RunCancelled (the API does: no wake, no
// worker), and no worker resumes it afterwards.
func TestCancelParkedRun(t *testing.T) {
	t.Parallel()
	f := parkedFleet(t, 1)
	ctx := context.Background()
	runID := submitParked(t, f, "gated")

	cr, err := f.Client.Cancel(ctx, runID, "changed my mind")
	require.NoError(t, err)
	require.True(t, cr.Cancelled)
	require.Equal(t, "failed", cr.Status)
	envs := f.Events(runID, 15*time.Second)
	checkOneSubmission(t, runID, envs)
	failed := fleettest.Event[*loop.RunFailed](t, envs[len(envs)-1])
	require.Equal(t, "RunCancelled", failed.Error.Type)
	require.Empty(t, fleettest.OfType(envs, loop.EventToolCallStarted))
	require.Empty(t, fleettest.OfType(envs, bus.EventRunResumed), "no worker resumed it: %v", fleettest.Types(envs))
	waitIdle(t, f, 15*time.Second)
	checkOneSubmission(t, runID, runEvents(t, f, runID))
}

// TestParkedRunResubmittedIsInFlight: resubmitting a parked run starts
// nothing new.
func TestParkedRunResubmittedIsInFlight(t *testing.T) {
	t.Parallel()
	f := parkedFleet(t, 1)
	ctx := context.Background()
	runID := submitParked(t, f, "gated")
	again, err := f.Client.Submit(ctx, &bus.RunRequest{RunID: runID, Agent: "gated", Input: bus.TextInput("deploy")})
	require.NoError(t, err)
	require.Equal(t, bus.StateRunning, again.Status)
	waitIdle(t, f, 5*time.Second)
	e, err := f.Store.Runs().Get(ctx, runID)
	require.NoError(t, err)
	require.Equal(t, store.RunParked, e.Record.Status)
}

// TestWakeWhoseClaimBeatTheWaker: a waker published the wake request but
// never recorded it (it died, or the claim changed the record first). The
// claim of that request resumes the run, which parks again; the next wake
// (the decision) must publish a request of its own — not one the stream
// drops as a repeat of the first wake — and the run completes as one
// submission.
func TestWakeWhoseClaimBeatTheWaker(t *testing.T) {
	t.Parallel()
	f := parkedFleet(t, 1)
	ctx := context.Background()
	runID := submitParked(t, f, "gated")
	e, err := f.Store.Runs().Get(ctx, runID)
	require.NoError(t, err)
	p := e.Record.Parked
	require.NotNil(t, p)
	publishRaw(t, f, "gated", p.Request, nats.Header{
		bus.HeaderMsgID:       []string{runID + ".wake" + strconv.FormatUint(p.Continues, 10) + "." + strconv.FormatUint(p.TimerRevision, 10)},
		bus.HeaderContentType: []string{p.ContentType},
		bus.HeaderSubmission:  []string{"1"}, bus.HeaderContinues: []string{strconv.FormatUint(p.Continues, 10)}})
	ok := waitFor(10*time.Second, func() bool {
		e, err := f.Store.Runs().Get(ctx, runID)
		return err == nil && e.Record.Status == store.RunParked && e.Record.Parked.Continues != p.Continues
	})
	require.True(t, ok, "the run did not park a second time")
	waitIdle(t, f, 10*time.Second)

	_, err = f.Client.Approve(ctx, runID, "c1", loop.Approve, "go")
	require.NoError(t, err)
	envs := f.Events(runID, 15*time.Second)
	checkOneSubmission(t, runID, envs)
	require.Len(t, fleettest.OfType(envs, loop.EventRunStarted), 1, "%v", fleettest.Types(envs))
	require.Len(t, fleettest.OfType(envs, bus.EventRunResumed), 2, "%v", fleettest.Types(envs))
	require.Len(t, fleettest.OfType(envs, loop.EventToolCallStarted), 1)
	require.Equal(t, loop.EventRunCompleted, envs[len(envs)-1].Type)
}

// TestDuplicateRequestOfParkedRunIsRefused: a first delivery of any
// request but the park's wake finds a parked run in flight and is
// terminated; the run stays parked, and its decision completes it as one
// submission.
func TestDuplicateRequestOfParkedRunIsRefused(t *testing.T) {
	t.Parallel()
	f := parkedFleet(t, 1)
	ctx := context.Background()
	runID := submitParked(t, f, "gated")
	before := len(runEvents(t, f, runID))
	publishRaw(t, f, "gated", []byte(`{"run_id":"`+runID+`","input":"deploy"}`), nil)
	waitIdle(t, f, 10*time.Second)
	require.Len(t, runEvents(t, f, runID), before, "the duplicate published events")
	e, err := f.Store.Runs().Get(ctx, runID)
	require.NoError(t, err)
	require.Equal(t, store.RunParked, e.Record.Status)

	_, err = f.Client.Approve(ctx, runID, "c1", loop.Approve, "go")
	require.NoError(t, err)
	envs := f.Events(runID, 15*time.Second)
	checkOneSubmission(t, runID, envs)
	require.Len(t, fleettest.OfType(envs, loop.EventRunStarted), 1, "%v", fleettest.Types(envs))
	require.Equal(t, loop.EventRunCompleted, envs[len(envs)-1].Type)
}

// lockedBuffer is a log sink safe for the worker's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestWarnsAboutApprovalsOutlastingEvents: a worker warns at start about
// an agent whose approval wait can outlast the events stream's max age (a
// run parked that long would lose its earlier events), and only about it.
func TestWarnsAboutApprovalsOutlastingEvents(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t, fleettest.Options{Workers: -1, AgentsYAML: `
agents:
  - name: patient
    model: scripted
    tools: [echo]
    approval: [echo]
    approval_timeout: 100h
    script:
      - text: ok
  - name: brisk
    model: scripted
    tools: [echo]
    approval: [echo]
    approval_timeout: 1h
    script:
      - text: ok
`})
	var logs lockedBuffer
	cfg := workerConfig(t, f, "w1")
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	f.StartWorker(cfg)
	out := logs.String()
	require.Contains(t, out, "approval timeout outlasts the events stream's max age")
	require.Contains(t, out, "agent=patient")
	require.NotContains(t, out, "agent=brisk")
}

// TestParkedRunOutlivesItsEvents: the events stream drops a parked run's
// events (its max age passed while the run waited); the decision still
// resumes the run as the same submission, continuing its event sequence
// after the seq it had reached (run_resumed, no restart at seq 1).
func TestParkedRunOutlivesItsEvents(t *testing.T) {
	t.Parallel()
	f := parkedFleet(t, 1)
	ctx := context.Background()
	runID := submitParked(t, f, "gated")
	before := runEvents(t, f, runID)
	reached := before[len(before)-1].Seq
	events, err := f.JS.Stream(ctx, "LOVIA_EVENTS")
	require.NoError(t, err)
	require.NoError(t, events.Purge(ctx, jetstream.WithPurgeSubject("lovia.events."+runID)))
	require.Empty(t, runEvents(t, f, runID))

	_, err = f.Client.Approve(ctx, runID, "c1", loop.Approve, "go")
	require.NoError(t, err)
	var after []*bus.Envelope
	require.Eventually(t, func() bool {
		after = runEvents(t, f, runID)
		return len(after) > 0 && after[len(after)-1].IsTerminal()
	}, 15*time.Second, 20*time.Millisecond)
	checkOneSubmissionFrom(t, after)
	require.Equal(t, reached+1, after[0].Seq, "%v", fleettest.Types(after))
	require.Equal(t, bus.EventRunResumed, after[0].Type)
	require.Empty(t, fleettest.OfType(after, loop.EventRunStarted))
	require.Equal(t, loop.EventRunCompleted, after[len(after)-1].Type)
}
