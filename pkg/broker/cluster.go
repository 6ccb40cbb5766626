package broker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/lovia-fleet/lovia/pkg/bus"
)

// ClusterConfig configures StartCluster. It needs no testing.T, so tools
// and benchmarks can start a cluster too.
type ClusterConfig struct {
	// StoreDir is the parent of every node's JetStream store directory
	// (<StoreDir>/<node name>). Required.
	StoreDir string
	// Name is the cluster's name and the prefix of node names. Default
	// "lovia".
	Name string
	// Nodes is the number of nodes. Default 3.
	Nodes int
	// ReadyTimeout bounds the wait for every node to accept connections and
	// for JetStream to elect a meta leader. Default 20s.
	ReadyTimeout time.Duration
	// MaxPayload is each node's largest message. Default the server's.
	MaxPayload int32
}

// WithDefaults returns c with every zero field set to its default.
func (c ClusterConfig) WithDefaults() ClusterConfig {
	if c.Name == "" {
		c.Name = bus.DefaultPrefix
	}
	if c.Nodes == 0 {
		c.Nodes = 3
	}
	if c.ReadyTimeout == 0 {
		c.ReadyTimeout = 20 * time.Second
	}
	return c
}

func (c ClusterConfig) validate() error {
	switch {
	case c.StoreDir == "":
		return configError("StoreDir", "is required")
	case bus.ValidateID("name", c.Name) != nil:
		return configError("Name", "%v", bus.ValidateID("name", c.Name))
	case c.Nodes < 1 || c.Nodes > 9:
		return configError("Nodes", "%d is not 1–9", c.Nodes)
	case c.ReadyTimeout <= 0:
		return configError("ReadyTimeout", "must be positive")
	}
	return nil
}

// Cluster is a JetStream cluster of embedded servers on loopback, for
// failover tests: every node listens on 127.0.0.1 (DontListen cannot be
// combined with routes), keeps its client and route ports across
// restarts, and keeps its store. Methods are safe for concurrent use.
type Cluster struct {
	cfg ClusterConfig

	mu    sync.Mutex
	nodes []*clusterNode
}

type clusterNode struct {
	name       string
	cfg        EmbeddedConfig
	clientPort int
	emb        *Embedded // nil while stopped
}

