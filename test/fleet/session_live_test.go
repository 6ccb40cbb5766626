package fleet

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/internal/fleettest"
	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/service"
	"github.com/lovia-fleet/lovia/pkg/store"
)

// chatAgents: "chat" waits in a tool (a run waiting on something long),
// then answers; its next leg's turn answers again. "slowtalk" streams its
// answer slowly (a message sent meanwhile is left in the mailbox when it
// ends).
const chatAgents = `
agents:
  - name: chat
    model: scripted
    tools: [sleep]
    script:
      - call: {name: sleep, args: {ms: 2500}, id: c1}
      - text: first answer
      - text: second answer
      - text: third answer
  - name: slowtalk
    model: scripted
    script:
      - text: one two three four five six
        delay_ms: 300
      - text: the next leg answers
`

// waitEvent waits until the run has an event of typ and returns the
// events so far.
func waitEvent(t *testing.T, f *fleettest.Fleet, runID string, typ loop.EventType) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tail, err := f.Client.Tail(ctx, runID, bus.FromStart())
	require.NoError(t, err)
	defer tail.Close(context.Background())
	for env, err := range tail.All(ctx) {
		require.NoError(t, err, "waiting for run %s's %s event", runID, typ)
		if env.Type == typ {
			return
		}
	}
	t.Fatalf("run %s had no %s event within 30s (or it ended without one)", runID, typ)
}

// sessionRuns lists the run ids the index has for a session.
func sessionRuns(t *testing.T, f *fleettest.Fleet, session string) []string {
	t.Helper()
	page, err := f.Client.ListRuns(context.Background(), &bus.RunsListRequest{Session: session})
	require.NoError(t, err)
	var ids []string
	for _, r := range page.Runs {
		ids = append(ids, r.RunID)
	}
	return ids
}

// TestSessionMessageDuringToolCallLandsInTheRun (issue 29 item 1, 4): a
// session's second message sent while its run waits in a long tool call
// is injected into that run (the default on_busy) and taken at its next
// turn; no second run starts, and the session holds one segment with both
// messages.
func TestSessionMessageDuringToolCallLandsInTheRun(t *testing.T) {
	f := fleettest.Start(t, fleettest.Options{AgentsYAML: chatAgents})
	ctx := context.Background()
	first, err := f.Client.Submit(ctx, &bus.RunRequest{Agent: "chat", SessionID: "s-inject", Input: bus.TextInput("hello")})
	require.NoError(t, err)
	require.False(t, first.Injected)
	waitEvent(t, f, first.RunID, loop.EventToolCallStarted)

	second, err := f.Client.Submit(ctx, &bus.RunRequest{Agent: "chat", SessionID: "s-inject", Input: bus.TextInput("and one more thing")})
	require.NoError(t, err)
	require.True(t, second.Injected, "a message to a session with a live run is injected into it: %+v", second)
	require.Equal(t, first.RunID, second.RunID, "the reply names the live run")
	require.NotEmpty(t, second.InjectToken)

	envs := f.Events(first.RunID, 30*time.Second)
	types := fleettest.Types(envs)
	require.Equal(t, "run_completed", types[len(types)-1])
	inj := fleettest.OfType(envs, loop.EventUserMessageInjected)
	require.Len(t, inj, 1, "the second message lands in the same run: %v", types)
	require.Equal(t, "and one more thing", fleettest.Event[*loop.UserMessageInjected](t, inj[0]).Content)
	require.Equal(t, []string{first.RunID}, sessionRuns(t, f, "s-inject"), "one run for the session")

	sess, err := f.Client.Session(ctx, "s-inject")
	require.NoError(t, err)
	require.Len(t, sess.Segments, 1)
	var users []string
	for _, e := range sess.Segments[0].Entries {
		if e.Kind == loop.KindInput && e.Role == loop.RoleUser {
			users = append(users, e.Content)
		}
	}
	require.Equal(t, []string{"hello", "and one more thing"}, users)
}

// TestSessionConcurrentSubmitsThroughTwoAPIs (issue 29 item 1): two API
// instances, each on its own connection, receive a message for the same
// new session at the same moment: one run starts, the other message is
// injected into it — for every one of several sessions, decided by the
// broker's compare-and-set on the session's slot, not by a lock.
func TestSessionConcurrentSubmitsThroughTwoAPIs(t *testing.T) {
	f := fleettest.Start(t, fleettest.Options{AgentsYAML: chatAgents})
	apis := []*service.API{f.API}
	for range 1 {
		a, err := service.NewAPI(service.Config{Conn: f.Connect(), Store: openStore(t, f), Catalog: f.Catalog})
		require.NoError(t, err)
		apis = append(apis, a)
	}
	ctx := context.Background()
	const sessions = 8
	runIDs := make([]string, sessions)
	for i := range sessions {
		session := fmt.Sprintf("s-race-%d", i)
		var wg sync.WaitGroup
		replies := make([]*bus.SubmitReply, 2)
		errs := make([]error, 2)
		start := make(chan struct{})
		for j, a := range apis {
			wg.Go(func() {
				<-start
				replies[j], errs[j] = a.Submit(ctx, &bus.RunRequest{Agent: "chat", SessionID: session,
					Input: bus.TextInput(fmt.Sprintf("message %d", j))}, bus.JSON)
			})
		}
		close(start)
		wg.Wait()
		require.NoError(t, errors.Join(errs...))
		require.Equal(t, replies[0].RunID, replies[1].RunID, "%s: both replies name the one run", session)
		require.NotEqual(t, replies[0].Injected, replies[1].Injected, "%s: one started the run, one was injected: %+v %+v", session, replies[0], replies[1])
		runIDs[i] = replies[0].RunID
	}
	for i, runID := range runIDs {
		session := fmt.Sprintf("s-race-%d", i)
		envs := f.Events(runID, 60*time.Second)
		require.Len(t, fleettest.OfType(envs, loop.EventUserMessageInjected), 1, "%s: the injected message reached the run", session)
		require.Equal(t, []string{runID}, sessionRuns(t, f, session), "%s: one run", session)
	}
}

