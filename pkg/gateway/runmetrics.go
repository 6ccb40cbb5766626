package gateway

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/lovia-fleet/lovia/pkg/service"
	"github.com/lovia-fleet/lovia/pkg/store"
)

// runCounts exports the fleet's runs by status, and the runs awaiting a
// decision, from the API's run index (which a gateway keeps live): a
// parked-runs gauge, and queued/running counts next to the work-queue
// depth workers export. Every gateway's index holds every run, so every
// gateway reports the same numbers: aggregate them with max, not sum.
type runCounts struct {
	api      *service.API
	byStatus *prometheus.Desc
	awaiting *prometheus.Desc
}

func newRunCounts(api *service.API) *runCounts {
	return &runCounts{
		api: api,
		byStatus: prometheus.NewDesc("lovia_runs_indexed",
			"Runs in the run index by status: the whole fleet's, as this gateway's index sees them (every gateway reports the same; aggregate with max).",
			[]string{"status"}, nil),
		awaiting: prometheus.NewDesc("lovia_runs_awaiting_decision",
			"Runs waiting for an approval decision or an ask_human answer, parked or on a worker (the whole fleet's; aggregate with max).",
			nil, nil),
	}
}

func (c *runCounts) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.byStatus
	ch <- c.awaiting
}

// Collect reports nothing until the index has loaded.
func (c *runCounts) Collect(ch chan<- prometheus.Metric) {
	counts, awaiting, ok := c.api.RunCounts()
	if !ok {
		return
	}
	for _, s := range []store.RunStatus{store.RunQueued, store.RunRunning, store.RunParked, store.RunCompleted, store.RunFailed} {
		ch <- prometheus.MustNewConstMetric(c.byStatus, prometheus.GaugeValue, float64(counts[s]), string(s))
	}
	ch <- prometheus.MustNewConstMetric(c.awaiting, prometheus.GaugeValue, float64(awaiting))
}
