package worker

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the worker's Prometheus metrics.
type metrics struct {
	started      *prometheus.CounterVec
	completed    *prometheus.CounterVec
	failed       *prometheus.CounterVec
	inFlight     prometheus.Gauge
	held         prometheus.Gauge
	resumes      *prometheus.CounterVec
	redeliveries prometheus.Counter
	turnSeconds  *prometheus.HistogramVec
	toolSeconds  *prometheus.HistogramVec
	modelSeconds *prometheus.HistogramVec
	tokens       *prometheus.CounterVec
	publishSecs  prometheus.Histogram
	poison       *prometheus.CounterVec
	fenced       prometheus.Counter
	takeovers    prometheus.Counter
	parked       prometheus.Counter
	released     prometheus.Counter
	abandoned    prometheus.Counter
	queueWait    *prometheus.HistogramVec
	runSeconds   *prometheus.HistogramVec
	toolErrors   *prometheus.CounterVec
	approvalWait *prometheus.HistogramVec
	pending      *prometheus.GaugeVec
	info         *prometheus.GaugeVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		started:      prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lovia_runs_started_total", Help: "Runs started (first claim of a submission), by agent."}, []string{"agent"}),
		completed:    prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lovia_runs_completed_total", Help: "Runs completed, by agent."}, []string{"agent"}),
		failed:       prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lovia_runs_failed_total", Help: "Runs failed, by agent and error type."}, []string{"agent", "type"}),
		inFlight:     prometheus.NewGauge(prometheus.GaugeOpts{Name: "lovia_runs_in_flight", Help: "Runs this worker is executing."}),
		held:         prometheus.NewGauge(prometheus.GaugeOpts{Name: "lovia_requests_held", Help: "Run requests this worker fetched while its slots were full, waiting for a free slot."}),
		resumes:      prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lovia_runs_resumed_total", Help: "Runs resumed after another claim, by agent."}, []string{"agent"}),
		redeliveries: prometheus.NewCounter(prometheus.CounterOpts{Name: "lovia_claim_redeliveries_total", Help: "Run deliveries that were not the first."}),
		turnSeconds:  prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "lovia_turn_seconds", Help: "Turn latency.", Buckets: prometheus.ExponentialBuckets(0.005, 3, 10)}, []string{"agent"}),
		toolSeconds:  prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "lovia_tool_seconds", Help: "Tool call latency.", Buckets: prometheus.ExponentialBuckets(0.001, 3, 12)}, []string{"tool"}),
		modelSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "lovia_model_seconds", Help: "Model call latency (turn start to message completed).", Buckets: prometheus.ExponentialBuckets(0.005, 3, 10)}, []string{"agent"}),
		tokens:       prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lovia_tokens_total", Help: "Tokens used by completed runs, by agent and kind."}, []string{"agent", "kind"}),
		publishSecs:  prometheus.NewHistogram(prometheus.HistogramOpts{Name: "lovia_event_publish_seconds", Help: "Event publish latency to a stored ack at checkpoint flushes.", Buckets: prometheus.ExponentialBuckets(0.0001, 3, 10)}),
		poison:       prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lovia_poison_requests_total", Help: "Run requests terminated as invalid, by error type."}, []string{"type"}),
		fenced:       prometheus.NewCounter(prometheus.CounterOpts{Name: "lovia_runs_fenced_total", Help: "Runs this worker stopped because another worker owns them."}),
		takeovers:    prometheus.NewCounter(prometheus.CounterOpts{Name: "lovia_takeovers_total", Help: "Runs of a gone worker this worker released before the ack wait."}),
		parked:       prometheus.NewCounter(prometheus.CounterOpts{Name: "lovia_runs_parked_total", Help: "Runs this worker parked to wait for an approval decision off the worker."}),
		released:     prometheus.NewCounter(prometheus.CounterOpts{Name: "lovia_runs_released_total", Help: "Runs this worker gave back to the work queue without ending them (shutdown, interruption, transient failure)."}),
		abandoned:    prometheus.NewCounter(prometheus.CounterOpts{Name: "lovia_runs_abandoned_total", Help: "Runs found running or queued with no worker holding them and no request left, failed by this worker's sweep."}),
		queueWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "lovia_run_queue_wait_seconds", Help: "From a run request's storing to its first claim, by agent.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 12)}, []string{"agent"}),
		runSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "lovia_run_duration_seconds", Help: "From a run's first claim to its terminal event, by agent and outcome (completed, failed).",
			Buckets: prometheus.ExponentialBuckets(0.01, 4, 12)}, []string{"agent", "outcome"}),
		toolErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lovia_tool_errors_total", Help: "Tool calls that failed (tool_call_failed), by tool."}, []string{"tool"}),
		approvalWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "lovia_approval_wait_seconds", Help: "From approval_required to approval_resolved on this worker, by agent and decision.",
			Buckets: prometheus.ExponentialBuckets(0.01, 4, 12)}, []string{"agent", "decision"}),
		pending: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "lovia_runs_pending", Help: "Run requests waiting in an agent's work queue (its consumer's pending count), for the agents this worker serves."}, []string{"agent"}),
		info:    prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "lovia_worker_info", Help: "1 per live worker, labelled with its id, version and the agents it serves."}, []string{"worker", "version", "agents"}),
	}
	// Workers of one process share a registry: reuse what is registered.
	reuse := func(c prometheus.Collector) (prometheus.Collector, error) {
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if errors.As(err, &are) {
				return are.ExistingCollector, nil
			}
			return nil, err
		}
		return c, nil
	}
	var err error
	register := func(dst any, c prometheus.Collector) {
		if err != nil {
			return
		}
		var got prometheus.Collector
		if got, err = reuse(c); err != nil {
			return
		}
		switch d := dst.(type) {
		case **prometheus.CounterVec:
			*d = got.(*prometheus.CounterVec)
		case **prometheus.HistogramVec:
			*d = got.(*prometheus.HistogramVec)
		case *prometheus.Counter:
			*d = got.(prometheus.Counter)
		case *prometheus.Gauge:
			*d = got.(prometheus.Gauge)
		case *prometheus.Histogram:
			*d = got.(prometheus.Histogram)
		case **prometheus.GaugeVec:
			*d = got.(*prometheus.GaugeVec)
		}
	}
	register(&m.started, m.started)
	register(&m.completed, m.completed)
	register(&m.failed, m.failed)
	register(&m.inFlight, m.inFlight)
	register(&m.held, m.held)
	register(&m.resumes, m.resumes)
	register(&m.redeliveries, m.redeliveries)
	register(&m.turnSeconds, m.turnSeconds)
	register(&m.toolSeconds, m.toolSeconds)
	register(&m.modelSeconds, m.modelSeconds)
	register(&m.tokens, m.tokens)
	register(&m.publishSecs, m.publishSecs)
	register(&m.poison, m.poison)
	register(&m.fenced, m.fenced)
	register(&m.takeovers, m.takeovers)
	register(&m.parked, m.parked)
	register(&m.released, m.released)
	register(&m.abandoned, m.abandoned)
	register(&m.queueWait, m.queueWait)
	register(&m.runSeconds, m.runSeconds)
	register(&m.toolErrors, m.toolErrors)
	register(&m.approvalWait, m.approvalWait)
	register(&m.pending, m.pending)
	register(&m.info, m.info)
	if err != nil {
		return nil, err
	}
	return m, nil
}
