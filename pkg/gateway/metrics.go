package gateway

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the gateway's Prometheus metrics. Route labels are the
// routing patterns ("GET /v1/runs/{id}"), never raw paths.
type metrics struct {
	requests   *prometheus.CounterVec
	seconds    *prometheus.HistogramVec
	streams    prometheus.Gauge
	sseEvents  prometheus.Counter
	authFailed prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lovia_gateway_requests_total",
			Help: "HTTP requests answered, by route pattern and status code.",
		}, []string{"route", "code"}),
		seconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "lovia_gateway_request_seconds",
			Help:    "HTTP request latency by route pattern and status code (for SSE routes: the stream's lifetime).",
			Buckets: prometheus.ExponentialBuckets(0.001, 3, 12),
		}, []string{"route", "code"}),
		streams: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "lovia_gateway_sse_streams",
			Help: "SSE event streams open now.",
		}),
		sseEvents: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "lovia_gateway_sse_events_total",
			Help: "Run events written to SSE streams.",
		}),
		authFailed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "lovia_gateway_auth_failures_total",
			Help: "Requests refused for a missing or wrong bearer token.",
		}),
	}
	var err error
	m.requests, err = register(reg, m.requests)
	if err == nil {
		m.seconds, err = register(reg, m.seconds)
	}
	if err == nil {
		m.streams, err = register(reg, m.streams)
	}
	if err == nil {
		m.sseEvents, err = register(reg, m.sseEvents)
	}
	if err == nil {
		m.authFailed, err = register(reg, m.authFailed)
	}
	if err != nil {
		return nil, fmt.Errorf("gateway: register metrics: %w", err)
	}
	return m, nil
}

// register registers c, or returns the collector already registered under
// its name (two gateways in one process share their metrics).
func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	err := reg.Register(c)
	if err == nil {
		return c, nil
	}
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing, nil
		}
	}
	return c, err
}
