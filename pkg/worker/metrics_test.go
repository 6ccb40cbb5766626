package worker

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
)

// Workers of one process (lovia dev) share a registry: the second one must
// count into the registered collectors, not into orphans.
func TestMetricsShareARegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	a, err := newMetrics(reg)
	require.NoError(t, err)
	b, err := newMetrics(reg)
	require.NoError(t, err)
	a.started.WithLabelValues("demo").Inc()
	b.started.WithLabelValues("demo").Inc()
	b.takeovers.Inc()
	require.InDelta(t, 2, testutil.ToFloat64(a.started.WithLabelValues("demo")), 0)
	require.InDelta(t, 1, testutil.ToFloat64(a.takeovers), 0)
}
