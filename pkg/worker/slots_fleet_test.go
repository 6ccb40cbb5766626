package worker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/internal/fleettest"
	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/worker"
)

// TestFewerSlotsThanAgents: a worker with one slot and the nine agents of
// fleetAgents runs a backlog of one agent's runs back to back. Before, each
// idle agent's long poll held a slot: every run waited for the other
// agents' polls to expire, a FetchTimeout each (here 20s; a run took about
// 10s with the default 2s).
func TestFewerSlotsThanAgents(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t, fleettest.Options{AgentsYAML: fleetAgents, Worker: func(c *worker.Config) {
		c.Concurrency = 1
		c.FetchTimeout = 20 * time.Second
	}})
	ctx := context.Background()
	var ids []string
	for range 6 {
		rep, err := f.Client.Submit(ctx, &bus.RunRequest{Agent: "calc", Input: bus.TextInput("What is 12*7?")})
		require.NoError(t, err)
		ids = append(ids, rep.RunID)
	}
	var last string
	ok := waitFor(15*time.Second, func() bool {
		var open []string
		for _, id := range ids {
			st, err := f.Client.Status(ctx, id)
			if err != nil || st.Status != bus.StateCompleted {
				open = append(open, fmt.Sprintf("%s: %v %v", id, st, err))
			}
		}
		last = strings.Join(open, "; ")
		return len(open) == 0
	})
	require.True(t, ok, "6 runs on one slot not completed within 15s, less than one FetchTimeout (idle agents' polls holding the slot?): %s", last)
}

// TestRequestWaitingForASlotKeepsItsClaim: a request fetched by an idle
// agent's long poll (which holds no slot) while the worker's only slot is
// taken waits for that slot, first in line, and keeps its claim meanwhile
// with progress acks: though it waits several ack waits, with another
// worker free to take a redelivery, it is delivered once and runs on its
// worker after the run that held the slot.
func TestRequestWaitingForASlotKeepsItsClaim(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	f := fleettest.Start(t, fleettest.Options{AgentsYAML: fleetAgents, Worker: func(c *worker.Config) {
		c.Metrics = reg
		c.Concurrency = 1
		c.AckWait, c.Heartbeat = time.Second, 250*time.Millisecond
		c.SkipProvision = false // sets the consumers' ack wait
		c.FetchTimeout = 30 * time.Second
	}})
	ctx := context.Background()
	spy := f.Connect()
	var beats atomic.Int32 // progress acks of the quick request
	_, err := spy.Subscribe("$JS.ACK.LOVIA_RUNS.agent-quick.>", func(m *nats.Msg) {
		if string(m.Data) == "+WPI" {
			beats.Add(1)
		}
	})
	require.NoError(t, err)
	require.NoError(t, spy.Flush())
	require.True(t, waitFor(10*time.Second, func() bool {
		info, err := agentConsumerInfo(ctx, f, "quick")
		return err == nil && info.NumWaiting >= 1
	}), "w1 never long-polled for the quick agent")
	busy, err := f.Client.Submit(ctx, &bus.RunRequest{Agent: "sleeper", Input: bus.TextInput("sleep")})
	require.NoError(t, err)
	waitEvent(t, f, busy.RunID, loop.EventToolCallStarted, 10*time.Second)

	quick, err := f.Client.Submit(ctx, &bus.RunRequest{Agent: "quick", Input: bus.TextInput("hi")})
	require.NoError(t, err)
	require.True(t, waitFor(10*time.Second, func() bool {
		info, err := agentConsumerInfo(ctx, f, "quick")
		return err == nil && info.NumAckPending == 1
	}), "w1's poll never took the quick request")
	// A free worker: it would get the request again if w1's claim lapsed.
	f.StartWorker(withConfig(workerConfig(t, f, "w2"), func(c *worker.Config) {
		c.AckWait, c.Heartbeat = time.Second, 250*time.Millisecond
	}))
	// Held for three ack waits (12 beats of 250ms), then the slot frees.
	require.True(t, waitFor(20*time.Second, func() bool { return beats.Load() >= 12 }),
		"the waiting request was not kept alive with progress acks (%d)", beats.Load())
	require.InDelta(t, 1, gauge(t, reg, "lovia_requests_held"), 0, "held requests while it waits")
	_, err = f.Client.Cancel(ctx, busy.RunID, "make room")
	require.NoError(t, err)

	envs := f.Events(quick.RunID, 20*time.Second)
	checkOneSubmission(t, quick.RunID, envs)
	require.Equal(t, loop.EventRunCompleted, envs[len(envs)-1].Type, "%v", fleettest.Types(envs))
	waitIdle(t, f, 20*time.Second)
	st, err := f.Client.Status(ctx, quick.RunID)
	require.NoError(t, err)
	require.Equal(t, "w1", st.Worker, "the waiting request was delivered again: its claim lapsed")
	info, err := agentConsumerInfo(ctx, f, "quick")
	require.NoError(t, err)
	require.Equal(t, uint64(1), info.Delivered.Consumer, "deliveries of the quick request")
	require.InDelta(t, 0, gauge(t, reg, "lovia_requests_held"), 0, "held requests once it ran")

	// w1 ran one run at a time: the quick run started after the sleeper's ended.
	var order []string
	for _, s := range readStored(t, f, "lovia.events.>") {
		if s.Env.Type == loop.EventRunStarted || s.Env.IsTerminal() {
			order = append(order, s.Env.RunID+" "+string(s.Env.Type))
		}
	}
	require.Equal(t, []string{
		busy.RunID + " " + string(loop.EventRunStarted),
		busy.RunID + " " + string(loop.EventRunFailed),
		quick.RunID + " " + string(loop.EventRunStarted),
		quick.RunID + " " + string(loop.EventRunCompleted),
	}, order)
}

