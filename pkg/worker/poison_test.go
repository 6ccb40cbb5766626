package worker_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/internal/fleettest"
	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/service"
	"github.com/lovia-fleet/lovia/pkg/worker"
)

// TestPoisonRequests proves requirement 5 (fail closed, never a crash or a
// silent drop): undecodable bytes, an unknown agent, an invalid run id and
// an oversized request each get a clear error — an error reply through
// the API, a run_failed event on the run's subject for a raw publish — and
// are terminated rather than redelivered (the RUNS stream ends empty, the
// consumer has nothing pending and redelivered nothing); afterwards the
// same worker still completes a normal run.
func TestPoisonRequests(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t, fleettest.Options{AgentsYAML: fleetAgents, Worker: func(c *worker.Config) {
		c.MaxRequestBytes = 4096
	}})
	ctx := context.Background()

	failedWith := func(runID, typ string) *loop.RunFailed {
		t.Helper()
		envs := f.Events(runID, 10*time.Second)
		require.Len(t, envs, 1, "run %s: %v", runID, fleettest.Types(envs))
		checkOneSubmission(t, runID, envs)
		require.Equal(t, "calc", envs[0].Agent, "run %s: the run_failed names the agent of the subject", runID)
		rf := fleettest.Event[*loop.RunFailed](t, envs[0])
		require.Equal(t, typ, rf.Error.Type, "run %s: %+v", runID, rf.Error)
		require.NotEmpty(t, rf.Error.Message)
		require.NotEmpty(t, rf.Error.Hint)
		return rf
	}

	// Undecodable bytes on the submit subject.
	publishRaw(t, f, "calc", []byte{0xc1, 0xff, 0x00, 'x'}, nats.Header{"Nats-Msg-Id": []string{"bad-bytes"}})
	rf := failedWith("bad-bytes", bus.TypeInvalidRequest)
	t.Logf("undecodable: %s / %s", rf.Error.Message, rf.Error.Hint)
	// Truncated JSON with a run id in the header.
	publishRaw(t, f, "calc", []byte(`{"run_id":"trunc","input":`), nats.Header{"Nats-Msg-Id": []string{"bad-json"}, "Content-Type": []string{"application/json"}})
	failedWith("bad-json", bus.TypeInvalidRequest)
	// A field that breaks the contract: the error names it.
	publishRaw(t, f, "calc", []byte(`{"input":"x","max_turns":-1}`), nats.Header{"Nats-Msg-Id": []string{"bad-field"}})
	require.Contains(t, failedWith("bad-field", bus.TypeInvalidRequest).Error.Message, "max_turns")

	// Unknown agent by raw publish: routed by agent, it reaches no worker
	// (none serves the agent) and waits, visibly: the sweep indexes it as
	// queued, and its status says why.
	publishRaw(t, f, "nosuch", []byte(`{"run_id":"unknown-agent","input":"x"}`), nil)
	var st *bus.StatusReply
	require.Eventually(t, func() bool {
		var err error
		st, err = f.Client.Status(ctx, "unknown-agent")
		return err == nil
	}, 15*time.Second, 50*time.Millisecond, "the raw publish to an agent no worker serves was never indexed")
	require.Equal(t, bus.StateQueued, st.Status)
	require.Contains(t, st.Waiting, `no worker serves agent "nosuch"`)
	runs, err := f.JS.Stream(ctx, "LOVIA_RUNS")
	require.NoError(t, err)
	require.NoError(t, runs.Purge(ctx, jetstream.WithPurgeSubject("lovia.submit.nosuch")))

	// Oversized raw request.
	big := `{"input":"` + strings.Repeat("x", 8000) + `"}`
	publishRaw(t, f, "calc", []byte(big), nats.Header{"Nats-Msg-Id": []string{"too-big"}})
	require.Contains(t, failedWith("too-big", bus.TypeInvalidRequest).Error.Message, "4096")

	// A body run id that is not a subject token, with nothing else to name
	// the run: the failure goes to run-<stream seq>.
	seq := publishRaw(t, f, "calc", []byte(`{"run_id":"a.b","input":"x"}`), nil)
	require.Contains(t, failedWith("run-"+itoa(seq), bus.TypeInvalidRequest).Error.Message, "run_id")

	// The API answers errors without enqueueing anything.
	_, err = f.Client.Submit(ctx, &bus.RunRequest{Agent: "nosuch", Input: bus.TextInput("x")})
	ae := apiError(t, err, bus.TypeUnknownAgent)
	require.Contains(t, ae.Hint, "calc")
	_, err = f.Client.Submit(ctx, &bus.RunRequest{RunID: "a.b", Agent: "calc", Input: bus.TextInput("x")})
	ae = apiError(t, err, bus.TypeInvalidRequest)
	require.Contains(t, ae.Message, "run_id")
	_, err = f.Client.Submit(ctx, &bus.RunRequest{Input: bus.TextInput("x")})
	require.Contains(t, apiError(t, err, bus.TypeInvalidRequest).Message, "agent")
	rep, err := f.Conn.Request("lovia.api.submit", []byte("\x00\x01garbage"), 5*time.Second)
	require.NoError(t, err)
	require.Equal(t, "400", rep.Header.Get("Nats-Service-Error-Code"))
	rep, err = f.Conn.Request("lovia.api.submit", []byte(`{"agent":"calc","input":"x","if_run_exists":"sometimes"}`), 5*time.Second)
	require.NoError(t, err)
	require.Equal(t, "400", rep.Header.Get("Nats-Service-Error-Code"))
	require.Contains(t, string(rep.Data), "if_run_exists")
	// An oversized input through the API (a small limit, so the message
	// itself stays under the server's max payload).
	small, err := service.NewAPI(service.Config{Conn: f.Conn, Store: f.Store, Catalog: f.Catalog, MaxInputBytes: 1000})
	require.NoError(t, err)
	_, err = small.Submit(ctx, &bus.RunRequest{Agent: "calc", Input: bus.TextInput(strings.Repeat("x", 2000))}, bus.JSON)
	require.Error(t, err)
	require.Contains(t, apiError(t, bus.ErrorFor(err), bus.TypeInvalidRequest).Message, "input")
	// A request over the server's max payload never reaches anyone; the
	// client gets the error at once.
	_, err = f.Client.Submit(ctx, &bus.RunRequest{Agent: "calc", Input: bus.TextInput(strings.Repeat("x", 1<<20))})
	require.Error(t, err)

	// The worker still serves.
	ok, err := f.Client.Submit(ctx, &bus.RunRequest{Agent: "calc", Input: bus.TextInput("x")})
	require.NoError(t, err)
	envs := f.Events(ok.RunID, 10*time.Second)
	checkOneSubmission(t, ok.RunID, envs)
	require.Equal(t, loop.EventRunCompleted, envs[len(envs)-1].Type)

	waitIdle(t, f, 10*time.Second)
	info, err := agentConsumerInfo(ctx, f, "calc")
	require.NoError(t, err)
	require.EqualValues(t, 7, info.Delivered.Stream)
	require.EqualValues(t, 6, info.Delivered.Consumer, "a request was delivered more than once (or one of another agent was delivered)")
}

