package kubernetes_test

import (
	"net"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/lovia-fleet/lovia/internal/cli"
	"github.com/lovia-fleet/lovia/pkg/bus"
	"github.com/lovia-fleet/lovia/pkg/worker"
)

// The Deployments every overlay must have.
const (
	workerName  = "lovia-worker"
	gatewayName = "lovia-gateway"
)

// Overlays that can share one NATS cluster keep apart by subject prefix:
// their own streams, buckets and fleet-wide settings (--replicas, …).
// Within an overlay, workers and gateways share the prefix, or the
// gateway submits runs no worker claims.
func TestOverlayPrefixes(t *testing.T) {
	t.Parallel()
	owner := map[string]string{}
	for _, o := range overlays {
		b := kustomize(t, filepath.Join(kubeDir, "overlays", o))
		prefix := ""
		for _, name := range []string{workerName, gatewayName} {
			p := cmpOr(flagValue(container(t, b.deployments[name]).Args, "prefix"), bus.DefaultPrefix)
			if prefix == "" {
				prefix = p
			}
			require.Equal(t, prefix, p, "overlay %s: %s's --prefix", o, name)
		}
		require.NotContains(t, owner, prefix, "overlays %s and %s share the prefix %q", owner[prefix], o, prefix)
		owner[prefix] = o
	}
}

func TestOverlays(t *testing.T) {
	t.Parallel()
	for _, o := range overlays {
		t.Run(o, func(t *testing.T) {
			t.Parallel()
			b := kustomize(t, filepath.Join(kubeDir, "overlays", o))
			require.Contains(t, b.deployments, workerName)
			require.Contains(t, b.deployments, gatewayName)

			t.Run("selectors", func(t *testing.T) { checkSelectors(t, b) })
			t.Run("flags", func(t *testing.T) { checkFlags(t, b) })
			t.Run("memory limits", func(t *testing.T) { checkMemory(t, b) })
			t.Run("references", func(t *testing.T) { checkReferences(t, b) })
			t.Run("secrets are placeholders", func(t *testing.T) { checkPlaceholders(t, b) })
			t.Run("probes", func(t *testing.T) { checkProbes(t, b) })
			t.Run("worker shutdown", func(t *testing.T) { checkWorkerShutdown(t, b) })
			t.Run("disruption budgets", func(t *testing.T) { checkPDBs(t, b) })
			t.Run("gateway service", func(t *testing.T) { checkService(t, b) })
			t.Run("autoscaling", func(t *testing.T) { checkAutoscaling(t, b, o == "production") })
		})
	}
}

// checkSelectors: each Deployment's selector matches its own pods (the
// API server refuses it otherwise), and each topology spread constraint
// counts the Deployment's own pods.
func checkSelectors(t *testing.T, b *build) {
	for name, d := range b.deployments {
		require.NotNil(t, d.Spec.Selector, "deployment %s: selector", name)
		sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
		require.NoError(t, err, "deployment %s: selector", name)
		require.True(t, sel.Matches(labels.Set(d.Spec.Template.Labels)), "deployment %s: the selector does not match the pod template's labels %v", name, d.Spec.Template.Labels)
		for i, c := range d.Spec.Template.Spec.TopologySpreadConstraints {
			require.NotNil(t, c.LabelSelector, "deployment %s: topology spread %d", name, i)
			sel, err := metav1.LabelSelectorAsSelector(c.LabelSelector)
			require.NoError(t, err)
			require.True(t, sel.Matches(labels.Set(d.Spec.Template.Labels)), "deployment %s: topology spread %d selects none of its pods (labels %v)", name, i, d.Spec.Template.Labels)
		}
	}
}

