package worker_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/internal/fleettest"
	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/client"
	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/store"
)

// TestSubmitEncodings proves requirement 1: a run submitted through
// <p>.api.submit or by a raw JetStream publish to <p>.submit.<agent> runs;
// a raw publish's run id is the body's run_id, else Nats-Msg-Id, else
// run-<stream seq>; the subject's agent wins over the body's; a tail from
// the start sees every event; and the events come in the encoding the
// request arrived in (Content-Type of every stored message and
// Envelope.Encoding), unless the request's encoding field overrides it.
func TestSubmitEncodings(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t, fleettest.Options{AgentsYAML: fleetAgents})
	ctx := context.Background()
	mp, err := client.New(f.Conn, client.Options{Encoding: bus.Msgpack})
	require.NoError(t, err)

	type run struct {
		name  string
		runID string
		want  bus.Encoding
		agent string
	}
	var runs []run
	submit := func(name string, c *client.Client, req *bus.RunRequest, want bus.Encoding) {
		rep, err := c.Submit(ctx, req)
		require.NoError(t, err, name)
		require.Equal(t, bus.StateQueued, rep.Status, name)
		require.Equal(t, "lovia.events."+rep.RunID, rep.EventsSubject, name)
		runs = append(runs, run{name, rep.RunID, want, req.Agent})
	}
	submit("api json", f.Client, &bus.RunRequest{Agent: "quick", Input: bus.TextInput("hi")}, bus.JSON)
	submit("api msgpack", mp, &bus.RunRequest{Agent: "quick", Input: bus.TextInput("hi")}, bus.Msgpack)
	submit("api json, encoding msgpack", f.Client, &bus.RunRequest{Agent: "quick", Input: bus.TextInput("hi"), Encoding: bus.Msgpack}, bus.Msgpack)
	submit("api msgpack, encoding json", mp, &bus.RunRequest{Agent: "calc", Input: bus.TextInput("hi"), Encoding: bus.JSON}, bus.JSON)

	// Raw publishes, as the nats CLI or a client in another language would.
	publishRaw(t, f, "quick", []byte(`{"run_id":"raw-body-id","input":"hi"}`),
		nats.Header{"Nats-Msg-Id": []string{"raw-header-id"}, "Content-Type": []string{"application/json"}})
	runs = append(runs, run{"raw json, body run_id wins over Nats-Msg-Id", "raw-body-id", bus.JSON, "quick"})

	body, err := bus.Marshal(bus.Msgpack, &bus.RunRequest{Input: bus.TextInput("hi")})
	require.NoError(t, err)
	publishRaw(t, f, "calc", body, nats.Header{"Nats-Msg-Id": []string{"raw-msgpack"}, "Content-Type": []string{"application/msgpack"}})
	runs = append(runs, run{"raw msgpack, run id from Nats-Msg-Id", "raw-msgpack", bus.Msgpack, "calc"})

	seq := publishRaw(t, f, "quick", []byte(`{"input":"hi"}`), nil)
	runs = append(runs, run{"raw json without headers, run id run-<seq>", "run-" + itoa(seq), bus.JSON, "quick"})

	publishRaw(t, f, "quick", []byte(`{"run_id":"raw-override","agent":"calc","input":"hi","encoding":"msgpack"}`), nil)
	runs = append(runs, run{"raw sniffed json, encoding msgpack, subject agent wins", "raw-override", bus.Msgpack, "quick"})

	for _, r := range runs {
		envs := f.Events(r.runID, 15*time.Second)
		require.NotEmpty(t, envs, r.name)
		require.Equal(t, loop.EventRunStarted, envs[0].Type, r.name)
		require.Equal(t, loop.EventRunCompleted, envs[len(envs)-1].Type, r.name)
		for _, e := range envs {
			require.Equal(t, r.agent, e.Agent, r.name)
		}
		st := readStored(t, f, "lovia.events."+r.runID)
		require.Len(t, st, len(envs), r.name)
		for i, s := range st {
			require.Equal(t, r.want.ContentType(), s.Header.Get("Content-Type"), "%s: event %d (%s)", r.name, i, s.Env.Type)
			require.Equal(t, r.want, s.Env.Encoding, "%s: event %d", r.name, i)
			require.Equal(t, r.runID+"."+itoa(s.Env.Seq), s.Header.Get("Nats-Msg-Id"), r.name)
			require.Equal(t, string(s.Env.Type), s.Header.Get("Lovia-Event"), r.name)
			require.Equal(t, itoa(s.Env.Seq), s.Header.Get("Lovia-Seq"), r.name)
		}
		checkOneSubmission(t, r.runID, envs)
		stp, err := f.Client.Status(ctx, r.runID)
		require.NoError(t, err, r.name)
		require.Equal(t, r.agent, stp.Agent, r.name)
	}
	// A tail opened before the run exists waits for its first event and
	// follows it to the terminal one.
	tctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	tail, err := f.Client.Tail(tctx, "tailed-early", bus.FromStart())
	require.NoError(t, err)
	defer tail.Close(context.Background())
	publishRaw(t, f, "calc", []byte(`{"run_id":"tailed-early","input":"hi"}`), nil)
	var early []*bus.Envelope
	for env, err := range tail.All(tctx) {
		require.NoError(t, err)
		early = append(early, env)
	}
	checkOneSubmission(t, "tailed-early", early)
	require.Equal(t, loop.EventRunStarted, early[0].Type)
	require.Equal(t, loop.EventRunCompleted, early[len(early)-1].Type)

	// Nothing was published under the losing header id.
	require.Empty(t, readStored(t, f, "lovia.events.raw-header-id"))
	waitIdle(t, f, 10*time.Second)
}

