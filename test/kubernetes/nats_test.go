package kubernetes_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/conf"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	sigsyaml "sigs.k8s.io/yaml"
)

var (
	natsDir    = filepath.Join(kubeDir, "nats")
	plainConf  = filepath.Join(natsDir, "nats.conf")
	valuesFile = filepath.Join(natsDir, "values.yaml")
)

// chartVersion is the official NATS chart version values.yaml is written
// for; its templates (files/config/*.yaml) are what renderChart mirrors.
const chartVersion = "2.14.2"

// natsEnv is the environment nats.conf reads: the node's name, as the
// chart sets it from the pod name, and the account passwords from the
// nats-accounts Secret template (secret.yaml).
func natsEnv(t *testing.T, node string) {
	t.Setenv("SERVER_NAME", node)
	for k, v := range natsSecret(t).StringData {
		t.Setenv(k, v)
	}
}

// natsSecret decodes deploy/kubernetes/nats/secret.yaml strictly.
func natsSecret(t *testing.T) *corev1.Secret {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(natsDir, "secret.yaml"))
	require.NoError(t, err)
	var s corev1.Secret
	require.NoError(t, sigsyaml.UnmarshalStrict(data, &s), "nats/secret.yaml does not decode strictly")
	require.Equal(t, "Secret", s.Kind)
	return &s
}

// The chart's pods read every password from the nats-accounts Secret
// template, which holds only placeholders, and the workers' URL carries
// the LOVIA user's.
func TestNATSSecret(t *testing.T) {
	t.Parallel()
	s := natsSecret(t)
	require.Empty(t, s.Data, "nats-accounts: use stringData with CHANGE-ME placeholders")
	for k, v := range s.StringData {
		require.Contains(t, v, "CHANGE-ME", "nats-accounts: %s is not a placeholder", k)
	}
	v := loadValues(t)
	require.NotEmpty(t, v.Container.Env)
	for name, e := range v.Container.Env {
		data, err := json.Marshal(e)
		require.NoError(t, err)
		// The chart turns each entry into a container env var.
		var ev corev1.EnvVar
		require.NoError(t, sigsyaml.UnmarshalStrict(data, &ev), "container.env.%s", name)
		require.NotNil(t, ev.ValueFrom, "container.env.%s: read it from the Secret", name)
		ref := ev.ValueFrom.SecretKeyRef
		require.NotNil(t, ref, "container.env.%s", name)
		require.Equal(t, s.Name, ref.Name, "container.env.%s", name)
		require.Contains(t, s.StringData, ref.Key, "container.env.%s", name)
	}
	b := kustomize(t, filepath.Join(kubeDir, "overlays", "production"))
	u, err := url.Parse(b.secrets["lovia-nats"].StringData["NATS_URL"])
	require.NoError(t, err)
	pw, _ := u.User.Password()
	require.Equal(t, s.StringData["LOVIA_NATS_PASSWORD"], pw, "lovia-nats NATS_URL's password is not nats-accounts' LOVIA_NATS_PASSWORD")
}

