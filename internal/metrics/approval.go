package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

var (
	// ApprovalLatency observes the time from an approval request's creation to its decision.
	ApprovalLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "remedy_approval_latency_seconds",
		Help:    "Time from a RemediationApprovalRequest's creation to its decision, by decision.",
		Buckets: prometheus.ExponentialBuckets(0.5, 3, 10),
	}, []string{"decision"})

	// ApprovalOutcomes counts decisions by outcome and channel.
	ApprovalOutcomes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "remedy_approval_outcomes_total",
		Help: "Approval decisions, by decision (Approved, Rejected, Expired) and channel.",
	}, []string{"decision", "via"})
)

func init() {
	register(ApprovalLatency, ApprovalOutcomes)
}

// ObserveApproval records one decision; a non-positive latency is unknown and not observed.
func ObserveApproval(decision, via string, latency time.Duration) {
	ApprovalOutcomes.WithLabelValues(decision, via).Inc()
	if latency > 0 {
		ApprovalLatency.WithLabelValues(decision).Observe(latency.Seconds())
	}
}