// TestConcurrentSubmitSameRunID proves requirement 7: the same run id
// submitted twice at once, through the API or by raw publishes with
// different Nats-Msg-Ids, is one run: one run_started, one terminal event,
// contiguous seqs.
func TestConcurrentSubmitSameRunID(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t, fleettest.Options{AgentsYAML: fleetAgents, Workers: 2})
	ctx := context.Background()

	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range 2 {
		wg.Go(func() {
			_, errs[i] = f.Client.Submit(ctx, &bus.RunRequest{RunID: "twice-api", Agent: "calc", Input: bus.TextInput("x")})
		})
	}
	for i := range 2 {
		wg.Go(func() {
			publishRaw(t, f, "calc", []byte(`{"run_id":"twice-raw","input":"x"}`), nats.Header{"Nats-Msg-Id": []string{"twice-raw-" + itoa(uint64(i))}})
		})
	}
	wg.Wait()
	require.NoError(t, errs[0])
	require.NoError(t, errs[1])
	for _, id := range []string{"twice-api", "twice-raw"} {
		f.Events(id, 15*time.Second)
	}
	waitIdle(t, f, 15*time.Second)
	for _, id := range []string{"twice-api", "twice-raw"} {
		envs := runEvents(t, f, id)
		checkOneSubmission(t, id, envs)
		require.Len(t, fleettest.OfType(envs, loop.EventRunStarted), 1, "%s: %v", id, fleettest.Types(envs))
		require.Empty(t, fleettest.OfType(envs, bus.EventRunResumed), "%s: %v", id, fleettest.Types(envs))
		require.Equal(t, loop.EventRunCompleted, envs[len(envs)-1].Type)
	}
}

// TestCompletedRunRedeliveredPublishesNothing proves requirement 8: a
// completed run whose request arrives again (here: republished with a new
// Nats-Msg-Id, as a lost ack's redelivery would bring it) finds the
// completed checkpoint and publishes nothing new — still exactly one
// terminal event — and the status keeps the stored result.
func TestCompletedRunRedeliveredPublishesNothing(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t, fleettest.Options{AgentsYAML: fleetAgents})
	ctx := context.Background()
	publishRaw(t, f, "calc", []byte(`{"run_id":"done-once","input":"x"}`), nats.Header{"Nats-Msg-Id": []string{"done-once"}})
	first := f.Events("done-once", 15*time.Second)
	waitIdle(t, f, 10*time.Second)

	for i, h := range []string{"done-once-again", "done-once-third"} {
		publishRaw(t, f, "calc", []byte(`{"run_id":"done-once","input":"something else"}`), nats.Header{"Nats-Msg-Id": []string{h}})
		waitIdle(t, f, 10*time.Second)
		envs := runEvents(t, f, "done-once")
		require.Len(t, envs, len(first), "republish %d: %v", i, fleettest.Types(envs))
		checkOneSubmission(t, "done-once", envs)
	}
	st, err := f.Client.Status(ctx, "done-once")
	require.NoError(t, err)
	require.Equal(t, bus.StateCompleted, st.Status)
	require.Equal(t, "The answer is 84.", st.Result.Output)
	require.Equal(t, 1, st.Attempt, "a replay is not a new attempt")

	// Through the API, the same run answers with its stored result.
	rep, err := f.Client.Submit(ctx, &bus.RunRequest{RunID: "done-once", Agent: "calc", Input: bus.TextInput("x")})
	require.NoError(t, err)
	require.True(t, rep.Replayed)
	require.Equal(t, bus.StateCompleted, rep.Status)
	require.Equal(t, "The answer is 84.", rep.Result.Output)
	require.Equal(t, 2, rep.Result.Turns)
	require.Equal(t, loop.Usage{InputTokens: 2, OutputTokens: 2, TotalTokens: 4}, rep.Result.Usage, "the replay carries the stored usage")
	require.Equal(t, "calc", rep.Result.FinalAgent)
	require.Len(t, runEvents(t, f, "done-once"), len(first))
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }

// TestResubmitRightAfterTerminalIsReplayed: the moment a client sees a
// run's terminal event, the run's status is final, so resubmitting the
// completed run is answered as a replay (docs/protocol.md#run-request) — not taken for a
// submission still in flight, which would leave a streaming client (the
// gateway's Accept: text/event-stream submit) waiting for events that never
// come. Twenty runs narrow any window between the event and the index.
func TestResubmitRightAfterTerminalIsReplayed(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t, fleettest.Options{AgentsYAML: fleetAgents})
	ctx := context.Background()
	for i := range 20 {
		rep, err := f.Client.Submit(ctx, &bus.RunRequest{Agent: "quick", Input: bus.TextInput("x")})
		require.NoError(t, err)
		envs := f.Events(rep.RunID, 10*time.Second)
		require.Equal(t, loop.EventRunCompleted, envs[len(envs)-1].Type)
		again, err := f.Client.Submit(ctx, &bus.RunRequest{RunID: rep.RunID, Agent: "quick", Input: bus.TextInput("x")})
		require.NoError(t, err)
		require.True(t, again.Replayed, "run %d: resubmitted after its terminal event, status %s", i, again.Status)
		require.Equal(t, "ok", again.Result.Output)
		st, err := f.Client.Status(ctx, rep.RunID)
		require.NoError(t, err)
		require.Equal(t, bus.StateCompleted, st.Status)
	}
}

// TestQueuedRunWithLostRequestIsEnqueuedAgain: the process serving a submit
// dies after indexing the run as queued and before enqueueing its request.
// The client retries with the same run id: the run must then be enqueued
// and run once, not be answered "queued" forever.
func TestQueuedRunWithLostRequestIsEnqueuedAgain(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t, fleettest.Options{AgentsYAML: fleetAgents})
	ctx := context.Background()
	// What the dead process left: an index record, no request.
	_, err := f.Store.Runs().Create(ctx, store.RunRecord{RunID: "lost-request", Agent: "calc", Status: store.RunQueued, Submissions: 1})
	require.NoError(t, err)

	// The retry, and more retries while it is queued or running: one
	// request in all (the stream drops the duplicates).
	for range 4 {
		rep, err := f.Client.Submit(ctx, &bus.RunRequest{RunID: "lost-request", Agent: "calc", Input: bus.TextInput("x")})
		require.NoError(t, err)
		require.NotEqual(t, bus.StateFailed, rep.Status)
	}
	envs := f.Events("lost-request", 15*time.Second)
	require.Equal(t, loop.EventRunCompleted, envs[len(envs)-1].Type)
	waitIdle(t, f, 10*time.Second)
	envs = runEvents(t, f, "lost-request")
	checkOneSubmission(t, "lost-request", envs)
	require.Len(t, fleettest.OfType(envs, loop.EventRunStarted), 1, "%v", fleettest.Types(envs))
}

