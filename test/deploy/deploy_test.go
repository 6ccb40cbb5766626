// Package deploy_test checks deploy/ without a Docker engine: the NATS node
// configs go through the real nats-server parser and then run as a
// three-node cluster in process, compose.yaml is checked against the files,
// the services and the CLI it names, and the Dockerfile against go.mod and
// the package it builds.
package deploy_test

import (
	"context"
	"fmt"
	"go/parser"
	"go/token"
	"go/version"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/lovia-fleet/lovia/internal/cli"
	"github.com/lovia-fleet/lovia/pkg/bus"
)

// Paths relative to this package's directory (go test runs tests there).
const (
	repoRoot  = "../.."
	deployDir = repoRoot + "/deploy"
)

// The cluster deploy/nats describes.
var (
	nodeNames   = []string{"n1", "n2", "n3"}
	clusterName = "lovia"
)

// parseNode parses deploy/nats/<name>.conf with the server's own parser.
// Unknown fields and invalid values are errors there; warnings (deprecated
// or ignored settings) fail the test too.
func parseNode(t *testing.T, name string) *server.Options {
	t.Helper()
	path := filepath.Join(deployDir, "nats", name+".conf")
	opts, err := server.ProcessConfigFile(path)
	require.NoError(t, err, "%s does not parse", path)
	require.NoError(t, new(server.Options).ProcessConfigFile(path), "%s parses with warnings", path)
	return opts
}

func TestNodeConfigs(t *testing.T) {
	t.Parallel()
	opts := map[string]*server.Options{}
	for _, n := range nodeNames {
		opts[n] = parseNode(t, n)
	}
	names := map[string]bool{}
	for _, n := range nodeNames {
		names[opts[n].ServerName] = true
	}
	require.Len(t, names, len(nodeNames), "server names must be distinct")

	for _, n := range nodeNames {
		t.Run(n, func(t *testing.T) {
			o := opts[n]
			require.Equal(t, n, o.ServerName, "server_name")
			require.True(t, o.JetStream, "jetstream is not enabled")
			require.True(t, o.SyncAlways, "jetstream.sync_interval is not always: acknowledged writes can be lost on power failure")
			require.NotEmpty(t, o.StoreDir, "jetstream.store_dir")
			require.Equal(t, clusterName, o.Cluster.Name, "cluster.name")
			require.Positive(t, o.Cluster.Port, "cluster.listen")

			var hosts []string
			for _, r := range o.Routes {
				hosts = append(hosts, r.Hostname())
				peer, ok := opts[r.Hostname()]
				require.True(t, ok, "route %s names no node of the cluster", r)
				require.Equal(t, strconv.Itoa(peer.Cluster.Port), r.Port(), "route %s is not %s's cluster port", r, r.Hostname())
			}
			slices.Sort(hosts)
			others := slices.DeleteFunc(slices.Clone(nodeNames), func(s string) bool { return s == n })
			require.Equal(t, others, hosts, "routes must point at the other nodes, not at %s itself", n)
		})
	}
}

// TestClusterProvisionsR3 starts the three nodes from their parsed configs,
// overriding only what cannot work on one machine (hosts, fixed ports,
// store_dir, the HTTP port), and provisions every stream and bucket with
// three replicas on them.
func TestClusterProvisionsR3(t *testing.T) {
	t.Parallel()
	servers := startCluster(t)

	urls := make([]string, len(servers))
	for i, s := range servers {
		urls[i] = s.ClientURL()
		// The nodes run the files' settings, not an embedded default.
		require.Equal(t, nodeNames[i], s.Name())
		require.Equal(t, clusterName, s.ClusterName())
		require.True(t, s.JetStreamConfig().SyncAlways, "%s does not sync every write", s.Name())
	}
	nc, err := nats.Connect(strings.Join(urls, ","), nats.Timeout(5*time.Second))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	rep, err := bus.Provision(ctx, js, bus.ProvisionConfig{Replicas: 3})
	require.NoError(t, err, "provisioning R3 on deploy/nats")
	require.Empty(t, rep.Updated)
	require.Empty(t, rep.Unchanged)

	names, err := bus.NewNames(bus.DefaultPrefix)
	require.NoError(t, err)
	streams := []string{names.RunsStream(), names.EventsStream(), names.DeadLetterStream()}
	for _, b := range []string{names.SessionsBucket(), names.CheckpointsBucket(), names.MailboxBucket(), names.RunsBucket()} {
		streams = append(streams, bus.KVStream(b))
	}
	for _, name := range streams {
		require.Contains(t, rep.Created, name)
		s, err := js.Stream(ctx, name)
		require.NoError(t, err)
		info := s.CachedInfo()
		require.Equal(t, 3, info.Config.Replicas, name)
		require.Equal(t, clusterName, info.Cluster.Name, name)
		require.Len(t, info.Cluster.Replicas, 2, "%s: followers besides the leader", name)
	}

	// An R3 write commits under sync_interval: always.
	kv, err := js.KeyValue(ctx, names.SessionsBucket())
	require.NoError(t, err)
	_, err = kv.Put(ctx, "deploy-test", []byte("ok"))
	require.NoError(t, err)

	// Provisioning again, as every worker does at startup, changes nothing.
	rep, err = bus.Provision(ctx, js, bus.ProvisionConfig{Replicas: 3})
	require.NoError(t, err)
	require.Empty(t, rep.Created)
	require.Empty(t, rep.Updated)
}

