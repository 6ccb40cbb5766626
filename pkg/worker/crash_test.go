package worker_test

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/internal/fleettest"
	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/worker"
)

// faultProxy is a TCP proxy between one NATS client and the server that
// acts when the client publishes a message whose headers contain trigger:
// that message is forwarded whole, then the proxy either kills the client
// (both directions cut, no new connection accepted: to the server it is a
// process that died right after that publish — no ack, no nak, no
// heartbeat) or pauses it (nothing forwarded either way until resume: a
// process that stalls, as in a long GC pause or a frozen VM).
type faultProxy struct {
	ln      net.Listener
	target  string
	trigger []byte
	pause   bool
	body    bool          // match the trigger in message bodies too, not only headers
	fired   chan struct{} // closed when the trigger was forwarded
	fire    sync.Once

	mu    sync.Mutex
	gate  chan struct{} // closed while traffic flows
	dead  bool
	conns []net.Conn
	wg    sync.WaitGroup
}

func startFaultProxy(t *testing.T, target, trigger string, pause bool) *faultProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &faultProxy{ln: ln, target: strings.TrimPrefix(target, "nats://"), trigger: []byte(trigger), pause: pause,
		fired: make(chan struct{}), gate: make(chan struct{})}
	close(p.gate)
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(func() { p.kill(); p.wg.Wait() })
	return p
}

// startBodyFaultProxy is startFaultProxy cutting the connection after a
// message whose body (or headers) holds trigger.
func startBodyFaultProxy(t *testing.T, target, trigger string) *faultProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &faultProxy{ln: ln, target: strings.TrimPrefix(target, "nats://"), trigger: []byte(trigger), body: true,
		fired: make(chan struct{}), gate: make(chan struct{})}
	close(p.gate)
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(func() { p.kill(); p.wg.Wait() })
	return p
}

// proxiedFleet starts a fleet on agentsYAML whose one worker, wA, talks to
// the server through the fault proxy mkProxy makes (wA and the workers
// started later hold their claims 1s, with a heartbeat every 300ms), and
// returns the fleet, the proxy and wA.
func proxiedFleet(t *testing.T, agentsYAML string, mkProxy func(url string) *faultProxy) (*fleettest.Fleet, *faultProxy, *worker.Worker) {
	t.Helper()
	f := fleettest.Start(t, fleettest.Options{AgentsYAML: agentsYAML, Worker: func(c *worker.Config) {
		c.AckWait, c.Heartbeat, c.SkipProvision = time.Second, 300*time.Millisecond, false
	}})
	require.NoError(t, f.Workers[0].Stop(context.Background()))
	proxy := mkProxy(f.Server.ClientURL())
	connA, err := nats.Connect(proxy.url(), nats.NoReconnect())
	require.NoError(t, err)
	t.Cleanup(connA.Close)
	a := f.StartWorker(worker.Config{Conn: connA, Catalog: f.Catalog, ID: "wA", SkipProvision: true,
		AckWait: time.Second, Heartbeat: 300 * time.Millisecond, ShutdownGrace: 10 * time.Millisecond})
	return f, proxy, a
}

func (p *faultProxy) url() string { return "nats://" + p.ln.Addr().String() }

// kill cuts every connection and refuses new ones.
func (p *faultProxy) kill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.dead {
		return
	}
	p.dead = true
	_ = p.ln.Close()
	for _, c := range p.conns {
		_ = c.Close()
	}
	select {
	case <-p.gate:
	default:
		close(p.gate)
	}
}

// resume lets traffic flow again after a pause.
func (p *faultProxy) resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.gate:
	default:
		close(p.gate)
	}
}

// wait blocks while the proxy is paused.
func (p *faultProxy) wait() {
	p.mu.Lock()
	g := p.gate
	p.mu.Unlock()
	<-g
}

func (p *faultProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		if p.dead {
			p.mu.Unlock()
			_ = c.Close()
			_ = up.Close()
			return
		}
		p.conns = append(p.conns, c, up)
		p.mu.Unlock()
		p.wg.Add(2)
		go func() { defer p.wg.Done(); p.serverToClient(up, c); _ = c.Close() }()
		go func() { defer p.wg.Done(); p.clientToServer(c, up); _ = up.Close() }()
	}
}