// StartCluster starts cfg.Nodes servers that route to each other, and waits
// until all accept connections and JetStream has a meta leader. Shut it
// down with Shutdown.
func StartCluster(cfg ClusterConfig) (*Cluster, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	var lastErr error
	// A route port picked free may be taken before the node binds it:
	// start again on fresh ports.
	for range 3 {
		c, err := startCluster(cfg)
		if err == nil {
			return c, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

func startCluster(cfg ClusterConfig) (*Cluster, error) {
	routePorts, err := freePorts(cfg.Nodes)
	if err != nil {
		return nil, err
	}
	clientPorts, err := freePorts(cfg.Nodes)
	if err != nil {
		return nil, err
	}
	routes := make([]string, cfg.Nodes)
	for i, p := range routePorts {
		routes[i] = "nats-route://127.0.0.1:" + strconv.Itoa(p)
	}
	c := &Cluster{cfg: cfg}
	for i := range cfg.Nodes {
		name := cfg.Name + "-" + strconv.Itoa(i+1)
		c.nodes = append(c.nodes, &clusterNode{
			name:       name,
			clientPort: clientPorts[i],
			cfg: EmbeddedConfig{
				StoreDir:     filepath.Join(cfg.StoreDir, name),
				Host:         "127.0.0.1",
				Port:         clientPorts[i],
				ServerName:   name,
				MaxPayload:   cfg.MaxPayload,
				ReadyTimeout: cfg.ReadyTimeout,
				ClusterName:  cfg.Name,
				ClusterPort:  routePorts[i],
				Routes:       routes,
			},
		})
	}
	// One after the other, as nats-server's own cluster tests do: nodes
	// started at the same instant race to dial each other.
	for _, n := range c.nodes {
		if n.emb, err = StartEmbedded(n.cfg); err != nil {
			c.Shutdown(context.Background())
			return nil, fmt.Errorf("broker: start cluster: node %s: %w", n.name, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.ReadyTimeout)
	defer cancel()
	if err := c.WaitReady(ctx); err != nil {
		c.Shutdown(context.Background())
		return nil, err
	}
	return c, nil
}

// freePorts returns n distinct loopback ports that were free a moment ago.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("broker: start cluster: pick a free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// WaitReady waits until the cluster has a JetStream meta leader that sees
// every running node online, and every running node is healthy (/healthz:
// current with the meta group and with every stream and consumer it holds
// a replica of).
func (c *Cluster) WaitReady(ctx context.Context) error {
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	for {
		if c.ready() {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("broker: cluster %s: no JetStream meta leader: %w", c.cfg.Name, context.Cause(ctx))
		case <-tick.C:
		}
	}
}

func (c *Cluster) ready() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	running, online := 0, -1
	for _, n := range c.nodes {
		if n.emb == nil {
			continue
		}
		running++
		s := n.emb.Server()
		// Healthz checks the meta group and every stream and consumer
		// replica on the node: a restarted node is ready once caught up.
		if h := s.Healthz(&server.HealthzOptions{}); h.StatusCode != 200 && h.Status != "ok" {
			return false
		}
		if s.JetStreamIsLeader() {
			// The peers the leader would place replicas on: until it has
			// their stats, an R3 create fails with "peer offline".
			online = len(s.JetStreamClusterPeers())
		}
	}
	return online == running
}

// URLs are the client URLs of all nodes, running or not (ports are kept
// across restarts).
func (c *Cluster) URLs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	urls := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		urls[i] = "nats://127.0.0.1:" + strconv.Itoa(n.clientPort)
	}
	return urls
}

// URL is URLs joined by commas, as nats.Connect takes them.
func (c *Cluster) URL() string { return strings.Join(c.URLs(), ",") }

// Size is the number of nodes.
func (c *Cluster) Size() int { return len(c.nodes) }

// Node returns node i's server, or nil while it is stopped.
func (c *Cluster) Node(i int) *Embedded {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[i].emb
}

// StreamLeader returns the index of the node leading a stream (in the
// global account), or -1 when none does.
func (c *Cluster) StreamLeader(stream string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, n := range c.nodes {
		if n.emb != nil && n.emb.Server().JetStreamIsStreamLeader(server.DEFAULT_GLOBAL_ACCOUNT, stream) {
			return i
		}
	}
	return -1
}

// MetaLeader returns the index of the JetStream meta leader, or -1.
func (c *Cluster) MetaLeader() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, n := range c.nodes {
		if n.emb != nil && n.emb.Server().JetStreamIsLeader() {
			return i
		}
	}
	return -1
}

// Kill stops node i, as a crash would from the clients' view. Killing a
// stopped node is a no-op.
func (c *Cluster) Kill(ctx context.Context, i int) error {
	c.mu.Lock()
	n := c.nodes[i]
	emb := n.emb
	n.emb = nil
	c.mu.Unlock()
	if emb == nil {
		return nil
	}
	return emb.Shutdown(ctx)
}

// Restart starts a stopped node again with its store, name and ports; it
// rejoins the cluster. Restarting a running node is a no-op.
func (c *Cluster) Restart(i int) error {
	c.mu.Lock()
	n := c.nodes[i]
	running := n.emb != nil
	c.mu.Unlock()
	if running {
		return nil
	}
	emb, err := StartEmbedded(n.cfg)
	if err != nil {
		return fmt.Errorf("broker: restart node %s: %w", n.name, err)
	}
	c.mu.Lock()
	n.emb = emb
	c.mu.Unlock()
	return nil
}

// Shutdown stops every node and waits until they have stopped or ctx ends.
func (c *Cluster) Shutdown(ctx context.Context) error {
	c.mu.Lock()
	var embs []*Embedded
	for _, n := range c.nodes {
		if n.emb != nil {
			embs = append(embs, n.emb)
			n.emb = nil
		}
	}
	c.mu.Unlock()
	errs := make([]error, len(embs))
	var wg sync.WaitGroup
	for i, e := range embs {
		wg.Go(func() { errs[i] = e.Shutdown(ctx) })
	}
	wg.Wait()
	return errors.Join(errs...)
}
