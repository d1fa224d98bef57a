// Package metrics defines Remedy's Prometheus metrics (docs/operate.md lists them). They are
// registered with controller-runtime's registry, which every Remedy process
// serves on /metrics.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

var (
	// ExecutionPhases counts phase entries of KubernetesExecutions.
	ExecutionPhases = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "remedy_executions_total",
		Help: "KubernetesExecution phase entries, by action, phase and reason.",
	}, []string{"action", "phase", "reason"})

	// PhaseDuration observes how long executions stay in each phase.
	PhaseDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "remedy_execution_phase_duration_seconds",
		Help:    "Time KubernetesExecutions spent in a phase before leaving it.",
		Buckets: prometheus.ExponentialBuckets(0.01, 4, 10),
	}, []string{"action", "phase"})

	// StatusWrites counts the workflows' pushes of .status by outcome:
	// written, stale (a newer sequence was already stored), gone (object deleted),
	// conflict (a write lost a resourceVersion race and was retried) and
	// refused (the caller is not the object's own run).
	StatusWrites = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "remedy_status_writes_total",
		Help: "Status pushes of workflows, by kind and outcome.",
	}, []string{"kind", "result"})
)

func init() {
	register(ExecutionPhases, PhaseDuration, StatusWrites)
}