// startCluster starts the nodes of deploy/nats and waits until JetStream
// has a meta leader that sees every node, as broker.StartCluster does. A
// route port picked free may be taken before its node binds it, so it
// starts again on fresh ports (as broker.StartCluster does).
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
	routePorts := freePorts(t, len(nodeNames))
	routePort := map[string]int{}
	for i, n := range nodeNames {
		routePort[n] = routePorts[i]
	}
	store := t.TempDir()
	var servers []*server.Server
	shutdown := func() {
		for _, s := range servers {
			s.Shutdown()
			s.WaitForShutdown()
		}
	}
	// One after the other, as broker.StartCluster and nats-server's own
	// cluster tests do.
	for _, n := range nodeNames {
		o := parseNode(t, n)
		o.Host, o.Port = "127.0.0.1", server.RANDOM_PORT
		o.HTTPPort = 0
		o.Cluster.Host, o.Cluster.Port = "127.0.0.1", routePort[n]
		for _, r := range o.Routes {
			r.Host = net.JoinHostPort("127.0.0.1", strconv.Itoa(routePort[r.Hostname()]))
		}
		o.StoreDir = filepath.Join(store, n)
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
	deadline := time.Now().Add(10 * time.Second)
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

// clusterReady is broker.Cluster's readiness test: every node healthy, and the
// meta leader sees every node as a peer (until it does, an R3 create fails
// with "peer offline").
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

// freePorts returns n distinct loopback ports that were free a moment ago.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

// composeFile is the part of deploy/compose.yaml this test reads.
type composeFile struct {
	Services map[string]composeService `yaml:"services"`
	Volumes  map[string]any            `yaml:"volumes"`
}

type composeService struct {
	Image     string   `yaml:"image"`
	Command   []string `yaml:"command"`
	Volumes   []string `yaml:"volumes"`
	DependsOn []string `yaml:"depends_on"`
}

// loviaImage is the tag compose.yaml's header tells to build the
// Dockerfile as.
const loviaImage = "lovia"

func TestCompose(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join(deployDir, "compose.yaml"))
	require.NoError(t, err)
	var f composeFile
	require.NoError(t, yaml.Unmarshal(data, &f))
	require.NotEmpty(t, f.Services)

	t.Run("volumes", func(t *testing.T) {
		for name, s := range f.Services {
			for _, v := range s.Volumes {
				src, _, ok := strings.Cut(v, ":")
				require.True(t, ok, "service %s: volume %q has no target", name, v)
				if strings.HasPrefix(src, "./") || strings.HasPrefix(src, "../") {
					fi, err := os.Stat(filepath.Join(deployDir, src))
					require.NoError(t, err, "service %s mounts %s, which is not in deploy/", name, src)
					require.True(t, fi.Mode().IsRegular(), "service %s mounts %s, which is not a file", name, src)
					continue
				}
				require.Contains(t, f.Volumes, src, "service %s: named volume %s is not declared under volumes:", name, src)
			}
		}
	})

	// The nats services run the node configs checked above: each names
	// its mounted config with -c, is the node the config names (routes
	// resolve by service name), and keeps store_dir on a named volume.
	natsNodes := map[string]*server.Options{}
	t.Run("nats", func(t *testing.T) {
		serverVersion := moduleVersion(t, "github.com/nats-io/nats-server/v2")
		for _, n := range nodeNames {
			s, ok := f.Services[n]
			require.True(t, ok, "no service %s", n)
			tag, ok := strings.CutPrefix(s.Image, "nats:")
			require.True(t, ok, "service %s: image %q is not nats", n, s.Image)
			require.True(t, strings.HasPrefix(serverVersion, "v"+tag+"."), "service %s runs nats %s; deploy/nats is tested with nats-server %s", n, tag, serverVersion)
			require.Len(t, s.Command, 2, "service %s: command", n)
			require.Equal(t, "-c", s.Command[0], "service %s: command", n)
			src := mountSource(s.Volumes, s.Command[1])
			require.NotEmpty(t, src, "service %s: -c %s is not a mounted file", n, s.Command[1])
			o, err := server.ProcessConfigFile(filepath.Join(deployDir, src))
			require.NoError(t, err)
			require.Equal(t, n, o.ServerName, "service %s runs %s", n, src)
			for _, r := range o.Routes {
				require.Contains(t, f.Services, r.Hostname(), "%s: route %s names no service", src, r)
			}
			require.NotEmpty(t, mountSource(s.Volumes, o.StoreDir), "service %s: store_dir %s is not on a volume", n, o.StoreDir)
			natsNodes[n] = o
		}
	})

	for name, s := range f.Services {
		if s.Image != loviaImage {
			continue
		}
		t.Run(name, func(t *testing.T) {
			require.NotEmpty(t, s.Command, "service %s: command", name)
			// The real CLI parses the command's flags: -h after them
			// prints the usage, an unknown flag or bad value an error.
			var stdout, stderr strings.Builder
			code := cli.Main(t.Context(), append(slices.Clone(s.Command), "-h"), strings.NewReader(""), &stdout, &stderr, func(string) string { return "" })
			require.Equal(t, cli.ExitOK, code, stderr.String())
			require.True(t, strings.HasPrefix(stderr.String(), "usage: lovia "+s.Command[0]+" "),
				"lovia does not accept %q:\n%s", s.Command, stderr.String())

			i := slices.Index(s.Command, "--nats")
			require.True(t, i >= 0 && i+1 < len(s.Command), "service %s: no --nats URL", name)
			for raw := range strings.SplitSeq(s.Command[i+1], ",") {
				u, err := url.Parse(raw)
				require.NoError(t, err)
				require.Equal(t, "nats", u.Scheme, raw)
				node, ok := f.Services[u.Hostname()]
				require.True(t, ok, "service %s: --nats %s names no service", name, raw)
				require.Contains(t, s.DependsOn, u.Hostname(), "service %s: does not depend on %s", name, u.Hostname())
				if o := natsNodes[u.Hostname()]; o != nil {
					require.Equal(t, strconv.Itoa(o.Port), u.Port(), "service %s: %s is not %s's client port", name, raw, u.Hostname())
				} else {
					require.True(t, strings.HasPrefix(node.Image, "nats:"), "service %s: --nats %s is not a nats service", name, raw)
				}
			}
		})
	}
}