// TestIndexStuckRunningIsRepaired: a worker published a run's terminal
// event and then failed to record the outcome in the run index (a crash, a
// store error), leaving the run "running" with nobody running it. Status
// and a resubmission must see the run as it ended, not as in flight for
// ever — but only once no worker holds the run.
func TestIndexStuckRunningIsRepaired(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t, fleettest.Options{AgentsYAML: fleetAgents})
	ctx := context.Background()
	submitted := time.Now()
	rep, err := f.Client.Submit(ctx, &bus.RunRequest{RunID: "stuck-running", Agent: "calc", Input: bus.TextInput("x")})
	require.NoError(t, err)
	f.Events(rep.RunID, 15*time.Second)
	waitIdle(t, f, 10*time.Second)

	// What the failed index update left: the claim's record, from before
	// the terminal event.
	past, err := store.Open(ctx, f.JS, store.Config{Clock: func() time.Time { return submitted }})
	require.NoError(t, err)
	_, err = past.Runs().Modify(ctx, rep.RunID, func(r *store.RunRecord) error {
		r.Status, r.Result, r.Usage, r.FinishedAt = store.RunRunning, nil, nil, time.Time{}
		return nil
	})
	require.NoError(t, err)

	// While a worker holds the run, the record stands.
	_, err = f.Store.Control().SetHoldings(ctx, "w9", []store.Holding{{RunID: rep.RunID, Ack: "$JS.ACK.fake", Attempt: 1}})
	require.NoError(t, err)
	st, err := f.Client.Status(ctx, rep.RunID)
	require.NoError(t, err)
	require.Equal(t, bus.StateRunning, st.Status)

	_, err = f.Store.Control().ClearHoldings(ctx, "w9", 0)
	require.NoError(t, err)
	// The worker that ran it drops the run from its own holdings record
	// lazily (with its next write, within holdLinger when none comes).
	require.Eventually(t, func() bool {
		owned, err := f.Store.Control().Owned(ctx, rep.RunID)
		return err == nil && !owned
	}, 15*time.Second, 20*time.Millisecond, "waiting for no holdings record to list the run")
	st, err = f.Client.Status(ctx, rep.RunID)
	require.NoError(t, err)
	require.Equal(t, bus.StateCompleted, st.Status, "repaired from the terminal event")
	require.Equal(t, "The answer is 84.", st.Result.Output)
	again, err := f.Client.Submit(ctx, &bus.RunRequest{RunID: rep.RunID, Agent: "calc", Input: bus.TextInput("x")})
	require.NoError(t, err)
	require.True(t, again.Replayed, "a resubmission reads the stored result")
	require.Equal(t, "The answer is 84.", again.Result.Output)
}

// TestRestartSurvivesAnEarlyRelease: a restart of a completed run whose
// first delivery is released before the run starts (here a claimer takes
// the request and NAKs it at once, as a worker hitting a transient error
// or shutting down would) must still restart the run on the next delivery,
// not replay the old result.
func TestRestartSurvivesAnEarlyRelease(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t, fleettest.Options{AgentsYAML: fleetAgents})
	ctx := context.Background()
	rep, err := f.Client.Submit(ctx, &bus.RunRequest{RunID: "restart-early", Agent: "calc", Input: bus.TextInput("x")})
	require.NoError(t, err)
	f.Events(rep.RunID, 15*time.Second)
	waitIdle(t, f, 10*time.Second)
	require.NoError(t, f.Workers[0].Stop(ctx))

	_, err = f.Client.Submit(ctx, &bus.RunRequest{RunID: rep.RunID, Agent: "calc", Input: bus.TextInput("x"), IfRunExists: bus.IfExistsRestart})
	require.NoError(t, err)
	cons, err := f.JS.Consumer(ctx, "LOVIA_RUNS", "agent-calc")
	require.NoError(t, err)
	batch, err := cons.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
	require.NoError(t, err)
	n := 0
	for m := range batch.Messages() {
		require.NoError(t, m.Nak())
		n++
	}
	require.Equal(t, 1, n, "the restart request was not delivered")

	f.StartWorker(workerConfig(t, f, "w2"))
	require.Eventually(t, func() bool {
		return len(fleettest.OfType(runEvents(t, f, rep.RunID), loop.EventRunStarted)) == 2
	}, 15*time.Second, 50*time.Millisecond, "the restart was replayed instead of run")
	waitIdle(t, f, 10*time.Second)
	envs := runEvents(t, f, rep.RunID)
	require.Len(t, fleettest.OfType(envs, loop.EventRunCompleted), 2, "%v", fleettest.Types(envs))
	require.Equal(t, loop.EventRunCompleted, envs[len(envs)-1].Type)
}

// TestEventsNameTheirRequest: every event a claim publishes carries the
// stream sequence of its run request (Lovia-Request), and a resubmission's
// events carry the new request's: a later claim tells them apart exactly.
func TestEventsNameTheirRequest(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t, fleettest.Options{AgentsYAML: fleetAgents})
	ctx := context.Background()
	rep, err := f.Client.Submit(ctx, &bus.RunRequest{RunID: "stamped", Agent: "calc", Input: bus.TextInput("x")})
	require.NoError(t, err)
	f.Events(rep.RunID, 15*time.Second)
	waitIdle(t, f, 10*time.Second)
	_, err = f.Client.Submit(ctx, &bus.RunRequest{RunID: rep.RunID, Agent: "calc", Input: bus.TextInput("x"), IfRunExists: bus.IfExistsRestart})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		return len(fleettest.OfType(runEvents(t, f, rep.RunID), loop.EventRunCompleted)) == 2
	}, 15*time.Second, 50*time.Millisecond)

	requests := map[string]int{}
	var order []string
	for _, s := range readStored(t, f, "lovia.events."+rep.RunID) {
		r := s.Header.Get(bus.HeaderRequest)
		require.NotEmpty(t, r, "event %d is not stamped", s.Env.Seq)
		if requests[r] == 0 {
			order = append(order, r)
		}
		requests[r]++
	}
	require.Len(t, order, 2, "two submissions, two requests: %v", requests)
	require.NotEqual(t, order[0], order[1])
}

