package subagents_test

import (
	"context"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/internal/fleettest"
	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/catalog"
	"github.com/lovia-fleet/lovia/pkg/client"
	"github.com/lovia-fleet/lovia/pkg/plugins/subagents"
	"github.com/lovia-fleet/lovia/pkg/tools"
	"github.com/lovia-fleet/lovia/pkg/worker"
)

// holdProxy forwards TCP between NATS clients and a server; held, it
// stops forwarding what the clients send (the server's side still flows)
// until released: a network that has stopped answering.
type holdProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	gate   chan struct{} // non-nil while held; closed on release
	conns  []net.Conn
	wg     sync.WaitGroup
	closed bool
}

func startHoldProxy(t *testing.T, target string) *holdProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &holdProxy{ln: ln, target: strings.TrimPrefix(target, "nats://")}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *holdProxy) url() string { return "nats://" + p.ln.Addr().String() }

func (p *holdProxy) hold() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.gate == nil {
		p.gate = make(chan struct{})
	}
}

func (p *holdProxy) release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.gate != nil {
		close(p.gate)
		p.gate = nil
	}
}

func (p *holdProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		p.wg.Add(2)
		go func() { defer p.wg.Done(); _, _ = io.Copy(c, s); _ = c.Close() }()
		go func() { defer p.wg.Done(); p.upstream(c, s) }()
	}
}

// upstream copies client → server, waiting at the gate while held.
func (p *holdProxy) upstream(c, s net.Conn) {
	defer func() { _ = s.Close() }()
	buf := make([]byte, 64<<10)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			p.mu.Lock()
			gate := p.gate
			p.mu.Unlock()
			if gate != nil {
				<-gate
			}
			if _, werr := s.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *holdProxy) close() {
	p.release()
	_ = p.ln.Close()
	p.mu.Lock()
	p.closed = true
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// leadWithoutPlugin is leadAgent with the plugin attached by the test
// (its calls are raw_calls: the file does not give the agent the tools).
const leadWithoutPlugin = `
  - name: lead
    model: scripted
    script:
      - raw_call: {name: spawn_subagent, id: s1, arguments: '{"agent": "helper", "task": "Count the files."}'}
      - raw_call: {name: wait_subagents, id: w1, arguments: '{}'}
      - text: The helper reported.
`

// TestStopWaitsForTheWatchers: the parent's worker stops while the
// parent waits for a child and the plugin's connection has stopped
// answering, so the watcher, cancelled, is stuck closing its tail. The
// worker's Stop does not return before the watcher has ended (the plugin's
// Close at the run's end waits for it), and once it returns no watcher is
// left.
func TestStopWaitsForTheWatchers(t *testing.T) {
	f := fleettest.Start(t, fleettest.Options{AgentsYAML: "agents:" + leadAgent + gatedHelper, Workers: -1})
	ts, err := tools.Builtin(tools.Config{Workspace: t.TempDir()})
	require.NoError(t, err)
	parse := func(yaml string, js jetstream.JetStream) *catalog.Catalog {
		cat, err := catalog.Parse([]byte("agents:"+yaml), catalog.Options{Tools: ts, Plugins: catalog.PluginStores{JetStream: js}})
		require.NoError(t, err)
		return cat
	}
	nc2 := f.Connect()
	js2, err := jetstream.New(nc2)
	require.NoError(t, err)
	f.StartWorker(worker.Config{Conn: nc2, Catalog: parse(gatedHelper, js2), ID: "w2", SkipProvision: true, ShutdownGrace: 50 * time.Millisecond})

	// w1's plugin talks to the fleet through the proxy.
	proxy := startHoldProxy(t, f.Server.ClientURL())
	pnc, err := nats.Connect(proxy.url())
	require.NoError(t, err)
	t.Cleanup(pnc.Close)
	fleet, err := client.New(pnc, client.Options{})
	require.NoError(t, err)
	p, err := subagents.New(subagents.Config{Fleet: fleet, Agents: []string{"helper"}})
	require.NoError(t, err)
	t.Cleanup(p.Stop)
	nc1 := f.Connect()
	js1, err := jetstream.New(nc1)
	require.NoError(t, err)
	cat1 := parse(leadWithoutPlugin, js1)
	lead, _ := cat1.Get("lead")
	lead.Plugins = append(lead.Plugins, p)
	w1 := f.StartWorker(worker.Config{Conn: nc1, Catalog: cat1, ID: "w1", SkipProvision: true, ShutdownGrace: 50 * time.Millisecond})

	ctx := context.Background()
	_, err = f.Client.Submit(ctx, &bus.RunRequest{Agent: "lead", Input: bus.TextInput("How many files?")})
	require.NoError(t, err)
	// The child waits for an approval nobody gives: it does not end.
	waitFor(t, 30*time.Second, "w1's watcher of the child to be tailing it", func() bool {
		return stacksWith("(*Tail).Next")
	})

	proxy.hold()
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		sctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		_ = w1.Stop(sctx)
	}()
	waitFor(t, 30*time.Second, "the cancelled watcher to be closing its tail", func() bool {
		return stacksWith("(*Tail).Close")
	})
	// The watcher cannot finish while the network is held: Stop must not
	// return meanwhile. (A negative check: it waits the whole second.)
	select {
	case <-stopped:
		t.Fatal("w1.Stop returned while its subagent watcher was still stopping")
	case <-time.After(time.Second):
	}
	proxy.release()
	select {
	case <-stopped:
	case <-time.After(60 * time.Second):
		t.Fatal("w1.Stop did not return once its watcher could end")
	}
	require.Empty(t, watchers(), "no subagent watcher outlives the worker's Stop")
}

// stacksWith reports whether a subagents watcher's stack holds frame.
func stacksWith(frame string) bool {
	for _, g := range watchers() {
		if strings.Contains(g, frame) {
			return true
		}
	}
	return false
}

// waitFor polls cond until it holds, failing after timeout with what it
// waited for.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