// checkMemory: every container has a memory limit, and GOMEMLIMIT, when
// set, leaves headroom below it (the runtime reads it as a size with an
// IEC unit).
func checkMemory(t *testing.T, b *build) {
	units := map[string]int64{"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
	for name, d := range b.deployments {
		c := container(t, d)
		limit := c.Resources.Limits.Memory()
		require.False(t, limit.IsZero(), "deployment %s: no memory limit", name)
		for _, e := range c.Env {
			if e.Name != "GOMEMLIMIT" {
				continue
			}
			m := regexp.MustCompile(`^(\d+)(B|KiB|MiB|GiB)$`).FindStringSubmatch(e.Value)
			require.NotNil(t, m, "deployment %s: GOMEMLIMIT %q: write <n>MiB or <n>GiB", name, e.Value)
			n, err := strconv.ParseInt(m[1], 10, 64)
			require.NoError(t, err)
			soft := n * units[m[2]]
			require.Less(t, soft, limit.Value(), "deployment %s: GOMEMLIMIT %s is not below the memory limit %s", name, e.Value, limit)
			require.Greater(t, soft, limit.Value()*3/4, "deployment %s: GOMEMLIMIT %s wastes most of the memory limit %s", name, e.Value, limit)
		}
	}
}

// checkFlags runs each container's arguments through the real lovia
// command line: -h after them prints the command's usage only when every
// flag before it exists and its value parses (an unknown flag or a bad
// value is reported first).
func checkFlags(t *testing.T, b *build) {
	for name, d := range b.deployments {
		c := container(t, d)
		require.Empty(t, c.Command, "deployment %s: the image's entrypoint is lovia; pass its arguments as args", name)
		require.NotEmpty(t, c.Args, "deployment %s: no lovia command", name)
		for _, a := range c.Args {
			require.NotContains(t, a, "$(", "deployment %s: %q: pass settings through the environment lovia reads, not by expansion", name, a)
		}
		var stdout, stderr strings.Builder
		code := cli.Main(t.Context(), append(slices.Clone(c.Args), "-h"), strings.NewReader(""), &stdout, &stderr, func(string) string { return "" })
		require.Equal(t, cli.ExitOK, code, stderr.String())
		require.True(t, strings.HasPrefix(stderr.String(), "usage: lovia "+c.Args[0]+" "),
			"deployment %s: lovia does not accept %q:\n%s", name, c.Args, stderr.String())
	}
}

// checkReferences checks that every ConfigMap and Secret a pod mounts or
// reads, with every key it names, is defined by the same build.
func checkReferences(t *testing.T, b *build) {
	keys := func(kind, name string) []string {
		var ks []string
		switch kind {
		case "ConfigMap":
			cm, ok := b.configMaps[name]
			require.True(t, ok, "%s: ConfigMap %s is referenced but not defined", b.dir, name)
			for k := range cm.Data {
				ks = append(ks, k)
			}
		case "Secret":
			s, ok := b.secrets[name]
			require.True(t, ok, "%s: Secret %s is referenced but not defined", b.dir, name)
			for k := range s.StringData {
				ks = append(ks, k)
			}
			for k := range s.Data {
				ks = append(ks, k)
			}
		}
		return ks
	}
	for name, d := range b.deployments {
		spec := d.Spec.Template.Spec
		volumes := map[string]corev1.Volume{}
		for _, v := range spec.Volumes {
			volumes[v.Name] = v
			switch {
			case v.ConfigMap != nil:
				ks := keys("ConfigMap", v.ConfigMap.Name)
				for _, it := range v.ConfigMap.Items {
					require.Contains(t, ks, it.Key, "deployment %s: volume %s", name, v.Name)
				}
			case v.Secret != nil:
				ks := keys("Secret", v.Secret.SecretName)
				for _, it := range v.Secret.Items {
					require.Contains(t, ks, it.Key, "deployment %s: volume %s", name, v.Name)
				}
			}
		}
		for _, c := range spec.Containers {
			for _, m := range c.VolumeMounts {
				require.Contains(t, volumes, m.Name, "deployment %s: container %s mounts undefined volume %s", name, c.Name, m.Name)
			}
			for _, e := range c.Env {
				if e.ValueFrom == nil {
					continue
				}
				if r := e.ValueFrom.SecretKeyRef; r != nil {
					require.Contains(t, keys("Secret", r.Name), r.Key, "deployment %s: env %s", name, e.Name)
				}
				if r := e.ValueFrom.ConfigMapKeyRef; r != nil {
					require.Contains(t, keys("ConfigMap", r.Name), r.Key, "deployment %s: env %s", name, e.Name)
				}
			}
			for _, e := range c.EnvFrom {
				if e.SecretRef != nil {
					keys("Secret", e.SecretRef.Name)
				}
				if e.ConfigMapRef != nil {
					keys("ConfigMap", e.ConfigMapRef.Name)
				}
			}
		}
	}
}

// checkPlaceholders: the Secrets are templates, never real credentials.
func checkPlaceholders(t *testing.T, b *build) {
	require.NotEmpty(t, b.secrets)
	for name, s := range b.secrets {
		require.Empty(t, s.Data, "Secret %s: use stringData with CHANGE-ME placeholders", name)
		for k, v := range s.StringData {
			require.Contains(t, v, "CHANGE-ME", "Secret %s: %s is not a placeholder", name, k)
		}
	}
}

// listenPort returns the port of a listen address flag (":9091").
func listenPort(t *testing.T, addr string) int32 {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	require.NoError(t, err, "listen address %q", addr)
	n, err := strconv.Atoi(p)
	require.NoError(t, err, "listen address %q", addr)
	return int32(n)
}

// containerPort resolves a probe's or Service's named or numbered port.
func containerPort(t *testing.T, c corev1.Container, p intstr.IntOrString) int32 {
	t.Helper()
	if p.Type == intstr.Int {
		return p.IntVal
	}
	for _, cp := range c.Ports {
		if cp.Name == p.StrVal {
			return cp.ContainerPort
		}
	}
	t.Fatalf("container %s has no port named %s", c.Name, p.StrVal)
	return 0
}

// checkProbes: each probe targets the port lovia listens on for it, with
// the endpoint that reflects the state it is about.
func checkProbes(t *testing.T, b *build) {
	w := container(t, b.deployments[workerName])
	require.NotNil(t, w.ReadinessProbe, "worker: no readiness probe")
	require.NotNil(t, w.LivenessProbe, "worker: no liveness probe")
	metrics := flagValue(w.Args, "metrics")
	require.NotEmpty(t, metrics, "worker: the probes are served on --metrics, which is not given")
	require.NotNil(t, w.StartupProbe, "worker: no startup probe (the listener opens after the agents' MCP servers start)")
	for what, p := range map[string]*corev1.Probe{"readiness": w.ReadinessProbe, "liveness": w.LivenessProbe, "startup": w.StartupProbe} {
		require.NotNil(t, p.HTTPGet, "worker %s probe: not an HTTP GET", what)
		require.Equal(t, listenPort(t, metrics), containerPort(t, w, p.HTTPGet.Port), "worker %s probe: not the --metrics port", what)
		require.Greater(t, time.Duration(p.TimeoutSeconds)*time.Second, 2*time.Second, "worker %s probe: its timeout must outlast the readiness check's NATS request (2s)", what)
	}
	if port, ok := b.deployments[workerName].Spec.Template.Annotations["prometheus.io/port"]; ok {
		require.Equal(t, strconv.Itoa(int(listenPort(t, metrics))), port, "worker: prometheus.io/port is not the --metrics port")
	}
	require.Equal(t, "/readyz", w.ReadinessProbe.HTTPGet.Path)
	require.Equal(t, "/healthz", w.LivenessProbe.HTTPGet.Path)
	require.Equal(t, "/healthz", w.StartupProbe.HTTPGet.Path)
	require.GreaterOrEqual(t, time.Duration(w.StartupProbe.PeriodSeconds*w.StartupProbe.FailureThreshold)*time.Second, cli.DefaultNATSWait,
		"worker: the startup probe gives up before start-up stops waiting for NATS")

	g := container(t, b.deployments[gatewayName])
	require.NotNil(t, g.ReadinessProbe, "gateway: no readiness probe")
	require.NotNil(t, g.LivenessProbe, "gateway: no liveness probe")
	httpPort := listenPort(t, flagValue(g.Args, "http"))
	require.NotNil(t, g.ReadinessProbe.HTTPGet, "gateway readiness: not an HTTP GET")
	require.Equal(t, "/readyz", g.ReadinessProbe.HTTPGet.Path)
	require.Equal(t, httpPort, containerPort(t, g, g.ReadinessProbe.HTTPGet.Port))
	// The gateway's /readyz fails while NATS is away: liveness must not
	// use it, or a NATS outage restarts every gateway. Its /healthz fails
	// only on a connection closed for good.
	require.NotNil(t, g.LivenessProbe.HTTPGet, "gateway liveness: not an HTTP GET")
	require.Equal(t, "/healthz", g.LivenessProbe.HTTPGet.Path)
	require.Equal(t, httpPort, containerPort(t, g, g.LivenessProbe.HTTPGet.Port))
	// Start-up waits for NATS for up to --nats-wait (2m): the startup
	// probe lets it, liveness starts after.
	require.NotNil(t, g.StartupProbe, "gateway: no startup probe")
	require.Equal(t, "/healthz", g.StartupProbe.HTTPGet.Path)
	require.GreaterOrEqual(t, time.Duration(g.StartupProbe.PeriodSeconds*g.StartupProbe.FailureThreshold)*time.Second, cli.DefaultNATSWait,
		"gateway: the startup probe gives up before start-up stops waiting for NATS")
}

// checkWorkerShutdown: the pod's grace period outlasts the worker's
// ordered shutdown (runs finish within worker.DefaultShutdownGrace, the
// rest are interrupted at a checkpoint and released, all within
// cli.WorkerStopTimeout), so SIGKILL does not cut it short.
func checkWorkerShutdown(t *testing.T, b *build) {
	d := b.deployments[workerName]
	require.NotNil(t, d.Spec.Template.Spec.TerminationGracePeriodSeconds, "worker: terminationGracePeriodSeconds")
	grace := time.Duration(*d.Spec.Template.Spec.TerminationGracePeriodSeconds) * time.Second
	require.Greater(t, cli.WorkerStopTimeout, worker.DefaultShutdownGrace, "the stop bound leaves no time to release runs")
	require.Greater(t, grace, cli.WorkerStopTimeout, "worker: terminationGracePeriodSeconds %s does not outlast the ordered shutdown (%s)", grace, cli.WorkerStopTimeout)
	// A rolling update never takes a worker away before its replacement
	// is ready.
	ru := d.Spec.Strategy.RollingUpdate
	require.NotNil(t, ru)
	require.Equal(t, 0, ru.MaxUnavailable.IntValue())
}

// podsOf returns the Deployments whose pod labels sel matches.
func podsOf(t *testing.T, b *build, sel map[string]string) []*appsv1.Deployment {
	t.Helper()
	var out []*appsv1.Deployment
	for _, d := range b.deployments {
		if labels.SelectorFromSet(sel).Matches(labels.Set(d.Spec.Template.Labels)) {
			out = append(out, d)
		}
	}
	return out
}

func checkPDBs(t *testing.T, b *build) {
	covered := map[string]bool{}
	for name, p := range b.pdbs {
		require.NotNil(t, p.Spec.Selector, "PodDisruptionBudget %s: selector", name)
		ds := podsOf(t, b, p.Spec.Selector.MatchLabels)
		require.Len(t, ds, 1, "PodDisruptionBudget %s selects %d Deployments", name, len(ds))
		covered[ds[0].Name] = true
		require.NotNil(t, p.Spec.MaxUnavailable, "PodDisruptionBudget %s: maxUnavailable (works at any replica count)", name)
	}
	require.True(t, covered[workerName], "no PodDisruptionBudget for the workers")
	require.True(t, covered[gatewayName], "no PodDisruptionBudget for the gateways")
}

func checkService(t *testing.T, b *build) {
	s, ok := b.services[gatewayName]
	require.True(t, ok, "no Service %s", gatewayName)
	ds := podsOf(t, b, s.Spec.Selector)
	require.Len(t, ds, 1, "Service %s selects %d Deployments", s.Name, len(ds))
	require.Equal(t, gatewayName, ds[0].Name)
	g := container(t, ds[0])
	for _, p := range s.Spec.Ports {
		require.Equal(t, listenPort(t, flagValue(g.Args, "http")), containerPort(t, g, p.TargetPort), "Service port %s", p.Name)
	}
}

// checkAutoscaling checks the KEDA ScaledObject against the fleet it
// scales: its target, the stream and consumer the workers claim from, and
// a maximum the fleet-wide claim limit can hold.
func checkAutoscaling(t *testing.T, b *build, production bool) {
	if !production {
		require.Empty(t, b.scaledObjects, "%s: autoscaling only in production", b.dir)
		return
	}
	require.Len(t, b.scaledObjects, 1)
	so := b.scaledObjects[workerName]
	require.NotNil(t, so, "no ScaledObject %s", workerName)
	require.Equal(t, workerName, so.Spec.ScaleTargetRef.Name)
	require.Contains(t, b.deployments, so.Spec.ScaleTargetRef.Name)
	require.NotNil(t, so.Spec.MinReplicaCount)
	require.NotNil(t, so.Spec.MaxReplicaCount)
	require.GreaterOrEqual(t, *so.Spec.MinReplicaCount, int32(2), "fewer than 2 workers leaves the PodDisruptionBudget nothing to keep")

	w := container(t, b.deployments[workerName])
	prefix := cmpOr(flagValue(w.Args, "prefix"), bus.DefaultPrefix)
	names, err := bus.NewNames(prefix)
	require.NoError(t, err)
	concurrency, err := strconv.Atoi(cmpOr(flagValue(w.Args, "concurrency"), strconv.Itoa(worker.DefaultConcurrency)))
	require.NoError(t, err)
	// One trigger per agent the workers serve, on that agent's consumer.
	var want, have []string
	for _, a := range servedAgents(t, b) {
		c, err := names.AgentConsumer(a)
		require.NoError(t, err)
		want = append(want, c)
	}
	for i, tr := range so.Spec.Triggers {
		require.Equal(t, "nats-jetstream", tr.Type, "trigger %d", i)
		require.Equal(t, names.RunsStream(), tr.Metadata["stream"], "trigger %d", i)
		have = append(have, tr.Metadata["consumer"])
		lag, err := strconv.Atoi(tr.Metadata["lagThreshold"])
		require.NoError(t, err, "trigger %d: lagThreshold", i)
		require.Positive(t, lag, "trigger %d: lagThreshold", i)
		require.LessOrEqual(t, lag, concurrency, "trigger %d: lagThreshold above a worker's --concurrency: workers are full before KEDA adds one", i)
	}
	slices.Sort(want)
	slices.Sort(have)
	require.Equal(t, want, have, "the triggers' consumers are not those of the agents in the workers' agents file")
	maxPending := bus.DefaultWorkersAckPending
	if v := flagValue(w.Args, "max-ack-pending"); v != "" {
		maxPending, err = strconv.Atoi(v)
		require.NoError(t, err)
	}
	require.LessOrEqual(t, int(*so.Spec.MaxReplicaCount)*concurrency, maxPending,
		"maxReplicaCount x --concurrency exceeds the fleet-wide claim limit (--max-ack-pending)")
}

// servedAgents returns the names in the agents file the worker mounts
// (the ConfigMap behind its --agents path).
func servedAgents(t *testing.T, b *build) []string {
	t.Helper()
	d := b.deployments[workerName]
	c := container(t, d)
	path := flagValue(c.Args, "agents")
	require.NotEmpty(t, path, "worker: no --agents file")
	for _, m := range c.VolumeMounts {
		rel, ok := strings.CutPrefix(path, strings.TrimSuffix(m.MountPath, "/")+"/")
		if !ok {
			continue
		}
		for _, v := range d.Spec.Template.Spec.Volumes {
			if v.Name != m.Name || v.ConfigMap == nil {
				continue
			}
			cm, ok := b.configMaps[v.ConfigMap.Name]
			require.True(t, ok, "ConfigMap %s", v.ConfigMap.Name)
			data, ok := cm.Data[rel]
			require.True(t, ok, "ConfigMap %s has no key %s for --agents %s", cm.Name, rel, path)
			var f struct {
				Agents []struct {
					Name string `json:"name"`
				} `json:"agents"`
			}
			require.NoError(t, sigsyaml.Unmarshal([]byte(data), &f), "agents file %s", path)
			var names []string
			for _, a := range f.Agents {
				names = append(names, a.Name)
			}
			require.NotEmpty(t, names, "agents file %s names no agent", path)
			return names
		}
	}
	t.Fatalf("worker: --agents %s is on no ConfigMap volume", path)
	return nil
}

func cmpOr(v, def string) string {
	if v == "" {
		return def
	}
	return v
}