// TestFullWorkerLeavesRequestsToFreeOnes: a worker whose only slot is
// taken sends no long polls — its earlier ones expire and are not sent
// again while it stays full (counted as the pull requests the server
// receives between two of the busy run's heartbeats) — so the requests that
// arrive meanwhile go to a free worker instead of waiting on the full one.
func TestFullWorkerLeavesRequestsToFreeOnes(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t, fleettest.Options{AgentsYAML: fleetAgents, Worker: func(c *worker.Config) {
		c.Concurrency = 1
		c.FetchTimeout = 300 * time.Millisecond
		c.Heartbeat = time.Second
	}})
	ctx := context.Background()
	spy := f.Connect()
	var mu sync.Mutex
	var polls, beats int // long polls for the quick agent; the busy run's heartbeats
	var pollsAtBeat []int
	_, err := spy.Subscribe("$JS.API.CONSUMER.MSG.NEXT.LOVIA_RUNS.agent-quick", func(m *nats.Msg) {
		var req struct {
			NoWait bool `json:"no_wait"`
		}
		if json.Unmarshal(m.Data, &req) == nil && !req.NoWait {
			mu.Lock()
			polls++
			mu.Unlock()
		}
	})
	require.NoError(t, err)
	_, err = spy.Subscribe("$JS.ACK.LOVIA_RUNS.agent-sleeper.>", func(m *nats.Msg) {
		if string(m.Data) == "+WPI" {
			mu.Lock()
			beats++
			pollsAtBeat = append(pollsAtBeat, polls)
			mu.Unlock()
		}
	})
	require.NoError(t, err)
	require.NoError(t, spy.Flush())

	busy, err := f.Client.Submit(ctx, &bus.RunRequest{Agent: "sleeper", Input: bus.TextInput("sleep")})
	require.NoError(t, err)
	waitEvent(t, f, busy.RunID, loop.EventToolCallStarted, 10*time.Second)
	// From the first heartbeat (a second into the run, its slot long
	// taken) to the third: about 7 fetch timeouts.
	require.True(t, waitFor(20*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return beats >= 3
	}), "the busy run's heartbeats never came")
	mu.Lock()
	sent := pollsAtBeat[2] - pollsAtBeat[0]
	mu.Unlock()
	require.Zero(t, sent, "long polls for the quick agent from the full worker between the busy run's first and third heartbeats")

	f.StartWorker(withConfig(workerConfig(t, f, "w2"), func(c *worker.Config) { c.FetchTimeout = 300 * time.Millisecond }))
	for range 3 {
		rep, err := f.Client.Submit(ctx, &bus.RunRequest{Agent: "quick", Input: bus.TextInput("hi")})
		require.NoError(t, err)
		envs := f.Events(rep.RunID, 10*time.Second)
		require.Equal(t, loop.EventRunCompleted, envs[len(envs)-1].Type, "%v", fleettest.Types(envs))
		st, err := f.Client.Status(ctx, rep.RunID)
		require.NoError(t, err)
		require.Equal(t, "w2", st.Worker, "a run waited on the full worker while w2 was free")
	}
	st, err := f.Client.Status(ctx, busy.RunID)
	require.NoError(t, err)
	require.Equal(t, bus.StateRunning, st.Status, "the sleeper ended before the check was over")
	_, err = f.Client.Cancel(ctx, busy.RunID, "test over")
	require.NoError(t, err)
	waitEvent(t, f, busy.RunID, loop.EventRunFailed, 10*time.Second)
}
