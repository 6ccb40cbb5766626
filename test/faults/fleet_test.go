package faults

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/client"
	"github.com/lovia-fleet/lovia/pkg/loop"
)

// chaosAgents is one scripted agent whose runs stay in flight for a while:
// two tool calls (sleeps) in two turns.
const chaosAgents = `agents:
  - name: chaos
    model: scripted
    tools: [sleep]
    script:
      - call: {name: sleep, args: {ms: %d}, id: s1}
      - call: {name: sleep, args: {ms: %d}, id: s2}
      - text: done
`

// fleet is lovia worker processes on a set of servers, and a client.
type fleet struct {
	t       *testing.T
	srv     *servers
	nc      *nats.Conn
	js      jetstream.JetStream
	c       *client.Client
	workers []*output
}

// startFleet starts n `lovia worker` processes on srv (with --replicas
// replicas when above 1) running chaosAgents with sleeps of sleepMS, and
// waits until each serves.
func startFleet(t *testing.T, srv *servers, n, replicas, sleepMS int) *fleet {
	t.Helper()
	agents := filepath.Join(t.TempDir(), "agents.yaml")
	require.NoError(t, os.WriteFile(agents, []byte(fmt.Sprintf(chaosAgents, sleepMS, sleepMS)), 0o644))
	workspace := t.TempDir()
	f := &fleet{t: t, srv: srv}
	f.nc, f.js = srv.connect(t)
	var err error
	f.c, err = client.New(f.nc, client.Options{})
	require.NoError(t, err)
	for i := range n {
		out := &output{}
		args := []string{"worker", "--nats", srv.urls(), "--agents", agents, "--workspace", workspace,
			"--id", fmt.Sprintf("w%d", i+1), "--outage-budget", "2m", "--log-level", "info"}
		if replicas > 1 {
			args = append(args, "--replicas", fmt.Sprint(replicas))
		}
		cmd := exec.Command(loviaBin, args...)
		cmd.Stdout, cmd.Stderr = out, out
		require.NoError(t, cmd.Start())
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
		id := fmt.Sprintf("w%d", i+1)
		t.Cleanup(func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-exited:
			case <-time.After(30 * time.Second):
				_ = cmd.Process.Kill()
				<-exited
			}
			if t.Failed() {
				s := out.String()
				if len(s) > 8000 {
					s = s[len(s)-8000:]
				}
				t.Logf("worker %s (last output):\n%s", id, s)
			}
		})
		f.workers = append(f.workers, out)
		require.True(t, waitUntil(90*time.Second, func() bool { return strings.Contains(out.String(), "serving agents") }),
			"waited 90s for worker %s to serve:\n%s", id, out.String())
	}
	return f
}

// submit submits n runs of the chaos agent, with ids <prefix>-<i>, and
// returns their ids.
func (f *fleet) submit(prefix string, n int) []string {
	f.t.Helper()
	ids := make([]string, n)
	for i := range ids {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		rep, err := f.c.Submit(ctx, &bus.RunRequest{RunID: fmt.Sprintf("%s-%04d", prefix, i), Agent: "chaos", Input: bus.TextInput("go")})
		cancel()
		require.NoError(f.t, err, "submit %d", i)
		ids[i] = rep.RunID
	}
	return ids
}

// eventCount is the number of messages in the events stream.
func (f *fleet) eventCount() uint64 {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	s, err := f.js.Stream(ctx, "LOVIA_EVENTS")
	if err != nil {
		return 0
	}
	info, err := s.Info(ctx)
	if err != nil {
		return 0
	}
	return info.State.Msgs
}

// waitEvents waits until the events stream holds at least n messages:
// runs are in flight.
func (f *fleet) waitEvents(n uint64, timeout time.Duration) {
	f.t.Helper()
	require.True(f.t, waitUntil(timeout, func() bool { return f.eventCount() >= n }),
		"waited %s for %d events (have %d)", timeout, n, f.eventCount())
}

// runEvents are one run's events, by seq.
type runEvents []*bus.Envelope

// lastEventSeq is the events stream's last sequence.
func (f *fleet) lastEventSeq() uint64 {
	f.t.Helper()
	var last uint64
	require.True(f.t, waitUntil(30*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		s, err := f.js.Stream(ctx, "LOVIA_EVENTS")
		if err != nil {
			return false
		}
		info, err := s.Info(ctx)
		if err != nil {
			return false
		}
		last = info.State.LastSeq
		return true
	}), "reading the events stream's info")
	return last
}

// events reads the events stream after stream sequence after, grouped by
// run and ordered by seq, without duplicates. A read that fails (the
// cluster still settling after a fault) is started again, for up to a
// minute.
func (f *fleet) events(after uint64) map[string]runEvents {
	f.t.Helper()
	var (
		out map[string]runEvents
		err error
	)
	require.True(f.t, waitUntil(60*time.Second, func() bool {
		out, err = f.readEvents(after)
		return err == nil
	}), "reading the events stream: %v", err)
	return out
}

