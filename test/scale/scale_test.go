//go:build scale

package scale

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/loop"
)

// scaleAgents is one scripted agent whose runs stay live: an echo call
// (its result checkpointed before the next turn), then a sleep call as
// long as the benchmark (a run waiting on a slow tool or model).
const scaleAgents = `agents:
  - name: scale
    model: scripted
    tools: [echo, sleep]
    script:
      - call: {name: echo, args: {text: hi}, id: e1}
      - call: {name: sleep, args: {ms: %d}, id: s1}
      - text: done
`

// envInt is the integer environment variable name, or def.
func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	require.NoError(t, err, "%s=%q: want a whole number", name, v)
	return n
}

// envDuration is the duration environment variable name, or def.
func envDuration(t *testing.T, name string, def time.Duration) time.Duration {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	require.NoError(t, err, "%s=%q: want a duration (e.g. 5m)", name, v)
	return d
}

// tail keeps the last part of a process's output and whether it has
// printed "serving agents".
type tail struct {
	mu      sync.Mutex
	buf     []byte
	serving bool
}

func (o *tail) Write(b []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if strings.Contains(string(b), "serving agents") {
		o.serving = true
	}
	o.buf = append(o.buf, b...)
	if len(o.buf) > 16<<10 {
		o.buf = slices.Clone(o.buf[len(o.buf)-8<<10:])
	}
	return len(b), nil
}

func (o *tail) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return string(o.buf)
}

func (o *tail) isServing() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.serving
}

// proc is a child process: nats-server or lovia worker.
type proc struct {
	name   string
	cmd    *exec.Cmd
	out    *tail
	exited chan struct{}
}

// start starts bin with args; t.Cleanup kills it (SIGKILL: the benchmark's
// runs are mid-sleep, an orderly stop would only wait) and logs its last
// output when the test failed.
func start(t *testing.T, name, bin string, args ...string) *proc {
	t.Helper()
	p := &proc{name: name, out: &tail{}, exited: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if dir := os.Getenv("SCALE_LOGS"); dir != "" {
		// Every line of every process, for a look at what a phase did.
		f, err := os.Create(filepath.Join(dir, name+".log"))
		require.NoError(t, err, "SCALE_LOGS: creating %s's log", name)
		t.Cleanup(func() { _ = f.Close() })
		w := io.MultiWriter(p.out, f)
		p.cmd.Stdout, p.cmd.Stderr = w, w
	}
	require.NoError(t, p.cmd.Start(), "starting %s", name)
	go func() { _ = p.cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			t.Logf("%s (last output):\n%s", name, p.out.String())
		}
	})
	return p
}

func (p *proc) kill() {
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
}

// rssMB is the process's resident set size in MiB (VmRSS), 0 if gone.
func (p *proc) rssMB() float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb / 1024
		}
	}
	return 0
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// bench is one measurement: a nats-server process, its workers, and what
// the events stream said about the runs.
type bench struct {
	t      *testing.T
	url    string
	server *proc
	nc     *nats.Conn
	js     jetstream.JetStream
	agents string
	space  string
	live   int // the workers' --concurrency and the fleet's ack pending

	mu   sync.Mutex
	runs map[string]*runState
	// counts of runs that have started, reached the sleep, resumed
	started, sleeping, resumed int
	resumedBy                  map[string]int
	badEvents                  int
}

type runState struct {
	started, sleeping time.Time
	echo, sleep       int
	resumed           []time.Time
}