func (p *faultProxy) serverToClient(up, c net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := up.Read(buf)
		if n > 0 {
			p.wait()
			if _, werr := c.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// clientToServer forwards the client's protocol ops one by one and acts
// after forwarding an HPUB whose headers hold the trigger.
func (p *faultProxy) clientToServer(c, up net.Conn) {
	r := bufio.NewReaderSize(c, 64<<10)
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			return
		}
		op := bytes.Fields(line)
		var payload []byte
		hdrLen := 0
		if len(op) > 0 && (bytes.EqualFold(op[0], []byte("PUB")) || bytes.EqualFold(op[0], []byte("HPUB"))) {
			n, _ := strconv.Atoi(string(op[len(op)-1]))
			if bytes.EqualFold(op[0], []byte("HPUB")) {
				hdrLen, _ = strconv.Atoi(string(op[len(op)-2]))
			}
			payload = make([]byte, n+2)
			if _, err := io.ReadFull(r, payload); err != nil {
				return
			}
		}
		p.wait()
		if _, err := up.Write(append(line, payload...)); err != nil {
			return
		}
		if (hdrLen > 0 && bytes.Contains(payload[:hdrLen], p.trigger)) || (p.body && bytes.Contains(payload, p.trigger)) {
			p.fire.Do(func() {
				// Let the server read what was forwarded before acting.
				time.Sleep(20 * time.Millisecond)
				if p.pause {
					p.mu.Lock()
					p.gate = make(chan struct{})
					p.mu.Unlock()
				} else {
					p.kill()
				}
				close(p.fired)
			})
		}
	}
}

// TestCrashAfterTerminalBeforeAck proves requirement 8 on the real crash
// path: worker A publishes a run's terminal event and dies before it can
// ack (its TCP connection is cut right after that publish reaches the
// server); once A's claim expires (or B's takeover reaper finds A gone)
// the request is redelivered to worker B, which finds the terminal event
// of this submission in the stream and publishes nothing: still exactly
// one terminal event, no run_resumed; B acks, so the request leaves the
// queue. For a completed run B also finds the completed checkpoint; a
// failed one has a resumable checkpoint, which B must not resume.
func TestCrashAfterTerminalBeforeAck(t *testing.T) {
	t.Parallel()
	const looper = `
  - name: looper
    model: scripted
    tools: [echo]
    max_turns: 1
    script:
      - call: {name: echo, args: {text: a}, id: c1}
      - call: {name: echo, args: {text: b}, id: c2}
      - text: never
`
	for _, tc := range []struct {
		name, agent string
		terminal    loop.EventType
		status      bus.RunState
	}{
		{"completed", "calc", loop.EventRunCompleted, bus.StateCompleted},
		{"failed", "looper", loop.EventRunFailed, bus.StateFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// The fleet's worker is A, which talks through the proxy.
			f, proxy, a := proxiedFleet(t, fleetAgents+looper, func(url string) *faultProxy {
				return startFaultProxy(t, url, "Lovia-Event: "+string(tc.terminal), false)
			})
			ctx := context.Background()

			rep, err := f.Client.Submit(ctx, &bus.RunRequest{Agent: tc.agent, Input: bus.TextInput("x")})
			require.NoError(t, err)
			first := f.Events(rep.RunID, 10*time.Second)
			require.Equal(t, tc.terminal, first[len(first)-1].Type)
			select {
			case <-proxy.fired:
			case <-time.After(5 * time.Second):
				t.Fatalf("the proxy never saw %s", tc.terminal)
			}
			killed := time.Now()
			require.NoError(t, a.Stop(ctx))

			ci, err := f.JS.Consumer(ctx, "LOVIA_RUNS", "agent-"+tc.agent)
			require.NoError(t, err)
			info, err := ci.Info(ctx)
			require.NoError(t, err)
			require.EqualValues(t, 1, info.NumAckPending, "A acked before dying: the test did not crash it in time")

			f.StartWorker(withConfig(workerConfig(t, f, "wB"), func(c *worker.Config) { c.AckWait = time.Second; c.Heartbeat = 300 * time.Millisecond }))
			waitIdle(t, f, 10*time.Second)
			t.Logf("crash to ack by B: %s (AckWait 1s)", time.Since(killed))
			info, err = ci.Info(ctx)
			require.NoError(t, err)
			require.EqualValues(t, 1, info.Delivered.Stream)
			require.EqualValues(t, 2, info.Delivered.Consumer, "the request was delivered twice: to A, then to B")

			envs := runEvents(t, f, rep.RunID)
			require.Equal(t, fleettest.Types(first), fleettest.Types(envs), "nothing new was published")
			checkOneSubmission(t, rep.RunID, envs)
			st, err := f.Client.Status(ctx, rep.RunID)
			require.NoError(t, err)
			require.Equal(t, tc.status, st.Status)
			if tc.status == bus.StateCompleted {
				require.Equal(t, "The answer is 84.", st.Result.Output)
			}
		})
	}
}