func openStore(t *testing.T, f *fleettest.Fleet) *store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), f.JS, store.Config{})
	require.NoError(t, err)
	return st
}

// TestSessionQueueRefuseAndNextLeg (issue 29 item 1): on_busy queue runs
// the request after the live run, linked to it (previous_run_id); on_busy
// refuse answers SessionBusy naming the live run; a message left in the
// mailbox of a run that completes starts the session's next run.
func TestSessionQueueRefuseAndNextLeg(t *testing.T) {
	f := fleettest.Start(t, fleettest.Options{AgentsYAML: chatAgents})
	ctx := context.Background()
	first, err := f.Client.Submit(ctx, &bus.RunRequest{Agent: "chat", SessionID: "s-queue", Input: bus.TextInput("hello")})
	require.NoError(t, err)

	_, err = f.Client.Submit(ctx, &bus.RunRequest{Agent: "chat", SessionID: "s-queue", Input: bus.TextInput("no"), OnBusy: bus.OnBusyRefuse})
	var ae *bus.APIError
	require.ErrorAs(t, err, &ae)
	require.Equal(t, bus.TypeSessionBusy, ae.Type)
	require.Contains(t, ae.Message, first.RunID)

	q := &bus.RunRequest{RunID: "r-queued-1", Agent: "chat", SessionID: "s-queue", Input: bus.TextInput("later"), OnBusy: bus.OnBusyQueue}
	queued, err := f.Client.Submit(ctx, q)
	require.NoError(t, err)
	require.Equal(t, "r-queued-1", queued.RunID)
	require.Equal(t, first.RunID, queued.QueuedBehind)
	again, err := f.Client.Submit(ctx, q) // a retry queues nothing more
	require.NoError(t, err)
	require.Equal(t, first.RunID, again.QueuedBehind)

	require.Equal(t, "run_completed", lastType(f.Events(first.RunID, 30*time.Second)))
	envs := f.Events("r-queued-1", 30*time.Second)
	require.Equal(t, "run_completed", lastType(envs))
	st, err := f.Client.DescribeRun(ctx, "r-queued-1")
	require.NoError(t, err)
	require.Equal(t, first.RunID, st.Metadata["previous_run_id"])
	require.ElementsMatch(t, []string{first.RunID, "r-queued-1"}, sessionRuns(t, f, "s-queue"), "the retry of the queued request ran once")

	// A message left in a completing run's mailbox starts the next leg.
	talk, err := f.Client.Submit(ctx, &bus.RunRequest{Agent: "slowtalk", SessionID: "s-leg", Input: bus.TextInput("talk")})
	require.NoError(t, err)
	waitEvent(t, f, talk.RunID, loop.EventTextDelta)
	inj, err := f.Client.Submit(ctx, &bus.RunRequest{Agent: "slowtalk", SessionID: "s-leg", Input: bus.TextInput("said while you talked")})
	require.NoError(t, err)
	require.True(t, inj.Injected)
	require.Equal(t, "run_completed", lastType(f.Events(talk.RunID, 30*time.Second)))
	var next string
	deadline := time.Now().Add(30 * time.Second)
	for next == "" && time.Now().Before(deadline) {
		for _, id := range sessionRuns(t, f, "s-leg") {
			if id != talk.RunID {
				next = id
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	require.NotEmpty(t, next, "the message left in the mailbox started the session's next run within 30s")
	envs = f.Events(next, 30*time.Second)
	require.Equal(t, "run_completed", lastType(envs))
	started := fleettest.Event[*bus.RunStarted](t, fleettest.OfType(envs, loop.EventRunStarted)[0])
	require.Contains(t, fmt.Sprint(started.Input), "said while you talked")
	st, err = f.Client.DescribeRun(ctx, next)
	require.NoError(t, err)
	require.Equal(t, talk.RunID, st.Metadata["previous_run_id"])
}

func lastType(envs []*bus.Envelope) string {
	types := fleettest.Types(envs)
	if len(types) == 0 {
		return ""
	}
	return types[len(types)-1]
}
