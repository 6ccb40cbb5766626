package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/internal/fleettest"
	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/worker"
)

// TestApprovalFromAPI proves requirement 3 (approvals): a call of a gated
// tool waits for a decision made through <p>.api.run.<id>.approve; approve
// runs the tool and the run completes; reject gives the model an error
// result without running the tool and the run completes; no decision
// within approval_timeout is a denial (fail closed) with approval_resolved
// reject. Each ends with one terminal event.
func TestApprovalFromAPI(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t, fleettest.Options{AgentsYAML: fleetAgents})
	ctx := context.Background()

	t.Run("approve", func(t *testing.T) {
		t.Parallel()
		rep, err := f.Client.Submit(ctx, &bus.RunRequest{Agent: "gated", Input: bus.TextInput("deploy")})
		require.NoError(t, err)
		req := fleettest.Event[*loop.ApprovalRequired](t, waitEvent(t, f, rep.RunID, loop.EventApprovalRequired, 10*time.Second))
		require.Equal(t, "c1", req.Call.ID)
		require.Equal(t, "echo", req.Call.Name)
		st, err := f.Client.Status(ctx, rep.RunID)
		require.NoError(t, err)
		require.Equal(t, bus.StateRunning, st.Status, "a run waiting for approval is running")

		ar, err := f.Client.Approve(ctx, rep.RunID, "c1", loop.Approve, "looks good")
		require.NoError(t, err)
		require.True(t, ar.Accepted)
		envs := f.Events(rep.RunID, 10*time.Second)
		checkOneSubmission(t, rep.RunID, envs)
		res := fleettest.Event[*loop.ApprovalResolved](t, fleettest.OfType(envs, loop.EventApprovalResolved)[0])
		require.Equal(t, loop.Approve, res.Decision)
		require.Equal(t, "looks good", res.Reason)
		require.Len(t, fleettest.OfType(envs, loop.EventToolCallStarted), 1, "the approved tool ran")
		done := fleettest.Event[*loop.ToolCallCompleted](t, fleettest.OfType(envs, loop.EventToolCallCompleted)[0])
		require.False(t, done.IsError)
		require.Contains(t, done.Output, "ship it")
		require.Equal(t, "done", fleettest.Event[*loop.RunCompleted](t, envs[len(envs)-1]).Output)

		// A second decision for the same call does not replace the first.
		again, err := f.Client.Approve(ctx, rep.RunID, "c1", loop.Reject, "too late")
		if err == nil {
			require.False(t, again.Accepted)
		} else {
			apiError(t, err, bus.TypeInvalidRequest) // the run is over
		}
	})

	t.Run("reject", func(t *testing.T) {
		t.Parallel()
		rep, err := f.Client.Submit(ctx, &bus.RunRequest{Agent: "gated", Input: bus.TextInput("deploy")})
		require.NoError(t, err)
		waitEvent(t, f, rep.RunID, loop.EventApprovalRequired, 10*time.Second)
		_, err = f.Client.Approve(ctx, rep.RunID, "c1", loop.Reject, "not today")
		require.NoError(t, err)
		envs := f.Events(rep.RunID, 10*time.Second)
		checkOneSubmission(t, rep.RunID, envs)
		res := fleettest.Event[*loop.ApprovalResolved](t, fleettest.OfType(envs, loop.EventApprovalResolved)[0])
		require.Equal(t, loop.Reject, res.Decision)
		require.Equal(t, "not today", res.Reason)
		require.Empty(t, fleettest.OfType(envs, loop.EventToolCallStarted), "a rejected tool never runs")
		done := fleettest.Event[*loop.ToolCallCompleted](t, fleettest.OfType(envs, loop.EventToolCallCompleted)[0])
		require.True(t, done.IsError)
		require.Equal(t, loop.EventRunCompleted, envs[len(envs)-1].Type)
	})

	t.Run("timeout fails closed", func(t *testing.T) {
		t.Parallel()
		rep, err := f.Client.Submit(ctx, &bus.RunRequest{Agent: "gated_fast", Input: bus.TextInput("deploy")})
		require.NoError(t, err)
		envs := f.Events(rep.RunID, 10*time.Second)
		checkOneSubmission(t, rep.RunID, envs)
		req := fleettest.OfType(envs, loop.EventApprovalRequired)
		res := fleettest.OfType(envs, loop.EventApprovalResolved)
		require.Len(t, req, 1)
		require.Len(t, res, 1)
		r := fleettest.Event[*loop.ApprovalResolved](t, res[0])
		require.Equal(t, loop.Reject, r.Decision)
		require.Contains(t, r.Reason, "approval timeout")
		wait := res[0].Time.Sub(req[0].Time)
		require.GreaterOrEqual(t, wait, 250*time.Millisecond, "denied before the timeout")
		require.Less(t, wait, 3*time.Second, "the denial took too long")
		require.Empty(t, fleettest.OfType(envs, loop.EventToolCallStarted))
		require.True(t, fleettest.Event[*loop.ToolCallCompleted](t, fleettest.OfType(envs, loop.EventToolCallCompleted)[0]).IsError)
		require.Equal(t, loop.EventRunCompleted, envs[len(envs)-1].Type)
	})
}