func (f *fleet) readEvents(after uint64) (map[string]runEvents, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := f.js.Stream(ctx, "LOVIA_EVENTS")
	if err != nil {
		return nil, err
	}
	info, err := s.Info(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]runEvents{}
	if info.State.Msgs == 0 || info.State.LastSeq <= after {
		return out, nil
	}
	cons, err := f.js.OrderedConsumer(ctx, "LOVIA_EVENTS", jetstream.OrderedConsumerConfig{
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: after + 1,
	})
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for {
		batch, err := cons.Fetch(500, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			return nil, err
		}
		last := uint64(0)
		for msg := range batch.Messages() {
			md, err := msg.Metadata()
			if err != nil {
				return nil, err
			}
			last = md.Sequence.Stream
			env, err := bus.DecodeEnvelope(msg.Headers(), msg.Data())
			if err != nil {
				return nil, fmt.Errorf("event %s: %w", msg.Subject(), err)
			}
			key := fmt.Sprint(env.RunID, ".", env.Seq)
			if !seen[key] {
				seen[key] = true
				out[env.RunID] = append(out[env.RunID], env)
			}
		}
		if err := batch.Error(); err != nil {
			return nil, err
		}
		if last >= info.State.LastSeq {
			break
		}
		if last == 0 {
			return nil, fmt.Errorf("the events stream stopped short of seq %d", info.State.LastSeq)
		}
	}
	for id := range out {
		slices.SortFunc(out[id], func(a, b *bus.Envelope) int { return int(a.Seq) - int(b.Seq) })
	}
	return out, nil
}

// inFlight counts the runs of evs that have started and not ended.
func inFlight(evs map[string]runEvents) int {
	n := 0
	for _, r := range evs {
		if len(r) > 0 && !r[len(r)-1].IsTerminal() {
			n++
		}
	}
	return n
}

// outcome is what a fault cost the fleet.
type outcome struct {
	runs, inFlight, reruns, resumed int
	took                            time.Duration
}

// verify waits until every run ended, then checks each one: completed,
// exactly one terminal event, contiguous seqs, the status equal to the
// events, and every tool call run once — except at most one call per run
// that was in flight at the fault (inflight), which may run again.
func (f *fleet) verify(ids []string, after uint64, inflight int, timeout time.Duration) outcome {
	f.t.Helper()
	start := time.Now()
	pending := slices.Clone(ids)
	var last string
	ok := waitUntil(timeout, func() bool {
		next := pending[:0]
		for _, id := range pending {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			st, err := f.c.Status(ctx, id)
			cancel()
			if err != nil || !(st.Status == bus.StateCompleted || st.Status == bus.StateFailed) {
				if err != nil {
					last = fmt.Sprintf("%s: %v", id, err)
				} else {
					last = fmt.Sprintf("%s: %s", id, st.Status)
				}
				next = append(next, id)
			}
		}
		pending = next
		return len(pending) == 0
	})
	require.True(f.t, ok, "waited %s for every run to end; %d did not (last seen %s): %v", timeout, len(pending), last, pending)
	evs := f.events(after)
	o := outcome{runs: len(ids), inFlight: inflight, took: time.Since(start)}
	for _, id := range ids {
		r := evs[id]
		require.NotEmpty(f.t, r, "run %s has no events", id)
		terminals := 0
		calls := map[string]int{}
		for j, env := range r {
			require.EqualValues(f.t, j+1, env.Seq, "run %s: contiguous seqs", id)
			if env.IsTerminal() {
				terminals++
			}
			switch env.Type {
			case loop.EventToolCallStarted:
				ev, err := env.Event()
				require.NoError(f.t, err)
				calls[ev.(*loop.ToolCallStarted).Call.ID]++
			case bus.EventRunResumed:
				o.resumed++
			}
		}
		require.Equal(f.t, 1, terminals, "run %s: exactly one terminal event (%s)", id, types(r))
		require.Equal(f.t, loop.EventRunCompleted, r[len(r)-1].Type, "run %s completes (%s)", id, types(r))
		again := 0
		for call, n := range calls {
			require.LessOrEqual(f.t, n, 2, "run %s: call %s ran %d times", id, call, n)
			again += n - 1
		}
		require.LessOrEqual(f.t, again, 1, "run %s: more than the call in flight ran again", id)
		o.reruns += again
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		st, err := f.c.Status(ctx, id)
		cancel()
		require.NoError(f.t, err)
		require.Equal(f.t, bus.StateCompleted, st.Status, "run %s: the status agrees with its events", id)
	}
	require.LessOrEqual(f.t, o.reruns, inflight, "tool calls ran again beyond the calls in flight at the fault")
	return o
}

func types(r runEvents) string {
	var s []string
	for _, e := range r {
		s = append(s, string(e.Type))
	}
	return strings.Join(s, " ")
}