// chartValues is the part of the chart's values that values.yaml sets.
// It decodes strictly: a key the chart does not have under that name (a
// typo Helm would ignore silently) fails the test.
type chartValues struct {
	FullnameOverride string `json:"fullnameOverride"`
	Config           struct {
		Cluster struct {
			Enabled     bool  `json:"enabled"`
			Replicas    int   `json:"replicas"`
			Port        int   `json:"port"`
			NoAdvertise *bool `json:"noAdvertise,omitempty"`
		} `json:"cluster"`
		JetStream struct {
			Enabled   bool `json:"enabled"`
			FileStore struct {
				Enabled bool   `json:"enabled"`
				Dir     string `json:"dir"`
				PVC     struct {
					Enabled bool   `json:"enabled"`
					Size    string `json:"size"`
				} `json:"pvc"`
				MaxSize string `json:"maxSize,omitempty"`
			} `json:"fileStore"`
			MemoryStore struct {
				Enabled bool   `json:"enabled"`
				MaxSize string `json:"maxSize,omitempty"`
			} `json:"memoryStore"`
			Merge map[string]any `json:"merge"`
		} `json:"jetstream"`
		NATS struct {
			Port int `json:"port"`
		} `json:"nats"`
		Monitor struct {
			Enabled bool `json:"enabled"`
			Port    int  `json:"port"`
		} `json:"monitor"`
		Merge map[string]any `json:"merge"`
	} `json:"config"`
	Container struct {
		Image struct {
			Tag string `json:"tag"`
		} `json:"image"`
		Env       map[string]any `json:"env"`
		Resources map[string]any `json:"resources"`
	} `json:"container"`
	PodTemplate struct {
		TopologySpreadConstraints map[string]any `json:"topologySpreadConstraints"`
	} `json:"podTemplate"`
	PodDisruptionBudget struct {
		Enabled bool `json:"enabled"`
	} `json:"podDisruptionBudget"`
}

func loadValues(t *testing.T) chartValues {
	t.Helper()
	data, err := os.ReadFile(valuesFile)
	require.NoError(t, err)
	var v chartValues
	require.NoError(t, sigsyaml.UnmarshalStrict(data, &v), "%s does not decode strictly", valuesFile)
	return v
}

// renderChart writes the nats.conf the chart renders from v, as
// files/config/config.yaml, cluster.yaml and jetstream.yaml of chart
// 2.14.2 do (merge blocks merged in, "<< x >>" written unquoted).
func renderChart(t *testing.T, v chartValues) string {
	t.Helper()
	c := v.Config
	name := v.FullnameOverride
	require.NotEmpty(t, name, "set fullnameOverride: the routes, the client URL and KEDA's endpoint name the pods")
	out := map[string]any{
		"server_name":            "<< $SERVER_NAME >>",
		"lame_duck_grace_period": "10s",
		"lame_duck_duration":     "30s",
		"pid_file":               "/var/run/nats/nats.pid",
		"port":                   c.NATS.Port,
	}
	if c.Cluster.Enabled {
		var routes []any
		for i := range c.Cluster.Replicas {
			routes = append(routes, fmt.Sprintf("nats://%s-%d.%s-headless:%d", name, i, name, c.Cluster.Port))
		}
		noAdvertise := true // the chart's default
		if c.Cluster.NoAdvertise != nil {
			noAdvertise = *c.Cluster.NoAdvertise
		}
		out["cluster"] = map[string]any{"name": name, "port": c.Cluster.Port, "no_advertise": noAdvertise, "routes": routes}
	}
	if c.Monitor.Enabled {
		out["http_port"] = c.Monitor.Port
	}
	if js := c.JetStream; js.Enabled {
		block := map[string]any{"max_memory_store": 0, "max_file_store": 0}
		if js.MemoryStore.Enabled && js.MemoryStore.MaxSize != "" {
			block["max_memory_store"] = "<< " + js.MemoryStore.MaxSize + " >>"
		}
		if fs := js.FileStore; fs.Enabled {
			block["store_dir"] = fs.Dir
			switch {
			case fs.MaxSize != "":
				block["max_file_store"] = "<< " + fs.MaxSize + " >>"
			case fs.PVC.Enabled:
				block["max_file_store"] = "<< " + fs.PVC.Size + " >>"
			}
		}
		mergeInto(block, js.Merge)
		out["jetstream"] = block
	}
	mergeInto(out, c.Merge)
	var b strings.Builder
	writeConf(&b, out, "")
	return b.String()
}

// mergeInto merges src into dst, maps recursively, as the chart's merge.
func mergeInto(dst, src map[string]any) {
	for k, v := range src {
		if sm, ok := v.(map[string]any); ok {
			if dm, ok := dst[k].(map[string]any); ok {
				mergeInto(dm, sm)
				continue
			}
		}
		dst[k] = v
	}
}

var unquoteRE = regexp.MustCompile(`^<<\s*(.*?)\s*>>$`)