// TestCancelFromAPI proves requirement 3 (cancel): a run sleeping in the
// sleep tool stops at once on <p>.api.run.<id>.cancel with one run_failed
// RunCancelled carrying the reason, and its status is failed.
func TestCancelFromAPI(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t, fleettest.Options{AgentsYAML: fleetAgents})
	ctx := context.Background()
	rep, err := f.Client.Submit(ctx, &bus.RunRequest{Agent: "sleeper", Input: bus.TextInput("nap")})
	require.NoError(t, err)
	waitEvent(t, f, rep.RunID, loop.EventToolCallStarted, 10*time.Second)
	t0 := time.Now()
	cr, err := f.Client.Cancel(ctx, rep.RunID, "user pressed stop")
	require.NoError(t, err)
	require.True(t, cr.Cancelled)
	envs := f.Events(rep.RunID, 10*time.Second)
	latency := time.Since(t0)
	t.Logf("cancel to run_failed: %s", latency)
	require.Less(t, latency, 3*time.Second)
	checkOneSubmission(t, rep.RunID, envs)
	failed := fleettest.Event[*loop.RunFailed](t, envs[len(envs)-1])
	require.Equal(t, "RunCancelled", failed.Error.Type)
	require.Contains(t, failed.Error.Message, "user pressed stop")

	require.Eventually(t, func() bool {
		st, err := f.Client.Status(ctx, rep.RunID)
		return err == nil && st.Status == bus.StateFailed && st.Error != nil && st.Error.Type == "RunCancelled"
	}, 5*time.Second, 10*time.Millisecond)
	waitIdle(t, f, 5*time.Second)

	// Cancelling a finished run is harmless.
	again, err := f.Client.Cancel(ctx, rep.RunID, "again")
	require.NoError(t, err)
	require.False(t, again.Cancelled)
}

// TestCancelWithLostNotification: the cancel record is stored but its
// core-NATS notification never reaches the owner (here: it is never sent).
// The owner still finds the cancel at its next heartbeat and stops the run.
func TestCancelWithLostNotification(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t, fleettest.Options{AgentsYAML: fleetAgents, Worker: func(c *worker.Config) {
		c.Heartbeat = 200 * time.Millisecond
	}})
	ctx := context.Background()
	rep, err := f.Client.Submit(ctx, &bus.RunRequest{Agent: "sleeper", Input: bus.TextInput("nap")})
	require.NoError(t, err)
	waitEvent(t, f, rep.RunID, loop.EventToolCallStarted, 10*time.Second)
	ok, err := f.Store.Control().RequestCancel(ctx, rep.RunID, 1, "stored, never announced")
	require.NoError(t, err)
	require.True(t, ok)
	envs := f.Events(rep.RunID, 10*time.Second)
	checkOneSubmission(t, rep.RunID, envs)
	failed := fleettest.Event[*loop.RunFailed](t, envs[len(envs)-1])
	require.Equal(t, "RunCancelled", failed.Error.Type)
	require.Contains(t, failed.Error.Message, "stored, never announced")
}