// TestPoisonLeavesOtherRunsAlone proves the fail-closed path of
// requirement 5 does not harm other runs: a malformed request whose run id
// (Nats-Msg-Id) names a completed run publishes nothing and leaves the run
// completed; an invalid Nats-Msg-Id still gets run_failed on
// run-<stream seq>; an API without a catalog of its own refuses a submit
// for an agent the fleet does not serve, naming the agents the live fleet
// serves (routing by agent: the same answer on every API instance).
func TestPoisonLeavesOtherRunsAlone(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t, fleettest.Options{AgentsYAML: fleetAgents})
	ctx := context.Background()

	publishRaw(t, f, "quick", []byte(`{"run_id":"keep-me","input":"x"}`), nats.Header{"Nats-Msg-Id": []string{"first-request"}})
	done := f.Events("keep-me", 10*time.Second)
	waitIdle(t, f, 10*time.Second)
	publishRaw(t, f, "quick", []byte("not a request"), nats.Header{"Nats-Msg-Id": []string{"keep-me"}})
	waitIdle(t, f, 10*time.Second)
	require.Len(t, runEvents(t, f, "keep-me"), len(done))
	st, err := f.Client.Status(ctx, "keep-me")
	require.NoError(t, err)
	require.Equal(t, bus.StateCompleted, st.Status)
	require.Equal(t, "ok", st.Result.Output)

	seq := publishRaw(t, f, "quick", []byte(`{"input":"x"}`), nats.Header{"Nats-Msg-Id": []string{"bad.id"}})
	envs := f.Events("run-"+itoa(seq), 10*time.Second)
	require.Len(t, envs, 1)
	require.Equal(t, bus.TypeInvalidRequest, fleettest.Event[*loop.RunFailed](t, envs[0]).Error.Type)

	open, err := service.NewAPI(service.Config{Conn: f.Conn, Store: f.Store})
	require.NoError(t, err)
	_, err = open.Submit(ctx, &bus.RunRequest{Agent: "nosuch", Input: bus.TextInput("x")}, bus.JSON)
	ae := apiError(t, bus.ErrorFor(err), bus.TypeUnknownAgent)
	require.Contains(t, ae.Message, "nosuch")
	for _, name := range []string{"calc", "gated", "quick"} {
		require.Contains(t, ae.Hint, name, "the hint names the agents the live fleet serves")
	}
	rep, err := open.Submit(ctx, &bus.RunRequest{Agent: "quick", Input: bus.TextInput("x")}, bus.JSON)
	require.NoError(t, err, "an agent the fleet serves is accepted by an API without a catalog")
	envs = f.Events(rep.RunID, 10*time.Second)
	require.Equal(t, loop.EventRunCompleted, envs[len(envs)-1].Type)
	waitIdle(t, f, 10*time.Second)
}