// mountSource returns the source of the volume of vols whose target is
// path or a parent directory of it, or "".
func mountSource(vols []string, path string) string {
	for _, v := range vols {
		parts := strings.Split(v, ":")
		if len(parts) < 2 {
			continue
		}
		if dst := parts[1]; path == dst || strings.HasPrefix(path, strings.TrimSuffix(dst, "/")+"/") {
			return parts[0]
		}
	}
	return ""
}

// moduleVersion returns the version go.mod requires of a module.
func moduleVersion(t *testing.T, path string) string {
	t.Helper()
	mod, err := os.ReadFile(filepath.Join(repoRoot, "go.mod"))
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^\s*(?:require\s+)?` + regexp.QuoteMeta(path) + `\s+(v\S+)`).FindSubmatch(mod)
	require.NotNil(t, m, "go.mod does not require %s", path)
	return string(m[1])
}

var (
	fromGolangRE = regexp.MustCompile(`(?m)^FROM\s+golang:(\d+\.\d+(?:\.\d+)?)\S*`)
	goBuildRE    = regexp.MustCompile(`(?m)^RUN\s.*\bgo build\b.*\s(\./\S+)\s*$`)
	goDirRE      = regexp.MustCompile(`(?m)^go\s+(\S+)\s*$`)
)

func TestDockerfile(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join(deployDir, "Dockerfile"))
	require.NoError(t, err)
	df := string(data)

	t.Run("go version", func(t *testing.T) {
		m := fromGolangRE.FindStringSubmatch(df)
		require.NotNil(t, m, "no FROM golang:<version>")
		mod, err := os.ReadFile(filepath.Join(repoRoot, "go.mod"))
		require.NoError(t, err)
		d := goDirRE.FindSubmatch(mod)
		require.NotNil(t, d, "go.mod has no go directive")
		image, need := "go"+m[1], "go"+string(d[1])
		// A tag without a patch release (golang:1.26) follows the newest
		// release of that line, so it satisfies any go directive of it;
		// the official image sets GOTOOLCHAIN=local, so an older line
		// would fail the build.
		if version.Lang(image) == image {
			need = version.Lang(need)
		}
		require.GreaterOrEqual(t, version.Compare(image, need), 0, "FROM golang:%s is older than go.mod's go %s", m[1], d[1])
	})

	t.Run("package", func(t *testing.T) {
		m := goBuildRE.FindStringSubmatch(df)
		require.NotNil(t, m, "no `RUN … go build … ./<package>`")
		dir := filepath.Join(repoRoot, m[1])
		entries, err := os.ReadDir(dir)
		require.NoError(t, err, "the Dockerfile builds %s", m[1])
		var files int
		for _, e := range entries {
			if e.IsDir() || !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
				continue
			}
			f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(dir, e.Name()), nil, parser.PackageClauseOnly)
			require.NoError(t, err)
			require.Equal(t, "main", f.Name.Name, "%s/%s", m[1], e.Name())
			files++
		}
		require.Positive(t, files, "%s has no Go files", m[1])
	})
}