// newBench starts a nats-server process with a temporary store and
// subscribes to every run's events.
func newBench(t *testing.T, live int, sleep time.Duration) *bench {
	t.Helper()
	dir := t.TempDir()
	port := freePort(t)
	conf := filepath.Join(dir, "nats.conf")
	require.NoError(t, os.WriteFile(conf, []byte(fmt.Sprintf("listen: 127.0.0.1:%d\nmax_payload: 8MB\njetstream {\n  store_dir: %q\n}\n",
		port, filepath.Join(dir, "js"))), 0o644))
	b := &bench{t: t, url: fmt.Sprintf("nats://127.0.0.1:%d", port), live: live,
		runs: map[string]*runState{}, resumedBy: map[string]int{}}
	b.server = start(t, "nats-server", natsServerBin, "-c", conf)
	var err error
	deadline := time.Now().Add(30 * time.Second)
	for {
		b.nc, err = nats.Connect(b.url, nats.MaxReconnects(-1))
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	require.NoError(t, err, "connecting to nats-server at %s", b.url)
	t.Cleanup(b.nc.Close)
	b.js, err = jetstream.New(b.nc)
	require.NoError(t, err)
	sub, err := b.nc.Subscribe("lovia.events.*", b.onEvent)
	require.NoError(t, err)
	require.NoError(t, sub.SetPendingLimits(-1, -1))
	b.agents = filepath.Join(dir, "agents.yaml")
	require.NoError(t, os.WriteFile(b.agents, fmt.Appendf(nil, scaleAgents, sleep.Milliseconds()), 0o644))
	b.space = filepath.Join(dir, "workspace")
	return b
}

// onEvent records an event of a run as it is published.
func (b *bench) onEvent(m *nats.Msg) {
	now := time.Now()
	run := m.Subject[strings.LastIndexByte(m.Subject, '.')+1:]
	typ := loop.EventType(m.Header.Get(bus.HeaderEvent))
	var call, worker string
	switch typ {
	case loop.EventRunStarted:
	case loop.EventToolCallStarted, bus.EventRunResumed:
		env, err := bus.DecodeEnvelope(m.Header, m.Data)
		if err != nil {
			b.mu.Lock()
			b.badEvents++
			b.mu.Unlock()
			return
		}
		ev, err := env.Event()
		if err != nil {
			b.mu.Lock()
			b.badEvents++
			b.mu.Unlock()
			return
		}
		switch e := ev.(type) {
		case *loop.ToolCallStarted:
			call = e.Call.Name
		case *bus.RunResumed:
			worker = e.Worker
		}
	default:
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	r := b.runs[run]
	if r == nil {
		r = &runState{}
		b.runs[run] = r
	}
	switch typ {
	case loop.EventRunStarted:
		if r.started.IsZero() {
			r.started = now
			b.started++
		}
	case bus.EventRunResumed:
		if len(r.resumed) == 0 {
			b.resumed++
		}
		r.resumed = append(r.resumed, now)
		b.resumedBy[worker]++
	case loop.EventToolCallStarted:
		switch call {
		case "echo":
			r.echo++
		case "sleep":
			r.sleep++
			if r.sleeping.IsZero() {
				r.sleeping = now
				b.sleeping++
			}
		}
	}
}

// worker starts a `lovia worker` process named id and waits until it serves.
func (b *bench) worker(id string) *proc {
	b.t.Helper()
	p := start(b.t, id, loviaBin, "worker", "--nats", b.url, "--agents", b.agents, "--workspace", b.space,
		"--id", id, "--concurrency", strconv.Itoa(b.live), "--max-ack-pending", strconv.Itoa(2*b.live+1000),
		"--log-level", cmp.Or(os.Getenv("SCALE_LOG_LEVEL"), "warn"))
	// "serving agents" is an info line: with warn, wait for the presence
	// of the worker instead — it answers pings on its subject.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if _, err := b.nc.Request("lovia.worker."+id+".ping", nil, time.Second); err == nil {
			return p
		}
		select {
		case <-p.exited:
			b.t.Fatalf("worker %s exited:\n%s", id, p.out.String())
		default:
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("waited 2m for worker %s to answer pings:\n%s", id, p.out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// publish raw-publishes n runs of the scale agent, ids <prefix>-<i>.
func (b *bench) publish(prefix string, n int) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	body := []byte(`{"input":"go"}`)
	for i := range n {
		_, err := b.js.PublishAsync("lovia.submit.scale", body, jetstream.WithMsgID(fmt.Sprintf("%s-%06d", prefix, i)))
		require.NoError(b.t, err, "publish %d", i)
	}
	select {
	case <-b.js.PublishAsyncComplete():
	case <-ctx.Done():
		b.t.Fatal("waited 5m for the runs stream to acknowledge the publishes")
	}
}

// waitCount waits until count() reaches n, or timeout, and reports how far it got.
func (b *bench) waitCount(what string, n int, timeout time.Duration, count func() int) {
	b.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		b.mu.Lock()
		c := count()
		b.mu.Unlock()
		if c >= n {
			return
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("waited %s for %d runs to be %s: %d are", timeout, n, what, c)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// lastOf is the latest of the runs' times picked by at, relative to t0.
func (b *bench) lastOf(t0 time.Time, at func(*runState) time.Time) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	var last time.Time
	for _, r := range b.runs {
		if v := at(r); v.After(last) {
			last = v
		}
	}
	return last.Sub(t0)
}

// row prints one line of the figure table (after the header).
func row(format string, args ...any) { fmt.Printf("SCALE | "+format+"\n", args...) }

// TestLive is goal 1: LIVE runs raw-published to one worker, timed until
// every run is in its sleep, and the worker's and the server's RSS then.
func TestLive(t *testing.T) {
	n := envInt(t, "LIVE", 50000)
	if n <= 0 {
		t.Skip("LIVE=0")
	}
	b := newBench(t, n, envDuration(t, "SLEEP", 10*time.Minute))
	w := b.worker("live-w1")
	t0 := time.Now()
	b.publish("live", n)
	published := time.Since(t0)
	timeout := envDuration(t, "TIMEOUT", 10*time.Minute)
	b.waitCount("running (in the sleep call)", n, timeout, func() int { return b.sleeping })
	started := b.lastOf(t0, func(r *runState) time.Time { return r.started })
	running := b.lastOf(t0, func(r *runState) time.Time { return r.sleeping })
	row("live %d runs, 1 worker | published in %.1fs | all started %.1fs | all running %.1fs (%.0f runs/s) | worker RSS %.0f MiB (%.1f KiB a run) | server RSS %.0f MiB",
		n, published.Seconds(), started.Seconds(), running.Seconds(), float64(n)/running.Seconds(),
		w.rssMB(), w.rssMB()*1024/float64(n), b.server.rssMB())
}

// TestFailover is goal 2: N live runs on one worker, that worker killed
// with SIGKILL; the survivors — SURVIVORS workers, started just after the
// kill when FRESH=1 (the "a fresh worker started at once"), else
// running idle before it — resume them. Timed from the kill to each run's
// run_resumed as the events subject delivers it; every run must resume
// exactly once, its checkpointed echo call never run again.
func TestFailover(t *testing.T) {
	n := envInt(t, "N", 10000)
	survivors := envInt(t, "SURVIVORS", 1)
	fresh := os.Getenv("FRESH") == "1"
	if n <= 0 {
		t.Skip("N=0")
	}
	b := newBench(t, n, envDuration(t, "SLEEP", 10*time.Minute))
	victim := b.worker("victim")
	t0 := time.Now()
	b.publish("fo", n)
	timeout := envDuration(t, "TIMEOUT", 10*time.Minute)
	b.waitCount("running (in the sleep call)", n, timeout, func() int { return b.sleeping })
	running := b.lastOf(t0, func(r *runState) time.Time { return r.sleeping })
	victimRSS := victim.rssMB()
	var ws []*proc
	if !fresh {
		for i := range survivors {
			ws = append(ws, b.worker(fmt.Sprintf("survivor%d", i+1)))
		}
	}
	kill := time.Now()
	victim.kill()
	if fresh {
		for i := range survivors {
			ws = append(ws, b.worker(fmt.Sprintf("survivor%d", i+1)))
		}
	}
	b.waitCount("resumed", n, timeout, func() int { return b.resumed })
	// Duplicates would come soon after: let the survivors settle, then
	// check every run resumed once and ran its echo once.
	time.Sleep(envDuration(t, "SETTLE", 3*time.Second))
	var rss []string
	for _, w := range ws {
		rss = append(rss, fmt.Sprintf("%.0f", w.rssMB()))
	}
	b.mu.Lock()
	var lat []time.Duration
	twice, echoAgain, noEcho := 0, 0, 0
	for _, r := range b.runs {
		lat = append(lat, r.resumed[0].Sub(kill))
		if len(r.resumed) > 1 {
			twice++
		}
		switch {
		case r.echo > 1:
			echoAgain++
		case r.echo == 0:
			noEcho++
		}
	}
	by := fmt.Sprint(b.resumedBy)
	bad := b.badEvents
	b.mu.Unlock()
	slices.Sort(lat)
	q := func(p float64) float64 { return lat[int(p*float64(len(lat)-1))].Seconds() }
	first, last := lat[0], lat[len(lat)-1]
	mode := "idle before the kill"
	if fresh {
		mode = "started at the kill"
	}
	row("failover %d runs, %d survivor(s) %s | all running %.1fs, victim RSS %.0f MiB | resumed after kill: first %.2fs p50 %.2fs p90 %.2fs max %.2fs | %.0f resumes/s (first to last %.0f/s) | survivors RSS %s MiB | by worker %s",
		n, survivors, mode, running.Seconds(), victimRSS, first.Seconds(), q(0.5), q(0.9), last.Seconds(),
		float64(n)/last.Seconds(), float64(n)/max(last-first, time.Millisecond).Seconds(), strings.Join(rss, " "), by)
	require.Zero(t, bad, "events that did not decode")
	require.Len(t, lat, n)
	require.Zero(t, twice, "runs resumed more than once")
	require.Zero(t, echoAgain, "runs whose checkpointed echo call ran again")
	require.Zero(t, noEcho, "runs without their echo call")
}