// TestStalledOwnerIsFenced proves invariant 7 (fencing) with a real stall:
// worker A runs a 1.5s sleep and freezes right after publishing
// tool_call_started (the proxy stops forwarding its traffic); its claim
// expires (AckWait 1s) and worker B resumes the run; then A thaws, its
// sleep ends and it tries to go on. A must publish nothing more into the
// run (its events would interleave with B's) and must not ack: the run's
// events are A's up to the stall, then B's, with contiguous seqs, one
// terminal event and one tool_call_completed, for B's call.
func TestStalledOwnerIsFenced(t *testing.T) {
	t.Parallel()
	f, proxy, _ := proxiedFleet(t, fleetAgents, func(url string) *faultProxy {
		return startFaultProxy(t, url, "Lovia-Event: tool_call_started", true)
	})
	ctx := context.Background()

	rep, err := f.Client.Submit(ctx, &bus.RunRequest{Agent: "napper", Input: bus.TextInput("nap")})
	require.NoError(t, err)
	select {
	case <-proxy.fired:
	case <-time.After(10 * time.Second):
		t.Fatal("A never started the tool")
	}
	f.StartWorker(withConfig(workerConfig(t, f, "wB"), func(c *worker.Config) { c.AckWait = time.Second; c.Heartbeat = 300 * time.Millisecond }))
	resumed := waitEvent(t, f, rep.RunID, bus.EventRunResumed, 10*time.Second)
	require.Equal(t, "wB", fleettest.Event[*bus.RunResumed](t, resumed).Worker)
	proxy.resume() // A thaws while B sleeps; A's own sleep ends ~0.5s later

	f.Events(rep.RunID, 15*time.Second)
	waitIdle(t, f, 10*time.Second)
	envs := runEvents(t, f, rep.RunID)
	t.Logf("events: %v", fleettest.Types(envs))
	checkOneSubmission(t, rep.RunID, envs)
	done := fleettest.OfType(envs, loop.EventToolCallCompleted)
	require.Len(t, done, 1, "types %v", fleettest.Types(envs))
	require.Greater(t, done[0].Seq, resumed.Seq)
	starts := fleettest.OfType(envs, loop.EventToolCallStarted)
	require.Len(t, starts, 2)
	require.Greater(t, starts[1].Seq, resumed.Seq, "B re-ran the dangling call")
	require.Equal(t, "rested", fleettest.Event[*loop.RunCompleted](t, envs[len(envs)-1]).Output)
	st, err := f.Client.Status(ctx, rep.RunID)
	require.NoError(t, err)
	require.Equal(t, bus.StateCompleted, st.Status)
	require.Equal(t, "wB", st.Worker)
}

// TestCrashAfterOutcomeBeforeTerminalEvent (no run left behind): worker A
// records a run's outcome in the index (status completed) and dies before
// its run_completed is published (its connection is cut right after that
// write reaches the server). The record says completed, the events end
// without a terminal event and the request is still claimed by A. Worker
// B takes the run over and publishes the replayed outcome: exactly one
// terminal event, after a run_resumed, and the status and the events
// agree.
func TestCrashAfterOutcomeBeforeTerminalEvent(t *testing.T) {
	t.Parallel()
	// The run record's msgpack status field, set to completed (the
	// record's next field is worker: the checkpoint head has a status too).
	f, proxy, a := proxiedFleet(t, fleetAgents, func(url string) *faultProxy {
		return startBodyFaultProxy(t, url, "\xa6status\xa9completed\xa6worker")
	})
	ctx := context.Background()

	rep, err := f.Client.Submit(ctx, &bus.RunRequest{Agent: "calc", Input: bus.TextInput("x")})
	require.NoError(t, err)
	select {
	case <-proxy.fired:
	case <-time.After(10 * time.Second):
		t.Fatal("the proxy never saw the completed run record")
	}
	require.NoError(t, a.Stop(ctx))
	before := runEvents(t, f, rep.RunID)
	require.NotEmpty(t, before)
	require.False(t, before[len(before)-1].IsTerminal(), "A published its terminal event before dying: the test did not crash it in time")
	st, err := f.Client.Status(ctx, rep.RunID)
	require.NoError(t, err)
	require.Equal(t, bus.StateCompleted, st.Status, "A recorded the outcome before dying")

	f.StartWorker(withConfig(workerConfig(t, f, "wB"), func(c *worker.Config) { c.AckWait = time.Second; c.Heartbeat = 300 * time.Millisecond }))
	envs := f.Events(rep.RunID, 15*time.Second)
	waitIdle(t, f, 10*time.Second)
	envs = runEvents(t, f, rep.RunID)
	t.Logf("events: %v", fleettest.Types(envs))
	checkOneSubmission(t, rep.RunID, envs)
	require.Len(t, fleettest.OfType(envs, bus.EventRunResumed), 1)
	require.Equal(t, loop.EventRunCompleted, envs[len(envs)-1].Type)
	require.Equal(t, "The answer is 84.", fleettest.Event[*loop.RunCompleted](t, envs[len(envs)-1]).Output)
	st, err = f.Client.Status(ctx, rep.RunID)
	require.NoError(t, err)
	require.Equal(t, bus.StateCompleted, st.Status)
	require.Equal(t, "The answer is 84.", st.Result.Output)
}
