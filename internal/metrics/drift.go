package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Drift webhook metrics (docs/operate.md).
var (
	// DriftDecisions counts admission decisions by what the pure decision found.
	DriftDecisions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "remedy_drift_decisions_total",
		Help: "Drift webhook admission decisions, by result (expected, new-origin, drift-denied, drift-logged, drift-approved, ...).",
	}, []string{"result"})

	// DriftWebhookLatency observes the whole admission handling, decode to response.
	DriftWebhookLatency = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "remedy_drift_webhook_duration_seconds",
		Help:    "Time the drift webhook spent on one admission request.",
		Buckets: prometheus.ExponentialBuckets(0.0001, 3, 10),
	})

	// DriftSignalQueueDepth is the number of drift signals waiting for Temporal.
	DriftSignalQueueDepth = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "remedy_drift_signal_queue_depth",
		Help: "Drift signals queued for the drift workflows and not yet sent.",
	})

	// DriftSignalsSent counts drift signals delivered to Temporal.
	DriftSignalsSent = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "remedy_drift_signals_sent_total",
		Help: "Drift signals delivered to drift workflows (signal-with-start).",
	})

	// DriftSignalsDropped counts drift signals given up on, by reason (full, failed, duplicate).
	DriftSignalsDropped = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "remedy_drift_signals_dropped_total",
		Help: "Drift signals not delivered, by reason: full (queue full), failed (retries exhausted), duplicate (same report within 30s).",
	}, []string{"reason"})

	// DriftParentUpdates counts asynchronous parent annotation writes, by result.
	DriftParentUpdates = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "remedy_drift_parent_updates_total",
		Help: "Writes of kausality annotations onto parents (controllers, phase, used approvals), by result.",
	}, []string{"result"})
)

func init() {
	register(DriftDecisions, DriftWebhookLatency, DriftSignalQueueDepth, DriftSignalsSent, DriftSignalsDropped, DriftParentUpdates)
	for _, reason := range []string{"full", "failed", "duplicate"} {
		DriftSignalsDropped.WithLabelValues(reason)
	}
}
