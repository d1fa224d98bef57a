package devenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// MonitoringOptions say how to run Prometheus and kube-state-metrics
// against an Env.
type MonitoringOptions struct {
	// Prometheus and KubeStateMetrics are the binaries (MonitoringBinaries).
	Prometheus, KubeStateMetrics string
	// RuleFiles are rule files Prometheus evaluates, and Rules more, by
	// name, written into its directory (StandardAlerts: the standard alerts
	// with a short `for:`).
	RuleFiles []string
	Rules     map[string][]byte
	// Alertmanager receives the alerts, with its basic-auth password; nil:
	// Prometheus evaluates the rules and sends nothing.
	Alertmanager *Alertmanager
	// PrometheusAddress and KubeStateMetricsAddress bind their HTTP servers;
	// empty picks a free loopback port.
	PrometheusAddress, KubeStateMetricsAddress string
	// ScrapeInterval and EvaluationInterval; zero: DefaultMonitoringInterval.
	ScrapeInterval, EvaluationInterval time.Duration
	// Log receives their output; nil discards it.
	Log io.Writer
	// DieWithParent kills them with this process (Linux).
	DieWithParent bool
}

// DefaultMonitoringInterval is dev's scrape and evaluation interval:
// Prometheus's default is 1m, which would add a minute to every alert.
const DefaultMonitoringInterval = 5 * time.Second

// Monitoring is a running Prometheus that scrapes kube-state-metrics, the
// API server and (with a node) the kubelet, each as its own least-privilege
// user (monitoringIdentities), and sends its alerts to an Alertmanager.
type Monitoring struct {
	// PrometheusURL is its API, e.g. http://127.0.0.1:9090 (headless: no UI).
	PrometheusURL string
	// KubeStateMetricsURL serves /metrics.
	KubeStateMetricsURL string
	// Dir holds their configuration, credentials and Prometheus's data.
	Dir        string
	prometheus *hostProcess
	ksm        *hostProcess
}