// writeConf writes v in nats-server config syntax.
func writeConf(b *strings.Builder, v any, indent string) {
	switch v := v.(type) {
	case map[string]any:
		b.WriteString("{\n")
		for _, k := range slices.Sorted(maps.Keys(v)) {
			fmt.Fprintf(b, "%s  %q: ", indent, k)
			writeConf(b, v[k], indent+"  ")
			b.WriteString("\n")
		}
		b.WriteString(indent + "}")
	case []any:
		b.WriteString("[\n")
		for _, e := range v {
			b.WriteString(indent + "  ")
			writeConf(b, e, indent+"  ")
			b.WriteString("\n")
		}
		b.WriteString(indent + "]")
	case string:
		if m := unquoteRE.FindStringSubmatch(v); m != nil {
			b.WriteString(m[1])
			return
		}
		q, _ := json.Marshal(v)
		b.Write(q)
	default:
		q, _ := json.Marshal(v)
		b.Write(q)
	}
}

// TestPlainConfig parses nats.conf with nats-server's own parser (warnings
// are failures too) and checks what the fleet needs of it.
func TestPlainConfig(t *testing.T) {
	natsEnv(t, "nats-0")
	o, err := server.ProcessConfigFile(plainConf)
	require.NoError(t, err, "%s does not parse", plainConf)
	require.NoError(t, new(server.Options).ProcessConfigFile(plainConf), "%s parses with warnings", plainConf)

	require.Equal(t, "nats-0", o.ServerName, "server_name comes from $SERVER_NAME")
	require.True(t, o.JetStream, "jetstream is not enabled")
	require.True(t, o.SyncAlways, "jetstream.sync_interval is not always: acknowledged writes can be lost on power failure")
	require.NotEmpty(t, o.StoreDir, "jetstream.store_dir")
	require.Zero(t, o.JetStreamMaxMemory, "JetStream file storage only")
	require.Positive(t, o.JetStreamMaxStore, "jetstream.max_file_store")
	require.Len(t, o.Routes, 3, "a three-node cluster")
	require.Positive(t, o.HTTPPort, "the monitoring port (/healthz, /jsz for KEDA)")
	require.Positive(t, o.MaxConn, "max_connections")
	require.EqualValues(t, 1<<20, o.MaxPayload, "max_payload: the fleet chunks values above 1MB")
	require.Equal(t, "SYS", o.SystemAccount)
	accounts := map[string]bool{}
	for _, a := range o.Accounts {
		accounts[a.Name] = true
	}
	require.Equal(t, map[string]bool{"LOVIA": true, "SYS": true}, accounts)
	users := map[string]string{}
	for _, u := range o.Users {
		users[u.Username] = u.Account.Name
	}
	require.Equal(t, map[string]string{"lovia": "LOVIA", "sys": "SYS"}, users)
}

// TestHelmValuesMatchPlainConfig renders the chart's server config from
// values.yaml and compares it, both parsed by nats-server's parser, with
// nats.conf: the same cluster of 3, file store, sync always, limits and
// accounts.
func TestHelmValuesMatchPlainConfig(t *testing.T) {
	natsEnv(t, "nats-1")
	v := loadValues(t)
	require.True(t, v.Config.Cluster.Enabled)
	require.Equal(t, 3, v.Config.Cluster.Replicas, "three replicas")
	require.True(t, v.Config.JetStream.Enabled)
	require.True(t, v.Config.JetStream.FileStore.Enabled, "JetStream file storage")
	require.True(t, v.Config.JetStream.FileStore.PVC.Enabled, "the file store on a PersistentVolumeClaim")
	require.Equal(t, "always", v.Config.JetStream.Merge["sync_interval"])

	rendered := filepath.Join(t.TempDir(), "rendered.conf")
	text := renderChart(t, v)
	require.NoError(t, os.WriteFile(rendered, []byte(text), 0o644))
	fromValues, err := conf.ParseFile(rendered)
	require.NoError(t, err, "the config the chart renders from values.yaml does not parse:\n%s", text)
	fromPlain, err := conf.ParseFile(plainConf)
	require.NoError(t, err)
	require.Equal(t, fromPlain, fromValues, "values.yaml and nats.conf ask for different server settings; the chart renders:\n%s", text)
	_, err = server.ProcessConfigFile(rendered)
	require.NoError(t, err, "nats-server refuses the config the chart renders:\n%s", text)
}

