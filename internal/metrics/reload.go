package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// ConfigMap reload metrics (DESIGN §7). The env label is the value of the
// policy's scope label shared by the ConfigMap and the workload.
var (
	// ReloadRestarts counts pod-template changes made by the reload workflow.
	ReloadRestarts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "remedy_configmap_reload_restarts_total",
		Help: "Rolling restarts made because ConfigMap data changed, by scope value.",
	}, []string{"env"})

	// ReloadErrors counts failed restart attempts.
	ReloadErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "remedy_configmap_reload_errors_total",
		Help: "Failed restart attempts, by scope value.",
	}, []string{"env"})

	// ReloadDebounced counts changes folded into another change's restart.
	ReloadDebounced = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "remedy_configmap_reload_debounced_total",
		Help: "ConfigMap changes coalesced into a restart by the debounce window, by scope value.",
	}, []string{"env"})

	// ReloadPending is the number of workloads whose recorded hashes differ
	// from their ConfigMaps' data, as the operator last saw them.
	ReloadPending = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "remedy_configmap_reload_pending_restarts",
		Help: "Workloads with a signalled restart not yet applied.",
	})

	// ReloadRetries counts restart attempts after a failed one.
	ReloadRetries = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "remedy_configmap_reload_retry_total",
		Help: "Restart attempts retried after a failure, by scope value.",
	}, []string{"env"})

	// ReloadDeclined counts restarts a person rejected or let expire.
	ReloadDeclined = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "remedy_configmap_reload_declined_total",
		Help: "Restarts not made because their approval request was rejected or expired, by scope value and decision.",
	}, []string{"env", "decision"})
)

func init() {
	ctrlmetrics.Registry.MustRegister(ReloadRestarts, ReloadErrors, ReloadDebounced, ReloadPending, ReloadRetries, ReloadDeclined)
}