// StartMonitoring starts kube-state-metrics, then Prometheus, and waits
// until both are ready. Without a node there is no kubelet job.
func (e *Env) StartMonitoring(ctx context.Context, o MonitoringOptions) (m *Monitoring, err error) {
	if o.Log == nil {
		o.Log = io.Discard
	}
	for _, a := range []*string{&o.PrometheusAddress, &o.KubeStateMetricsAddress} {
		if *a == "" {
			if *a, err = FreeLoopbackAddress(); err != nil {
				return nil, err
			}
		}
	}
	ksmTelemetry, err := FreeLoopbackAddress()
	if err != nil {
		return nil, err
	}
	m = &Monitoring{PrometheusURL: "http://" + o.PrometheusAddress, KubeStateMetricsURL: "http://" + o.KubeStateMetricsAddress}
	if m.Dir, err = os.MkdirTemp("", "remedy-monitoring-"); err != nil {
		return nil, fmt.Errorf("create monitoring dir: %w", err)
	}
	defer func() {
		if err != nil {
			_ = m.Stop()
		}
	}()
	ids, err := e.monitoringIdentities(ctx, m.Dir)
	if err != nil {
		return m, err
	}
	host, port, _ := strings.Cut(o.KubeStateMetricsAddress, ":")
	thost, tport, _ := strings.Cut(ksmTelemetry, ":")
	if m.ksm, err = startHostProcess("kube-state-metrics", o.Log, o.DieWithParent, o.KubeStateMetrics,
		"--kubeconfig="+ids.ksmKubeconfig, "--host="+host, "--port="+port, "--telemetry-host="+thost, "--telemetry-port="+tport,
		"--resources="+strings.Join(ksmResources, ",")); err != nil {
		return m, err
	}
	client := &http.Client{Timeout: 5 * time.Second}
	if err := m.ksm.waitReady(ctx, client, m.KubeStateMetricsURL+"/healthz", 60*time.Second); err != nil {
		return m, err
	}
	for name, content := range o.Rules {
		path := filepath.Join(m.Dir, filepath.Base(name))
		if err := os.WriteFile(path, content, 0o600); err != nil {
			return m, fmt.Errorf("write rule file: %w", err)
		}
		o.RuleFiles = append(o.RuleFiles, path)
	}
	cfg, err := e.prometheusConfig(o, ids, m.Dir)
	if err != nil {
		return m, err
	}
	if err := os.WriteFile(filepath.Join(m.Dir, "prometheus.yml"), []byte(cfg), 0o600); err != nil {
		return m, fmt.Errorf("write prometheus config: %w", err)
	}
	if m.prometheus, err = startHostProcess("prometheus", o.Log, o.DieWithParent, o.Prometheus,
		"--config.file="+filepath.Join(m.Dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(m.Dir, "data"),
		"--storage.tsdb.retention.time=1d",
		"--web.listen-address="+o.PrometheusAddress,
		"--log.format=json"); err != nil {
		return m, err
	}
	if err := m.prometheus.waitReady(ctx, client, m.PrometheusURL+"/-/ready", 60*time.Second); err != nil {
		return m, err
	}
	return m, nil
}

// Stop ends Prometheus, then kube-state-metrics, and removes their files.
func (m *Monitoring) Stop() error {
	m.prometheus.stop()
	m.ksm.stop()
	return errors.Join(os.RemoveAll(m.Dir))
}

// prometheusConfig is prometheus.yml: the intervals, the rule files, the
// Alertmanager with its credentials, and the scrape jobs under the names
// kubernetes-mixin's rules select (kube-state-metrics, apiserver, kubelet).
func (e *Env) prometheusConfig(o MonitoringOptions, ids monitoringIDs, dir string) (string, error) {
	scrape, eval := o.ScrapeInterval, o.EvaluationInterval
	if scrape == 0 {
		scrape = DefaultMonitoringInterval
	}
	if eval == 0 {
		eval = DefaultMonitoringInterval
	}
	var b strings.Builder
	fmt.Fprintf(&b, "global:\n  scrape_interval: %s\n  evaluation_interval: %s\n", promDuration(scrape), promDuration(eval))
	b.WriteString("rule_files:\n")
	for _, f := range o.RuleFiles {
		fmt.Fprintf(&b, "- %s\n", strconv.Quote(f))
	}
	if am := o.Alertmanager; am != nil {
		pw := filepath.Join(dir, "alertmanager-password")
		if err := os.WriteFile(pw, []byte(am.Password), 0o600); err != nil {
			return "", fmt.Errorf("write alertmanager password: %w", err)
		}
		fmt.Fprintf(&b, `alerting:
  alertmanagers:
  - static_configs: [{targets: [%q]}]
    basic_auth: {username: %q, password_file: %q}
`, strings.TrimPrefix(am.URL, "http://"), AlertmanagerUser, pw)
	}
	tls := fmt.Sprintf("{ca_file: %%q, cert_file: %q, key_file: %q%%s}", ids.certFile, ids.keyFile)
	fmt.Fprintf(&b, `scrape_configs:
- job_name: kube-state-metrics
  honor_labels: true
  static_configs: [{targets: [%q]}]
- job_name: apiserver
  scheme: https
  tls_config: %s
  static_configs: [{targets: [%q]}]
`, strings.TrimPrefix(o.KubeStateMetricsAddress, "http://"), fmt.Sprintf(tls, ids.apiCAFile, ""), ids.apiAddress)
	if ca := e.kubeletServingCA(); ca != "" {
		// One scrape config per path, all labelled job="kubelet" with the
		// path in metrics_path, as kube-prometheus's ServiceMonitor does. The
		// kubelet's self-signed certificate names the node, not its IP.
		for _, path := range []string{"/metrics", "/metrics/cadvisor", "/metrics/probes"} {
			fmt.Fprintf(&b, `- job_name: kubelet%s
  scheme: https
  metrics_path: %s
  tls_config: %s
  static_configs: [{targets: [%q], labels: {node: %q, metrics_path: %q}}]
  relabel_configs: [{target_label: job, replacement: kubelet}]
`, strings.ReplaceAll(strings.TrimPrefix(path, "/metrics"), "/", "-"), path, fmt.Sprintf(tls, ca, ", server_name: "+strconv.Quote(NodeName)), NodeIP+":"+strconv.Itoa(kubeletPort), NodeName, path)
		}
	}
	return b.String(), nil
}

// promDuration renders d as Prometheus reads it (whole seconds or more).
func promDuration(d time.Duration) string {
	if d%time.Minute == 0 {
		return strconv.Itoa(int(d/time.Minute)) + "m"
	}
	return strconv.Itoa(int(d/time.Second)) + "s"
}
