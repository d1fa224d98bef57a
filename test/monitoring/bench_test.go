package monitoring

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/remedy-dev/remedy/test/harness"
)

const (
	// costWindow is how long each cost is measured (test/node's too).
	costWindow = 20 * time.Second
	// manyPods is the load: 100 demo app replicas, as test/node measures the node with.
	manyPods = 100
)

// BenchmarkMonitoringIdleCost measures, over one window, the CPU and
// resident memory of Prometheus and kube-state-metrics as make dev runs them
// (5s scrape and evaluation, the standard alerts), with no Pod of the
// benchmark's own, against the control plane (etcd, kube-apiserver,
// kube-controller-manager).
func BenchmarkMonitoringIdleCost(b *testing.B) {
	reportMonitoring(b, harness.MeasureIdleCost(b, costWindow))
}

// BenchmarkMonitoring100PodsCost is the same with manyPods demo app
// replicas Ready on the node: kube-state-metrics watches them, Prometheus
// stores their series (kube-state-metrics's and the kubelet's cAdvisor's).
func BenchmarkMonitoring100PodsCost(b *testing.B) {
	sum := harness.MeasurePodsCost(b, manyPods, costWindow)
	reportMonitoring(b, sum)
}

// reportMonitoring reports Prometheus and kube-state-metrics together
// against the control plane, and each alone.
func reportMonitoring(b *testing.B, sum map[harness.CostGroup]harness.Cost) {
	both := sum[harness.Prometheus]
	ksm := sum[harness.KubeStateMetrics]
	require.NotZero(b, ksm.Procs, "no kube-state-metrics process found")
	both.Cores, both.RSSMB, both.Procs = both.Cores+ksm.Cores, both.RSSMB+ksm.RSSMB, both.Procs+ksm.Procs
	sum["monitoring"] = both
	harness.ReportCost(b, sum, "monitoring")
	for _, g := range []harness.CostGroup{harness.Prometheus, harness.KubeStateMetrics} {
		b.ReportMetric(sum[g].Cores/float64(b.N), string(g)+"-cores")
		b.ReportMetric(sum[g].RSSMB/float64(b.N), string(g)+"-rss-MB")
	}
}
