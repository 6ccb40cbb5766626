package faults

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// output collects a child process's output.
type output struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (o *output) Write(b []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.Write(b)
}

func (o *output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}

// node is one nats-server process, restartable with its config and store.
type node struct {
	name    string
	port    int
	monitor int
	conf    string
	cmd     *exec.Cmd
	out     *output
	exited  chan struct{}
}

// servers is a set of nats-server processes: a cluster, or one server.
type servers struct {
	t     *testing.T
	nodes []*node
}

func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ls []net.Listener
	ports := make([]int, n)
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		ls = append(ls, l)
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	for _, l := range ls {
		_ = l.Close()
	}
	return ports
}

// startServers starts n nats-server processes: a JetStream cluster
// ("faults") when n > 1, with sync_interval always, each on loopback with a
// client port, a route port and a monitoring port. They are stopped in
// t.Cleanup.
func startServers(t *testing.T, n int) *servers {
	t.Helper()
	ports := freePorts(t, 3*n)
	s := &servers{t: t}
	var routes []string
	for i := range n {
		routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", ports[2*n+i]))
	}
	dir := t.TempDir()
	for i := range n {
		nd := &node{name: fmt.Sprintf("n%d", i+1), port: ports[i], monitor: ports[n+i]}
		store := filepath.Join(dir, nd.name)
		conf := fmt.Sprintf("server_name: %s\nlisten: 127.0.0.1:%d\nhttp: 127.0.0.1:%d\nmax_payload: 8MB\n"+
			"jetstream {\n  store_dir: %q\n  sync_interval: always\n}\n", nd.name, nd.port, nd.monitor, store)
		if n > 1 {
			conf += fmt.Sprintf("cluster {\n  name: faults\n  listen: 127.0.0.1:%d\n  routes: [%s]\n}\n", ports[2*n+i], strings.Join(routes, ", "))
		}
		nd.conf = filepath.Join(dir, nd.name+".conf")
		require.NoError(t, os.WriteFile(nd.conf, []byte(conf), 0o644))
		s.nodes = append(s.nodes, nd)
	}
	for i := range s.nodes {
		s.start(i)
	}
	t.Cleanup(func() {
		for i, nd := range s.nodes {
			if nd.cmd != nil && nd.cmd.Process != nil {
				_ = nd.cmd.Process.Signal(syscall.SIGCONT)
			}
			s.stop(i)
			if t.Failed() {
				out := nd.out.String()
				if len(out) > 4000 {
					out = out[len(out)-4000:]
				}
				t.Logf("nats-server %s (last output):\n%s", nd.name, out)
			}
		}
	})
	for i := range s.nodes {
		s.waitHealthy(i, 60*time.Second)
	}
	return s
}

// start runs node i's process.
func (s *servers) start(i int) {
	nd := s.nodes[i]
	nd.out = &output{}
	nd.cmd = exec.Command(natsServerBin, "-c", nd.conf)
	nd.cmd.Stdout, nd.cmd.Stderr = nd.out, nd.out
	require.NoError(s.t, nd.cmd.Start())
	nd.exited = make(chan struct{})
	go func(cmd *exec.Cmd, exited chan struct{}) {
		_ = cmd.Wait()
		close(exited)
	}(nd.cmd, nd.exited)
}

// stop ends node i gracefully (SIGTERM, then SIGKILL after 20s).
func (s *servers) stop(i int) {
	nd := s.nodes[i]
	if nd.cmd == nil {
		return
	}
	select {
	case <-nd.exited:
		return
	default:
	}
	_ = nd.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-nd.exited:
	case <-time.After(20 * time.Second):
		_ = nd.cmd.Process.Kill()
		<-nd.exited
	}
}

// kill9 kills node i with SIGKILL and waits for it to be gone.
func (s *servers) kill9(i int) {
	nd := s.nodes[i]
	require.NoError(s.t, nd.cmd.Process.Signal(syscall.SIGKILL))
	<-nd.exited
}

// signal sends sig to node i.
func (s *servers) signal(i int, sig syscall.Signal) {
	require.NoError(s.t, s.nodes[i].cmd.Process.Signal(sig))
}

// waitHealthy waits for node i's /healthz to report ok: it accepts
// connections, and JetStream is current with the meta group and every
// stream and consumer it holds a replica of.
func (s *servers) waitHealthy(i int, timeout time.Duration) {
	s.t.Helper()
	url := fmt.Sprintf("http://127.0.0.1:%d/healthz", s.nodes[i].monitor)
	var last string
	ok := waitUntil(timeout, func() bool {
		resp, err := http.Get(url)
		if err != nil {
			last = err.Error()
			return false
		}
		defer resp.Body.Close()
		last = resp.Status
		return resp.StatusCode == http.StatusOK
	})
	require.True(s.t, ok, "waited %s for nats-server %s to be healthy (last: %s)", timeout, s.nodes[i].name, last)
}

// urls are the client URLs of every node, comma-separated.
func (s *servers) urls() string {
	var u []string
	for _, nd := range s.nodes {
		u = append(u, fmt.Sprintf("nats://127.0.0.1:%d", nd.port))
	}
	return strings.Join(u, ",")
}

// index returns the index of the node named name, or -1.
func (s *servers) index(name string) int {
	for i, nd := range s.nodes {
		if nd.name == name {
			return i
		}
	}
	return -1
}

// leader returns the index of the node leading stream, from the stream
// info the cluster reports (Cluster.Leader), or -1 when it reports none.
func (s *servers) leader(js jetstream.JetStream, stream string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, stream)
	if err != nil {
		return -1
	}
	info := st.CachedInfo()
	if info.Cluster == nil {
		return -1
	}
	return s.index(info.Cluster.Leader)
}

// connect connects to every node, reconnecting for as long as the test
// runs.
func (s *servers) connect(t *testing.T) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(s.urls(), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond),
		nats.PingInterval(2*time.Second), nats.MaxPingsOutstanding(2))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	return nc, js
}

// waitUntil polls cond every 50ms until it holds or timeout passes.
func waitUntil(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
}
