package kubernetes_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/lovia-fleet/lovia/internal/cli"
	"github.com/lovia-fleet/lovia/pkg/bus"
)

// startCluster starts every node from nats.conf, overriding only what
// cannot work on one machine (hosts, fixed ports, store_dir, pid_file),
// and waits until JetStream has a meta leader that sees every node. A
// route port picked free may be taken before its node binds it, so it
// starts again on fresh ports.
func startCluster(t *testing.T) []*server.Server {
	t.Helper()
	var lastErr error
	for range 3 {
		servers, err := tryStartCluster(t)
		if err == nil {
			return servers
		}
		lastErr = err
	}
	require.NoError(t, lastErr)
	return nil
}

func tryStartCluster(t *testing.T) ([]*server.Server, error) {
	nodes := nodeNames(t)
	ports := freePorts(t, len(nodes))
	routePort := map[string]int{}
	for i, n := range nodes {
		routePort[n] = ports[i]
	}
	store := t.TempDir()
	var servers []*server.Server
	shutdown := func() {
		for _, s := range servers {
			s.Shutdown()
			s.WaitForShutdown()
		}
	}
	for _, n := range nodes {
		natsEnv(t, n)
		o, err := server.ProcessConfigFile(plainConf)
		if err != nil {
			shutdown()
			return nil, err
		}
		o.Host, o.Port = "127.0.0.1", server.RANDOM_PORT
		o.HTTPHost, o.HTTPPort = "127.0.0.1", server.RANDOM_PORT
		o.Cluster.Host, o.Cluster.Port = "127.0.0.1", routePort[n]
		for _, r := range o.Routes {
			peer, _, _ := strings.Cut(r.Hostname(), ".")
			if _, ok := routePort[peer]; !ok {
				shutdown()
				return nil, fmt.Errorf("%s: route %s names no node of the cluster", plainConf, r)
			}
			r.Host = net.JoinHostPort("127.0.0.1", strconv.Itoa(routePort[peer]))
		}
		o.StoreDir = filepath.Join(store, n)
		o.PidFile = ""
		o.NoLog, o.NoSigs = true, true
		s, err := server.NewServer(o)
		if err != nil {
			shutdown()
			return nil, fmt.Errorf("node %s: %w", n, err)
		}
		servers = append(servers, s)
		s.Start()
		if !s.ReadyForConnections(10 * time.Second) {
			shutdown()
			return nil, fmt.Errorf("node %s: not ready for connections", n)
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for !clusterReady(servers) {
		if time.Now().After(deadline) {
			shutdown()
			return nil, fmt.Errorf("no JetStream meta leader that sees all %d nodes", len(servers))
		}
		time.Sleep(25 * time.Millisecond)
	}
	t.Cleanup(shutdown)
	return servers, nil
}

// clusterReady: every node healthy, and the meta leader sees every node as
// a peer (until it does, an R3 create fails with "peer offline").
func clusterReady(servers []*server.Server) bool {
	peers := -1
	for _, s := range servers {
		if h := s.Healthz(&server.HealthzOptions{}); h.StatusCode != 200 && h.Status != "ok" {
			return false
		}
		if s.JetStreamIsLeader() {
			peers = len(s.JetStreamClusterPeers())
		}
	}
	return peers == len(servers)
}

// clientURL is the lovia-nats Secret's NATS_URL with its host replaced by
// the test cluster's nodes (its user and password kept).
func clientURL(t *testing.T, b *build, servers []*server.Server) string {
	t.Helper()
	s, ok := b.secrets["lovia-nats"]
	require.True(t, ok, "no Secret lovia-nats")
	u, err := url.Parse(s.StringData["NATS_URL"])
	require.NoError(t, err, "lovia-nats NATS_URL")
	require.NotNil(t, u.User, "lovia-nats NATS_URL has no user: the cluster's accounts need one")
	var urls []string
	for _, srv := range servers {
		c := *u
		c.Host = srv.Addr().String()
		urls = append(urls, c.String())
	}
	return strings.Join(urls, ",")
}

// lockedBuf is a goroutine-safe buffer.
type lockedBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// pod is a Deployment's container running in this process as its
// manifest says: its args, its environment (Secrets and resource fields
// resolved), its ConfigMap volumes as directories; listen addresses on the
// container's ports move to free loopback ports.
type pod struct {
	name   string
	base   string // http://host:port of the port its readiness probe uses
	stderr *lockedBuf
	cancel context.CancelFunc
	done   chan struct{}
	code   int
}

// listenRE finds the address a lovia process reports it listens on: the
// worker's metrics log line, the gateway's banner.
var listenRE = regexp.MustCompile(`(?:msg=metrics addr=|lovia gateway on )(http://[^\s/]+)`)

func runPod(t *testing.T, b *build, d *appsv1.Deployment, natsURL string) *pod {
	t.Helper()
	c := container(t, d)
	spec := d.Spec.Template.Spec

	// Volumes: ConfigMaps become directories of their keys, emptyDirs
	// empty directories, at paths the args then name.
	dirs := map[string]string{} // mountPath -> local directory
	for _, m := range c.VolumeMounts {
		dir := t.TempDir()
		for _, v := range spec.Volumes {
			if v.Name != m.Name {
				continue
			}
			switch {
			case v.ConfigMap != nil:
				for k, data := range b.configMaps[v.ConfigMap.Name].Data {
					require.NoError(t, os.WriteFile(filepath.Join(dir, k), []byte(data), 0o644))
				}
			case v.EmptyDir != nil:
			default:
				t.Fatalf("deployment %s: volume %s: this test maps only ConfigMap and emptyDir volumes", d.Name, v.Name)
			}
		}
		dirs[m.MountPath] = dir
	}
	listen := map[string]bool{}
	for _, p := range c.Ports {
		listen[":"+strconv.Itoa(int(p.ContainerPort))] = true
	}
	var args []string
	for _, a := range c.Args {
		// The longest mount path the argument is under, once.
		best := ""
		for mount := range dirs {
			if (a == mount || strings.HasPrefix(a, mount+"/")) && len(mount) > len(best) {
				best = mount
			}
		}
		if best != "" {
			a = dirs[best] + strings.TrimPrefix(a, best)
		}
		if listen[a] {
			a = "127.0.0.1:0"
		}
		args = append(args, a)
	}

	env := map[string]string{}
	for _, e := range c.EnvFrom {
		switch {
		case e.SecretRef != nil:
			for k, v := range b.secrets[e.SecretRef.Name].StringData {
				env[k] = v
			}
		case e.ConfigMapRef != nil:
			for k, v := range b.configMaps[e.ConfigMapRef.Name].Data {
				env[k] = v
			}
		default:
			t.Fatalf("deployment %s: envFrom other than a Secret or ConfigMap", d.Name)
		}
	}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = e.Value
		case e.ValueFrom.SecretKeyRef != nil:
			r := e.ValueFrom.SecretKeyRef
			env[e.Name] = b.secrets[r.Name].StringData[r.Key]
		case e.ValueFrom.ResourceFieldRef != nil:
			r := e.ValueFrom.ResourceFieldRef
			require.Equal(t, "limits.memory", r.Resource, "deployment %s: env %s", d.Name, e.Name)
			env[e.Name] = strconv.FormatInt(c.Resources.Limits.Memory().Value(), 10)
		default:
			t.Fatalf("deployment %s: env %s: a source this test does not resolve", d.Name, e.Name)
		}
	}
	require.Contains(t, env, "NATS_URL", "deployment %s: lovia reads its NATS URL from NATS_URL", d.Name)
	env["NATS_URL"] = natsURL

	ctx, cancel := context.WithCancel(context.Background())
	p := &pod{name: d.Name, stderr: &lockedBuf{}, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		p.code = cli.Main(ctx, args, strings.NewReader(""), &lockedBuf{}, p.stderr, func(k string) string { return env[k] })
	}()
	t.Cleanup(func() { p.stop(t) })
	require.Eventually(t, func() bool {
		if m := listenRE.FindStringSubmatch(p.stderr.String()); m != nil {
			p.base = m[1]
			return true
		}
		select {
		case <-p.done:
			return true
		default:
			return false
		}
	}, 30*time.Second, 10*time.Millisecond, "waited for %s to listen:\n%s", d.Name, p.stderr)
	require.NotEmpty(t, p.base, "%s exited with %d:\n%s", d.Name, p.code, p.stderr.String())
	return p
}