// TestInjectFromAPI proves requirement 3 (steering): a message injected
// through <p>.api.run.<id>.inject while the run sleeps in a tool is folded
// into the next turn (user_message_injected with that content); a message
// withdrawn by uninject before it is drained never reaches the run
// (removed: true), and withdrawing one that was drained reports removed:
// false.
func TestInjectFromAPI(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t, fleettest.Options{AgentsYAML: fleetAgents})
	ctx := context.Background()
	rep, err := f.Client.Submit(ctx, &bus.RunRequest{Agent: "napper", Input: bus.TextInput("nap")})
	require.NoError(t, err)
	waitEvent(t, f, rep.RunID, loop.EventToolCallStarted, 10*time.Second)
	keep, err := f.Client.Inject(ctx, rep.RunID, "also check the logs")
	require.NoError(t, err)
	drop, err := f.Client.Inject(ctx, rep.RunID, "never mind this")
	require.NoError(t, err)
	require.NotEqual(t, keep, drop)
	removed, err := f.Client.Uninject(ctx, rep.RunID, drop)
	require.NoError(t, err)
	require.True(t, removed)

	envs := f.Events(rep.RunID, 10*time.Second)
	checkOneSubmission(t, rep.RunID, envs)
	inj := fleettest.OfType(envs, loop.EventUserMessageInjected)
	require.Len(t, inj, 1, "types %v", fleettest.Types(envs))
	um := fleettest.Event[*loop.UserMessageInjected](t, inj[0])
	require.Equal(t, "also check the logs", um.Content)
	require.Equal(t, 2, um.TurnNo, "folded into the turn after the sleep")
	require.Equal(t, 2, inj[0].Turn)
	// The sleep's result came first (turn 1), then the injection (turn 2).
	require.Less(t, fleettest.OfType(envs, loop.EventToolCallCompleted)[0].Seq, inj[0].Seq)
	require.Equal(t, loop.EventRunCompleted, envs[len(envs)-1].Type)

	removed, err = f.Client.Uninject(ctx, rep.RunID, keep)
	require.NoError(t, err)
	require.False(t, removed, "a drained message cannot be withdrawn")
}

// TestControlWhileOwnerless proves that what is sent while no worker owns
// a run is persisted and reaches it (docs/protocol.md: "reach the run
// whenever a worker owns it"): a run released by an ordered shutdown gets
// an inject and a cancel while ownerless; the cancel ends it at once, with
// no worker (invariant 14) — one terminal event, no resume. Resubmitting
// the cancelled run (if_run_exists resume) then continues it from its
// checkpoint as a new submission with its own terminal event, the inject
// folded in.
func TestControlWhileOwnerless(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t, fleettest.Options{AgentsYAML: fleetAgents, Worker: func(c *worker.Config) {
		c.ShutdownGrace = 50 * time.Millisecond
	}})
	ctx := context.Background()
	rep, err := f.Client.Submit(ctx, &bus.RunRequest{Agent: "napper", Input: bus.TextInput("nap")})
	require.NoError(t, err)
	waitEvent(t, f, rep.RunID, loop.EventToolCallStarted, 10*time.Second)
	require.NoError(t, f.Workers[0].Stop(ctx))

	_, err = f.Client.Inject(ctx, rep.RunID, "while nobody owns it")
	require.NoError(t, err)
	cr, err := f.Client.Cancel(ctx, rep.RunID, "cancelled while ownerless")
	require.NoError(t, err)
	require.True(t, cr.Cancelled)
	require.Equal(t, "failed", cr.Status, "ended at once")

	f.StartWorker(workerConfig(t, f, "wB"))
	envs := f.Events(rep.RunID, 10*time.Second)
	checkOneSubmission(t, rep.RunID, envs)
	require.Empty(t, fleettest.OfType(envs, bus.EventRunResumed), "no worker resumed the cancelled run: %v", fleettest.Types(envs))
	rf := fleettest.Event[*loop.RunFailed](t, envs[len(envs)-1])
	require.Equal(t, "RunCancelled", rf.Error.Type)
	require.Contains(t, rf.Error.Message, "cancelled while ownerless")
	waitIdle(t, f, 10*time.Second)

	// Resubmit: the cancel is cleared, the dangling sleep runs again, the
	// queued steering message is folded in, the run completes.
	again, err := f.Client.Submit(ctx, &bus.RunRequest{RunID: rep.RunID, Agent: "napper"})
	require.NoError(t, err)
	require.Equal(t, bus.StateQueued, again.Status)
	require.False(t, again.Replayed)
	var second []*bus.Envelope
	require.Eventually(t, func() bool {
		all := runEvents(t, f, rep.RunID)
		second = all[len(envs):]
		return len(second) > 0 && second[len(second)-1].IsTerminal()
	}, 10*time.Second, 20*time.Millisecond)
	waitIdle(t, f, 10*time.Second)
	all := runEvents(t, f, rep.RunID)
	for i, e := range all {
		require.EqualValues(t, i+1, e.Seq, "seqs continue across submissions")
	}
	second = all[len(envs):]
	checkOneSubmissionFrom(t, second)
	require.Equal(t, loop.EventRunStarted, second[0].Type)
	require.True(t, fleettest.Event[*bus.RunStarted](t, second[0]).FromCheckpoint)
	require.Equal(t, "rested", fleettest.Event[*loop.RunCompleted](t, second[len(second)-1]).Output)
	inj := fleettest.OfType(second, loop.EventUserMessageInjected)
	require.Len(t, inj, 1)
	require.Equal(t, "while nobody owns it", fleettest.Event[*loop.UserMessageInjected](t, inj[0]).Content)
	st, err := f.Client.Status(ctx, rep.RunID)
	require.NoError(t, err)
	require.Equal(t, bus.StateCompleted, st.Status)
	require.Nil(t, st.Error)
}

