// Package monitoring tests the real monitoring `make dev` runs: kube-state-metrics
// and Prometheus (devenv.Env.StartMonitoring) against the real node, with the
// standard alerts (deploy/monitoring/kubernetes-alerts.yaml), sending to a
// real Alertmanager routed to Remedy.
package monitoring

import (
	"os"
	"testing"

	"github.com/remedy-dev/remedy/internal/devenv"
	"github.com/remedy-dev/remedy/test/harness"
)

// alertFor replaces the standard alerts' `for:`, as make dev's --alert-for does.
const alertFor = "10s"

func TestMain(m *testing.M) {
	// Remedy and kube-controller-manager too, so a real crash can be remediated (remediate_test.go).
	os.Exit(harness.Main(m, harness.Options{Node: true, ControllerManager: true, Remedy: true, Alerts: &harness.AlertsOptions{},
		// make dev's intervals, so the benchmarks measure what dev runs.
		Monitoring: &harness.MonitoringOptions{Interval: devenv.DefaultMonitoringInterval, AlertFor: alertFor}}))
}