// waitReady waits until the container's readiness probe answers 200.
func (p *pod) waitReady(t *testing.T, probe *corev1.Probe) {
	t.Helper()
	require.NotNil(t, probe.HTTPGet)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		resp, err := http.Get(p.base + probe.HTTPGet.Path)
		if !assert.NoError(c, err) {
			return
		}
		defer resp.Body.Close()
		var body strings.Builder
		_, _ = bufio.NewReader(resp.Body).WriteTo(&body)
		assert.Equal(c, http.StatusOK, resp.StatusCode, "%s", body.String())
	}, 30*time.Second, 20*time.Millisecond, "waited for %s's readiness probe %s to answer 200:\n%s", p.name, probe.HTTPGet.Path, p.stderr)
}

// call makes an HTTP request to the pod with a bearer token and decodes
// the JSON answer.
func (p *pod) call(t *testing.T, token, method, path, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, p.base+path, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var out map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out), "%s %s", method, path)
	return resp.StatusCode, out
}

// checkLive makes the liveness probe's check once: an HTTP GET answering
// 200, or a TCP connection to the port.
func (p *pod) checkLive(t *testing.T, probe *corev1.Probe) {
	t.Helper()
	require.NotNil(t, probe)
	switch {
	case probe.HTTPGet != nil:
		resp, err := http.Get(p.base + probe.HTTPGet.Path)
		require.NoError(t, err, "%s liveness", p.name)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s liveness %s", p.name, probe.HTTPGet.Path)
	case probe.TCPSocket != nil:
		conn, err := net.Dial("tcp", strings.TrimPrefix(p.base, "http://"))
		require.NoError(t, err, "%s liveness: connect", p.name)
		conn.Close()
	default:
		t.Fatalf("%s: a liveness probe this test does not make", p.name)
	}
}

