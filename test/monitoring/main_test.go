// Package monitoring tests the real monitoring `make dev` runs: kube-state-metrics
// and Prometheus (devenv.Env.StartMonitoring) against the real node, with the
// standard alerts (deploy/monitoring/kubernetes-alerts.yaml), sending to a
// real Alertmanager.
package monitoring

import (
	"os"
	"testing"

	"github.com/remedy-dev/remedy/internal/devenv"
	"github.com/remedy-dev/remedy/test/harness"
)

func TestMain(m *testing.M) {
	os.Exit(harness.Main(m, harness.Options{Node: true, Alerts: &harness.AlertsOptions{},
		// make dev's intervals, so the benchmarks measure what dev runs.
		Monitoring: &harness.MonitoringOptions{Interval: devenv.DefaultMonitoringInterval}}))
}
