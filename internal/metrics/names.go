package metrics

import (
	"regexp"
	"sort"

	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// collectors are Remedy's own metrics, registered by this package's init functions.
var collectors []prometheus.Collector

// AfterFirstEvent lists the metrics that have no series until an event
// outside a plain execution, approval and drift decision: vectors keyed by
// values from users' objects (a reload policy's scope, an object's kind and
// field manager, a namespace, a workflow type), which cannot be
// created ahead. Vectors with a fixed set of outcomes start at 0 for each,
// so alerts on their rate see the series before the first event.
func AfterFirstEvent() []string {
	return []string{
		"remedy_configmap_reload_restarts_total", "remedy_configmap_reload_errors_total",
		"remedy_configmap_reload_debounced_total", "remedy_configmap_reload_retry_total",
		"remedy_configmap_reload_declined_total", "remedy_split_ownership_detected_total",
		"remedy_open_runs_limited_total", "remedy_alerts_matched_total",
		"remedy_alert_runs_started_total", "remedy_configmap_reload_dropped_restarts_total",
		"remedy_alerts_deduplicated_total", "remedy_workflow_unknown_signals_total",
	}
}

// WorkflowUnknownSignals counts signals no handler of the receiving
// workflow type reads, by workflow type (workflows.UnknownSignals); the
// workflow counts it when not replaying (workflows.count).
var WorkflowUnknownSignals = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "remedy_workflow_unknown_signals_total",
	Help: "Signals accepted by Temporal that the receiving workflow type never reads, by workflow type.",
}, []string{"workflow_type"})

func init() { register(WorkflowUnknownSignals) }

func register(cs ...prometheus.Collector) {
	collectors = append(collectors, cs...)
	ctrlmetrics.Registry.MustRegister(cs...)
}

var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

// Names lists every metric name Remedy itself defines (not the SDK's
// temporal_* or controller-runtime's), sorted: what dashboards, alerts and
// the README may name.
func Names() []string {
	ch := make(chan *prometheus.Desc)
	go func() {
		for _, c := range collectors {
			c.Describe(ch)
		}
		close(ch)
	}()
	var names []string
	for d := range ch {
		// Desc exposes its name only through String.
		if m := fqName.FindStringSubmatch(d.String()); m != nil {
			names = append(names, m[1])
		}
	}
	sort.Strings(names)
	return names
}