// stop sends the process its SIGTERM (ends its context) and waits for an
// orderly exit.
func (p *pod) stop(t *testing.T) {
	t.Helper()
	p.cancel()
	select {
	case <-p.done:
		require.Equal(t, cli.ExitOK, p.code, "%s exit status:\n%s", p.name, p.stderr.String())
	case <-time.After(cli.WorkerStopTimeout + 10*time.Second):
		t.Fatalf("%s did not stop:\n%s", p.name, p.stderr.String())
	}
}

// jszConsumer is the part of a node's /jsz?acc=…&consumers=true answer that
// KEDA's nats-jetstream scaler reads.
type jszConsumer struct {
	Name          string `json:"name"`
	NumPending    int    `json:"num_pending"`
	NumAckPending int    `json:"num_ack_pending"`
	Cluster       struct {
		Leader string `json:"leader"`
	} `json:"cluster"`
}

type jsz struct {
	Accounts []struct {
		Name    string `json:"name"`
		Streams []struct {
			Name      string        `json:"name"`
			Consumers []jszConsumer `json:"consumer_detail"`
		} `json:"stream_detail"`
	} `json:"account_details"`
}

// kedaLag asks every node's monitoring endpoint what the scaler asks (the
// URL it builds from the trigger's metadata) and returns the consumer
// leader's pending plus ack-pending count, the value KEDA scales on.
func kedaLag(t *testing.T, servers []*server.Server, meta map[string]string) (int, error) {
	t.Helper()
	for _, s := range servers {
		u := fmt.Sprintf("http://%s/jsz?acc=%s&consumers=true&config=true", s.MonitorAddr(), meta["account"])
		resp, err := http.Get(u)
		if err != nil {
			return 0, err
		}
		var body jsz
		err = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if err != nil {
			return 0, fmt.Errorf("%s: %w", u, err)
		}
		for _, a := range body.Accounts {
			for _, st := range a.Streams {
				for _, c := range st.Consumers {
					if a.Name == meta["account"] && st.Name == meta["stream"] && c.Name == meta["consumer"] && c.Cluster.Leader == s.Name() {
						return c.NumPending + c.NumAckPending, nil
					}
				}
			}
		}
	}
	return 0, fmt.Errorf("no node reports itself leader of consumer %s on %s in account %s", meta["consumer"], meta["stream"], meta["account"])
}