// TestControlErrors checks the error replies of the run endpoints: an
// unknown run is NotFound, a bad decision or an empty inject is
// InvalidRequest naming the field, steering a finished run is
// InvalidRequest.
func TestControlErrors(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t, fleettest.Options{AgentsYAML: fleetAgents})
	ctx := context.Background()
	_, err := f.Client.Approve(ctx, "no-such-run", "c1", loop.Approve, "")
	apiError(t, err, bus.TypeNotFound)
	_, err = f.Client.Cancel(ctx, "no-such-run", "")
	apiError(t, err, bus.TypeNotFound)
	_, err = f.Client.Inject(ctx, "no-such-run", "x")
	apiError(t, err, bus.TypeNotFound)

	rep, err := f.Client.Submit(ctx, &bus.RunRequest{Agent: "quick", Input: bus.TextInput("x")})
	require.NoError(t, err)
	f.Events(rep.RunID, 10*time.Second)
	require.Eventually(t, func() bool {
		st, err := f.Client.Status(ctx, rep.RunID)
		return err == nil && st.Status == bus.StateCompleted
	}, 5*time.Second, 10*time.Millisecond)
	_, err = f.Client.Approve(ctx, rep.RunID, "c1", "maybe", "")
	require.Contains(t, apiError(t, err, bus.TypeInvalidRequest).Message, "decision")
	_, err = f.Client.Inject(ctx, rep.RunID, "")
	require.Contains(t, apiError(t, err, bus.TypeInvalidRequest).Message, "content")
	_, err = f.Client.Inject(ctx, rep.RunID, "too late")
	require.Contains(t, apiError(t, err, bus.TypeInvalidRequest).Message, "completed")
}

// TestCancelBeforeClaimAndDuringApproval: a cancel made before any worker
// claimed the run fails it as soon as one does, and a cancel while the run
// waits for an approval ends the wait at once; each with one terminal
// run_failed RunCancelled.
func TestCancelBeforeClaimAndDuringApproval(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t, fleettest.Options{AgentsYAML: fleetAgents})
	ctx := context.Background()
	require.NoError(t, f.Workers[0].Stop(ctx))
	queued, err := f.Client.Submit(ctx, &bus.RunRequest{Agent: "calc", Input: bus.TextInput("x")})
	require.NoError(t, err)
	gated, err := f.Client.Submit(ctx, &bus.RunRequest{Agent: "gated", Input: bus.TextInput("x")})
	require.NoError(t, err)
	_, err = f.Client.Cancel(ctx, queued.RunID, "never mind")
	require.NoError(t, err)
	// Heartbeats 15s apart (the most the default 30s ack wait allows): the
	// cancel record a notification missed is read at a beat, so a wait the
	// notification did not end would last about that long.
	f.StartWorker(withConfig(workerConfig(t, f, "wB"), func(c *worker.Config) { c.Heartbeat = 15 * time.Second }))

	envs := f.Events(queued.RunID, 30*time.Second) // generous: a loaded machine starts the worker slowly
	checkOneSubmission(t, queued.RunID, envs)
	require.Equal(t, "RunCancelled", fleettest.Event[*loop.RunFailed](t, envs[len(envs)-1]).Error.Type)
	require.Empty(t, fleettest.OfType(envs, loop.EventToolCallStarted), "a cancelled run ran a tool: %v", fleettest.Types(envs))

	waitEvent(t, f, gated.RunID, loop.EventApprovalRequired, 30*time.Second)
	t0 := time.Now()
	_, err = f.Client.Cancel(ctx, gated.RunID, "abandon")
	require.NoError(t, err)
	envs = f.Events(gated.RunID, 30*time.Second)
	require.Less(t, time.Since(t0), 8*time.Second, "the cancel ended the approval wait only at a heartbeat's cancel check, not at its notification")
	checkOneSubmission(t, gated.RunID, envs)
	require.Equal(t, "RunCancelled", fleettest.Event[*loop.RunFailed](t, envs[len(envs)-1]).Error.Type)
	require.Empty(t, fleettest.OfType(envs, loop.EventToolCallStarted))
	waitIdle(t, f, 30*time.Second)
}

