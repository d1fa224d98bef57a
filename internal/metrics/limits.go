package metrics

import "github.com/prometheus/client_golang/prometheus"

// OpenRunsLimited counts the runs the operator held back because their
// namespace had --max-open-runs-per-namespace runs open, once per run held.
var OpenRunsLimited = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "remedy_open_runs_limited_total",
	Help: "KubernetesExecutions and RemediationRequests not started because their namespace had the maximum of open runs, by namespace.",
}, []string{"namespace"})

func init() {
	register(OpenRunsLimited)
}