// TestOverlaysOnCluster starts nats.conf as a three-node cluster,
// provisions the fleet R3 as the production worker's --replicas asks, and
// runs the production overlay's gateway and worker containers against it:
// runs submitted through the gateway with the Secret's token wait in the
// work queue, where the signal KEDA scales on counts them, until the worker
// is ready and finishes them. The dev overlay then runs beside it on the
// same cluster under its own prefix.
func TestOverlaysOnCluster(t *testing.T) {
	b := kustomize(t, filepath.Join(kubeDir, "overlays", "production"))
	servers := startCluster(t)
	for _, s := range servers {
		require.True(t, s.JetStreamConfig().SyncAlways, "%s does not sync every write", s.Name())
	}
	natsURL := clientURL(t, b, servers)

	wd := b.deployments[workerName]
	replicas, err := strconv.Atoi(flagValue(container(t, wd).Args, "replicas"))
	require.NoError(t, err, "the production worker's --replicas")
	require.Equal(t, 3, replicas, "production streams are R3 on the three-node cluster")
	nc, err := nats.Connect(natsURL, nats.Timeout(5*time.Second))
	require.NoError(t, err, "the lovia-nats Secret's user cannot connect to nats.conf's cluster")
	defer nc.Close()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	pc := bus.ProvisionConfig{Replicas: replicas}
	_, err = bus.Provision(ctx, js, pc)
	require.NoError(t, err, "provisioning R%d as the first production worker does", replicas)
	require.NoError(t, bus.ProvisionAgents(ctx, js, pc, servedAgents(t, b), false), "provisioning the agents' consumers as the first worker does")
	names, err := bus.NewNames(bus.DefaultPrefix)
	require.NoError(t, err)
	runs, err := js.Stream(ctx, names.RunsStream())
	require.NoError(t, err)
	require.Len(t, runs.CachedInfo().Cluster.Replicas, 2, "%s: followers besides the leader", names.RunsStream())

	// The runs go to the demo agent (offline, deterministic); KEDA's
	// trigger for it reads its consumer.
	const agent = "demo"
	so := b.scaledObjects[workerName]
	require.NotNil(t, so)
	consumer, err := names.AgentConsumer(agent)
	require.NoError(t, err)
	var meta map[string]string
	for _, tr := range so.Spec.Triggers {
		if tr.Metadata["consumer"] == consumer {
			meta = tr.Metadata
		}
	}
	require.NotNil(t, meta, "no KEDA trigger reads %s", consumer)

	gd := b.deployments[gatewayName]
	gw := runPod(t, b, gd, natsURL)
	gw.waitReady(t, container(t, gd).ReadinessProbe)
	token := b.secrets["lovia-gateway-tokens"].StringData["LOVIA_TOKENS"]
	call := func(method, path, body string) (int, map[string]any) { return gw.call(t, token, method, path, body) }
	const pending = 3
	var ids []string
	for i := range pending {
		code, out := call(http.MethodPost, "/v1/runs", fmt.Sprintf(`{"agent":%q,"input":"What is %d*7?"}`, agent, i+2))
		require.Equal(t, http.StatusAccepted, code, "%v", out)
		id, _ := out["run_id"].(string)
		require.NotEmpty(t, id, "%v", out)
		ids = append(ids, id)
	}
	waitLag := func(want int, what string) {
		t.Helper()
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			lag, err := kedaLag(t, servers, meta)
			assert.NoError(c, err)
			assert.Equal(c, want, lag)
		}, 20*time.Second, 50*time.Millisecond, "waited for KEDA's signal to be %d %s", want, what)
	}
	waitLag(pending, "pending runs with no worker up")

	worker := runPod(t, b, wd, natsURL)
	worker.waitReady(t, container(t, wd).ReadinessProbe)
	worker.checkLive(t, container(t, wd).StartupProbe)
	worker.checkLive(t, container(t, wd).LivenessProbe)
	gw.checkLive(t, container(t, gd).LivenessProbe)
	for _, id := range ids {
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			_, out := call(http.MethodGet, "/v1/runs/"+id, "")
			assert.Equal(c, string(bus.StateCompleted), out["status"], "%v", out)
		}, 30*time.Second, 50*time.Millisecond, "waited for run %s to complete on the worker:\n%s", id, worker.stderr)
	}
	waitLag(0, "once the runs were done")

	// A tail (an ordered consumer) works on the file-store-only cluster.
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, gw.base+"/v1/runs/"+ids[0]+"/events", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	sc := bufio.NewScanner(resp.Body)
	seen := false
	for !seen && sc.Scan() {
		seen = strings.Contains(sc.Text(), "run_completed")
	}
	require.True(t, seen, "the events stream of run %s never showed run_completed: %v", ids[0], sc.Err())

	worker.stop(t)
	gw.stop(t)

	// The dev overlay shares the cluster under its own prefix: its R1
	// streams and its runs leave production's alone.
	t.Run("dev beside production", func(t *testing.T) {
		dev := kustomize(t, filepath.Join(kubeDir, "overlays", "dev"))
		dgd, dwd := dev.deployments[gatewayName], dev.deployments[workerName]
		dgw := runPod(t, dev, dgd, natsURL)
		dgw.waitReady(t, container(t, dgd).ReadinessProbe)
		dw := runPod(t, dev, dwd, natsURL)
		dw.waitReady(t, container(t, dwd).ReadinessProbe)
		dtoken := dev.secrets["lovia-gateway-tokens"].StringData["LOVIA_TOKENS"]
		code, out := dgw.call(t, dtoken, http.MethodPost, "/v1/runs", `{"agent":"demo","input":"What is 6*7?"}`)
		require.Equal(t, http.StatusAccepted, code, "%v", out)
		id, _ := out["run_id"].(string)
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			_, out := dgw.call(t, dtoken, http.MethodGet, "/v1/runs/"+id, "")
			assert.Equal(c, string(bus.StateCompleted), out["status"], "%v", out)
		}, 30*time.Second, 50*time.Millisecond, "waited for dev run %s to complete:\n%s", id, dw.stderr)

		devNames, err := bus.NewNames(flagValue(container(t, dwd).Args, "prefix"))
		require.NoError(t, err)
		devRuns, err := js.Stream(ctx, devNames.RunsStream())
		require.NoError(t, err, "the dev overlay's own runs stream")
		require.Equal(t, 1, devRuns.CachedInfo().Config.Replicas, "dev streams: R%s", flagValue(container(t, dwd).Args, "replicas"))
		prodRuns, err := js.Stream(ctx, names.RunsStream())
		require.NoError(t, err)
		require.Equal(t, replicas, prodRuns.CachedInfo().Config.Replicas, "the dev worker changed production's replicas")
		lag, err := kedaLag(t, servers, meta)
		require.NoError(t, err)
		require.Zero(t, lag, "a dev run reached production's queue")
		dw.stop(t)
		dgw.stop(t)
	})
}