// TestRestartAsksForApprovalAgain: a restarted run asks afresh about a
// call id the last submission had a decision for (a scripted or replayed
// call reuses its id): the old decision does not apply.
func TestRestartAsksForApprovalAgain(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t, fleettest.Options{AgentsYAML: fleetAgents})
	ctx := context.Background()
	rep, err := f.Client.Submit(ctx, &bus.RunRequest{Agent: "gated", Input: bus.TextInput("deploy")})
	require.NoError(t, err)
	waitEvent(t, f, rep.RunID, loop.EventApprovalRequired, 10*time.Second)
	_, err = f.Client.Approve(ctx, rep.RunID, "c1", loop.Reject, "not today")
	require.NoError(t, err)
	first := f.Events(rep.RunID, 10*time.Second)
	waitIdle(t, f, 10*time.Second)

	_, err = f.Client.Submit(ctx, &bus.RunRequest{RunID: rep.RunID, Agent: "gated", Input: bus.TextInput("deploy"), IfRunExists: bus.IfExistsRestart})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		return len(fleettest.OfType(runEvents(t, f, rep.RunID), loop.EventApprovalRequired)) == 2
	}, 10*time.Second, 20*time.Millisecond)
	ar, err := f.Client.Approve(ctx, rep.RunID, "c1", loop.Approve, "now")
	require.NoError(t, err)
	require.True(t, ar.Accepted, "the restart cleared the old decision")
	require.Eventually(t, func() bool {
		envs := runEvents(t, f, rep.RunID)
		return envs[len(envs)-1].IsTerminal() && len(envs) > len(first)
	}, 10*time.Second, 20*time.Millisecond)
	second := runEvents(t, f, rep.RunID)[len(first):]
	checkOneSubmissionFrom(t, second)
	res := fleettest.OfType(second, loop.EventApprovalResolved)
	require.Len(t, res, 1)
	require.Equal(t, loop.Approve, fleettest.Event[*loop.ApprovalResolved](t, res[0]).Decision)
}

// TestResubmissionAfterCancelRuns: a run cancelled through the API — one
// a raw publish started, whose record counts no submission — runs to its
// end when submitted again, through the API or by another raw publish:
// the cancel belonged to the submission it ended.
func TestResubmissionAfterCancelRuns(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t, fleettest.Options{AgentsYAML: fleetAgents})
	ctx := context.Background()
	for _, via := range []string{"api", "raw"} {
		runID := "cancelled-then-" + via
		publishRaw(t, f, "napper", []byte(`{"run_id":"`+runID+`","input":"x"}`), nil)
		waitEvent(t, f, runID, loop.EventToolCallStarted, 10*time.Second)
		_, err := f.Client.Cancel(ctx, runID, "stop the first")
		require.NoError(t, err)
		first := f.Events(runID, 10*time.Second)
		require.Equal(t, "RunCancelled", fleettest.Event[*loop.RunFailed](t, first[len(first)-1]).Error.Type)
		waitIdle(t, f, 10*time.Second)

		if via == "api" {
			_, err = f.Client.Submit(ctx, &bus.RunRequest{RunID: runID, Agent: "napper", Input: bus.TextInput("x")})
			require.NoError(t, err)
		} else {
			publishRaw(t, f, "napper", []byte(`{"run_id":"`+runID+`","input":"x"}`), nil)
		}
		var envs []*bus.Envelope
		require.Eventually(t, func() bool {
			envs = runEvents(t, f, runID)
			return len(envs) > len(first) && envs[len(envs)-1].IsTerminal()
		}, 15*time.Second, 20*time.Millisecond)
		second := envs[len(first):]
		checkOneSubmissionFrom(t, second)
		require.Equal(t, loop.EventRunCompleted, second[len(second)-1].Type, "%s: %v", via, fleettest.Types(second))
	}
}