// The chart version and the server image are pinned: the docs name the
// chart version values.yaml is written for, and the image is the
// nats-server release the fleet is tested with (go.mod).
func TestChartPinned(t *testing.T) {
	t.Parallel()
	v := loadValues(t)
	serverVersion := moduleVersion(t, "github.com/nats-io/nats-server/v2")
	require.Equal(t, strings.TrimPrefix(serverVersion, "v")+"-alpine", v.Container.Image.Tag,
		"container.image.tag: deploy/ is tested with nats-server %s", serverVersion)
	values, err := os.ReadFile(valuesFile)
	require.NoError(t, err)
	require.Contains(t, string(values), "--version "+chartVersion, "values.yaml's install line pins the chart")
	readme, err := os.ReadFile(filepath.Join(repoRoot, "deploy", "README.md"))
	require.NoError(t, err)
	require.Contains(t, string(readme), "--version "+chartVersion, "deploy/README.md pins the chart version")
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
	sort.Ints(ports)
	return ports
}

// nodeNames are the chart's pod names for the values' fullnameOverride.
func nodeNames(t *testing.T) []string {
	v := loadValues(t)
	var names []string
	for i := range v.Config.Cluster.Replicas {
		names = append(names, v.FullnameOverride+"-"+strconv.Itoa(i))
	}
	return names
}

// TestAutoscalerReachesTheChart checks the KEDA triggers against the NATS
// deployment: the monitoring endpoint is the chart's headless Service on
// its monitoring port, and the account is the one the workers' user of the
// lovia-nats Secret belongs to in nats.conf.
func TestAutoscalerReachesTheChart(t *testing.T) {
	natsEnv(t, "nats-0")
	o, err := server.ProcessConfigFile(plainConf)
	require.NoError(t, err)
	v := loadValues(t)
	b := kustomize(t, filepath.Join(kubeDir, "overlays", "production"))

	u, err := url.Parse(b.secrets["lovia-nats"].StringData["NATS_URL"])
	require.NoError(t, err)
	host, port, err := net.SplitHostPort(u.Host)
	require.NoError(t, err)
	svc, _, _ := strings.Cut(host, ".")
	require.Equal(t, v.FullnameOverride, svc, "lovia-nats NATS_URL: not the chart's client Service")
	require.Equal(t, strconv.Itoa(v.Config.NATS.Port), port, "lovia-nats NATS_URL: not the client port")
	account := ""
	for _, usr := range o.Users {
		if usr.Username == u.User.Username() {
			account = usr.Account.Name
		}
	}
	require.NotEmpty(t, account, "lovia-nats NATS_URL: user %q is not in nats.conf", u.User.Username())

	so := b.scaledObjects[workerName]
	require.NotNil(t, so)
	for i, tr := range so.Spec.Triggers {
		require.Equal(t, account, tr.Metadata["account"], "trigger %d: the workers' account", i)
		host, port, err := net.SplitHostPort(tr.Metadata["natsServerMonitoringEndpoint"])
		require.NoError(t, err, "trigger %d: natsServerMonitoringEndpoint", i)
		svc, _, _ := strings.Cut(host, ".")
		require.Equal(t, v.FullnameOverride+"-headless", svc, "trigger %d: KEDA finds the consumer leader through the headless Service", i)
		require.Equal(t, strconv.Itoa(v.Config.Monitor.Port), port, "trigger %d: not the monitoring port", i)
		require.Equal(t, strconv.Itoa(o.HTTPPort), port, "trigger %d: not nats.conf's http_port", i)
	}
}
