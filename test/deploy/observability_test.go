package deploy_test

import (
	"encoding/json"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/lovia-fleet/lovia/internal/fleettest"
	"github.com/lovia-fleet/lovia/pkg/gateway"
	"github.com/lovia-fleet/lovia/pkg/worker"
)

// namesRegisterer records the names of every metric registered on it.
type namesRegisterer struct {
	*prometheus.Registry
	names map[string]bool
}

var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

func (r *namesRegisterer) Register(c prometheus.Collector) error {
	ch := make(chan *prometheus.Desc, 64)
	go func() { c.Describe(ch); close(ch) }()
	for d := range ch {
		if m := fqName.FindStringSubmatch(d.String()); m != nil {
			r.names[m[1]] = true
		}
	}
	return r.Registry.Register(c)
}

func (r *namesRegisterer) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

var metricName = regexp.MustCompile(`\blovia_[a-z_]+`)

// queried lists the lovia_ metrics a PromQL expression reads (histogram
// series named by their family).
func queried(expr string, into map[string]bool) {
	for _, n := range metricName.FindAllString(expr, -1) {
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			n = strings.TrimSuffix(n, suffix)
		}
		into[n] = true
	}
}

// TestDashboardAndAlertsQueryExportedMetrics: every metric the Grafana
// dashboard and the Prometheus alert rules in deploy/observability query
// is one a worker or a gateway exports (a renamed metric breaks this test,
// not a dashboard nobody looks at until an incident).
func TestDashboardAndAlertsQueryExportedMetrics(t *testing.T) {
	want := map[string]bool{}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	data, err := os.ReadFile("../../deploy/observability/grafana-dashboard.json")
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &dash))
	require.NotEmpty(t, dash.Panels)
	for _, p := range dash.Panels {
		require.NotEmpty(t, p.Targets, "panel %q queries nothing", p.Title)
		for _, tg := range p.Targets {
			queried(tg.Expr, want)
		}
	}
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert, Expr string
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	data, err = os.ReadFile("../../deploy/observability/alerts.yaml")
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(data, &rules))
	n := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			require.NotEmpty(t, r.Alert)
			queried(r.Expr, want)
			n++
		}
	}
	require.GreaterOrEqual(t, n, 4, "alert rules for stuck runs, dead letters, redeliveries and growing queues")

	reg := &namesRegisterer{Registry: prometheus.NewRegistry(), names: map[string]bool{}}
	f := fleettest.Start(t, fleettest.Options{AgentsYAML: `
agents:
  - name: calc
    model: scripted
    script:
      - text: "42"
`, Worker: func(c *worker.Config) { c.Metrics = reg }})
	_, err = gateway.New(gateway.Config{API: f.API, Client: f.Client, Conn: f.Conn, Addr: "127.0.0.1:0", Metrics: reg})
	require.NoError(t, err)
	var missing []string
	for name := range want {
		if !reg.names[name] {
			missing = append(missing, name)
		}
	}
	sort.Strings(missing)
	require.Empty(t, missing, "the dashboard or the alert rules query metrics nothing exports (exported: %v)", reg.names)
}
