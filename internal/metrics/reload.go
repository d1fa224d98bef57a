package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

// ConfigMap reload metrics (docs/reload.md, "Metrics"). The scope label is
// the value of the policy's scopeLabel (env by default) shared by the
// ConfigMap and the workload.
var (
	// ReloadRestarts counts pod-template changes made by the reload workflow.
	ReloadRestarts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "remedy_configmap_reload_restarts_total",
		Help: "Rolling restarts made because ConfigMap data changed, by scope value.",
	}, []string{"scope"})

	// ReloadErrors counts failed restart attempts.
	ReloadErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "remedy_configmap_reload_errors_total",
		Help: "Failed restart attempts, by scope value.",
	}, []string{"scope"})

	// ReloadDebounced counts changes folded into another change's restart.
	ReloadDebounced = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "remedy_configmap_reload_debounced_total",
		Help: "ConfigMap changes coalesced into a restart by the debounce window, by scope value.",
	}, []string{"scope"})

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
	}, []string{"scope"})

	// ReloadDeclined counts restarts a person rejected or let expire.
	ReloadDeclined = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "remedy_configmap_reload_declined_total",
		Help: "Restarts not made because their approval request was rejected or expired, by scope value and decision.",
	}, []string{"scope", "decision"})

	// ReloadDroppedRestarts counts pending restarts a reload workflow gave
	// up because their workload is gone; the workflow counts it when not
	// replaying (workflows.count).
	ReloadDroppedRestarts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "remedy_configmap_reload_dropped_restarts_total",
		Help: "Pending restarts given up because their workload is gone, by scope value.",
	}, []string{"scope"})

	// ReloadWatchErrors counts failures of the operator's ConfigMap watch
	// (list or watch), after which client-go backs off and lists again.
	ReloadWatchErrors = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "remedy_configmap_reload_watch_errors_total",
		Help: "Errors of the operator's ConfigMap list-and-watch.",
	})

	// ReloadWatchReconnects counts ConfigMap watch requests after the first:
	// each is a reconnect, whether the last stream timed out or failed.
	ReloadWatchReconnects = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "remedy_configmap_reload_watch_reconnects_total",
		Help: "ConfigMap watch streams opened after the first one.",
	})

	// ReloadLeaderState is 1 while this operator replica holds the lease.
	ReloadLeaderState = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "remedy_configmap_reload_leader_state",
		Help: "1 when this operator replica is the leader (runs the reload and other reconcilers), otherwise 0.",
	})

	// ReloadLeaderTransitions counts leadership acquired and lost.
	ReloadLeaderTransitions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "remedy_configmap_reload_leader_transitions_total",
		Help: "Leadership transitions of this operator replica, by transition (acquired, lost).",
	}, []string{"transition"})
)

func init() {
	register(ReloadRestarts, ReloadErrors, ReloadDebounced, ReloadDroppedRestarts, ReloadPending, ReloadRetries, ReloadDeclined,
		ReloadWatchErrors, ReloadWatchReconnects, ReloadLeaderState, ReloadLeaderTransitions)
}
