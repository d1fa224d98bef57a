package harness

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/remedy-dev/remedy/internal/devenv"
)

// MonitoringOptions run real kube-state-metrics and Prometheus against the
// package's parts (devenv.Env.StartMonitoring, as `make dev` runs them):
// Prometheus scrapes kube-state-metrics, the API server and, with a node, the
// kubelet, evaluates the rule files and sends to the package's Alertmanager
// (Options.Alerts), if it runs one.
type MonitoringOptions struct {
	// RuleFiles Prometheus evaluates; empty: the standard alerts
	// (devenv.KubernetesAlertsFile) with AlertFor.
	RuleFiles []string
	// AlertFor replaces every standard alert's `for:` (default 10s).
	AlertFor string
	// Interval is Prometheus's scrape and evaluation interval (default 2s).
	Interval time.Duration
}

var monitoring *devenv.Monitoring

// Monitoring is the running Prometheus and kube-state-metrics (Options.Monitoring).
func Monitoring() *devenv.Monitoring { return monitoring }

// StartMonitoring starts kube-state-metrics and Prometheus against env with
// o, sending alerts to am (nil: nowhere); logs receive their output. Main
// calls it for Options.Monitoring; a test with parts of its own may too.
func StartMonitoring(ctx context.Context, env *devenv.Env, o MonitoringOptions, am *devenv.Alertmanager, logs io.Writer) (*devenv.Monitoring, error) {
	prom, ksm, err := devenv.MonitoringBinaries(Root)
	if err != nil {
		return nil, err
	}
	if o.AlertFor == "" {
		o.AlertFor = "10s"
	}
	if o.Interval == 0 {
		o.Interval = 2 * time.Second
	}
	var rules map[string][]byte
	if len(o.RuleFiles) == 0 {
		standard, err := devenv.StandardAlerts(Root, o.AlertFor)
		if err != nil {
			return nil, err
		}
		rules = map[string][]byte{"kubernetes-alerts.rules.yaml": standard}
	}
	return env.StartMonitoring(ctx, devenv.MonitoringOptions{Prometheus: prom, KubeStateMetrics: ksm, RuleFiles: o.RuleFiles, Rules: rules,
		Alertmanager: am, ScrapeInterval: o.Interval, EvaluationInterval: o.Interval, Log: logs, DieWithParent: true})
}

// PrometheusAlert is one alert of Prometheus's /api/v1/alerts.
type PrometheusAlert struct {
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
	// State is pending or firing.
	State string `json:"state"`
}

// PrometheusAlerts are the alerts Monitoring's Prometheus holds now.
func PrometheusAlerts(t testing.TB) []PrometheusAlert {
	t.Helper()
	resp, err := http.Get(monitoring.PrometheusURL + "/api/v1/alerts")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var body struct {
		Data struct {
			Alerts []PrometheusAlert `json:"alerts"`
		} `json:"data"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
	return body.Data.Alerts
}

// AlertmanagerAlert is one alert of Alertmanager's /api/v2/alerts.
type AlertmanagerAlert struct {
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
	Status      struct {
		State string `json:"state"`
	} `json:"status"`
}

// AlertmanagerAlerts are the alerts the package's Alertmanager holds now (Options.Alerts).
func AlertmanagerAlerts(t testing.TB) []AlertmanagerAlert {
	t.Helper()
	resp, err := alertmanager.Client().Get(alertmanager.URL + "/api/v2/alerts")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var alerts []AlertmanagerAlert
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&alerts))
	return alerts
}

// PrometheusGet is the body of a GET of Monitoring's Prometheus API path
// (such as /api/v1/targets), for a failing test's message.
func PrometheusGet(t testing.TB, path string) string {
	t.Helper()
	resp, err := http.Get(monitoring.PrometheusURL + path)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}