// TestLostQueuedRequestIsPublishedAgain: a queued run whose request the
// runs stream no longer holds (past its max age, purged) is published
// again when the run is resubmitted, under a new message id — the
// original one may still be inside the deduplication window, where a
// publish under it would be dropped — and runs once.
func TestLostQueuedRequestIsPublishedAgain(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t, fleettest.Options{AgentsYAML: fleetAgents, Workers: -1})
	ctx := context.Background()
	req := &bus.RunRequest{RunID: "dropped", Agent: "calc", Input: bus.TextInput("x")}
	_, err := f.Client.Submit(ctx, req)
	require.NoError(t, err)
	// The stream loses the request before any worker claims it. (The
	// record does not name it: a first submission's claim records it.)
	runs, err := f.JS.Stream(ctx, "LOVIA_RUNS")
	require.NoError(t, err)
	info, err := runs.Info(ctx)
	require.NoError(t, err)
	require.NoError(t, runs.DeleteMsg(ctx, info.State.LastSeq))

	// The client's retry (twice: the second finds the new request stored).
	for range 2 {
		rep, err := f.Client.Submit(ctx, req)
		require.NoError(t, err)
		require.Equal(t, bus.StateQueued, rep.Status)
	}
	e, err := f.Store.Runs().Get(ctx, "dropped")
	require.NoError(t, err)
	require.Equal(t, 1, e.Record.Requeues)

	f.StartWorker(workerConfig(t, f, "w1"))
	envs := f.Events("dropped", 15*time.Second)
	require.Equal(t, loop.EventRunCompleted, envs[len(envs)-1].Type)
	waitIdle(t, f, 10*time.Second)
	envs = runEvents(t, f, "dropped")
	checkOneSubmission(t, "dropped", envs)
	require.Len(t, fleettest.OfType(envs, loop.EventRunStarted), 1, "%v", fleettest.Types(envs))
}

// TestStaleSubmissionRequestIsNotRun: a request that names a submission
// that has already ended under another request (the API published it
// again, judging it lost, and it was not), or an earlier submission than
// the run's current one, is terminated without running: a failed run
// would otherwise run again and end twice, and a queued resubmission would
// run with the old request's input.
func TestStaleSubmissionRequestIsNotRun(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t, fleettest.Options{AgentsYAML: fleetAgents})
	ctx := context.Background()
	failed := &loop.ErrorInfo{Type: "ModelError", Message: "boom"}
	_, err := f.Store.Runs().Create(ctx, store.RunRecord{RunID: "ended", Agent: "quick", Status: store.RunFailed,
		Submissions: 1, RequestSeq: 1_000_000, Error: failed})
	require.NoError(t, err)
	_, err = f.Store.Runs().Create(ctx, store.RunRecord{RunID: "superseded", Agent: "quick", Status: store.RunFailed,
		Submissions: 3, Error: failed})
	require.NoError(t, err)
	for _, r := range []struct{ run, submission string }{{"ended", "1"}, {"superseded", "2"}} {
		publishRaw(t, f, "quick", []byte(`{"run_id":"`+r.run+`","input":"x"}`),
			nats.Header{bus.HeaderSubmission: []string{r.submission}})
	}
	// A current request, to show the worker still serves.
	publishRaw(t, f, "quick", []byte(`{"run_id":"current","input":"x"}`), nats.Header{bus.HeaderSubmission: []string{"1"}})
	waitEvent(t, f, "current", loop.EventRunCompleted, 15*time.Second)
	waitIdle(t, f, 10*time.Second)

	for _, run := range []string{"ended", "superseded"} {
		require.Empty(t, runEvents(t, f, run), "run %s", run)
		e, err := f.Store.Runs().Get(ctx, run)
		require.NoError(t, err)
		require.Equal(t, store.RunFailed, e.Record.Status, "run %s", run)
		require.Zero(t, e.Record.Attempt, "run %s", run)
	}
}
