package main

import (
	"flag"
	"fmt"
	"path/filepath"
	"time"

	kv1 "github.com/remedy-dev/remedy/api/kausality/v1alpha1"
	"github.com/remedy-dev/remedy/internal/cli"
	"github.com/remedy-dev/remedy/internal/devenv"
	"github.com/remedy-dev/remedy/internal/image"
	"github.com/remedy-dev/remedy/worker"
)

// devFlags are remedy-dev's flags, checked: root is --repo made absolute,
// mode is --drift-mode parsed.
type devFlags struct {
	temporalPort, uiPort, devDir, stateDir, nodeImages string
	operatorMetrics, webhookMetrics, workerMetrics     string
	codecAddr, amAddr, alertsAddr                      string
	promAddr, ksmAddr, alertFor                        string
	interval                                           time.Duration
	callbacks                                          *cli.ListFlag
	driftApproval, runNode                             bool
	workerStop                                         time.Duration
	root                                               string
	mode                                               kv1.Mode
}

func parseDevFlags(args []string) (*devFlags, error) {
	var f devFlags
	fs := flag.NewFlagSet("remedy-dev", flag.ContinueOnError)
	fs.StringVar(&f.temporalPort, "temporal-port", "7233", "Temporal frontend port on 127.0.0.1")
	fs.StringVar(&f.uiPort, "ui-port", "8233", "Temporal Web UI port on 127.0.0.1")
	repo := fs.String("repo", ".", "repository root (holds deploy/ and receives .dev/)")
	fs.StringVar(&f.devDir, "dev-dir", "", "directory of the lock, kubeconfig, env file and log (default <repo>/.dev)")
	fs.StringVar(&f.operatorMetrics, "operator-metrics-addr", "127.0.0.1:8080", "address of the operator's /metrics (0 disables)")
	fs.StringVar(&f.webhookMetrics, "webhook-metrics-addr", "127.0.0.1:8082", "address of the drift webhook's /metrics (0 disables)")
	fs.StringVar(&f.workerMetrics, "worker-metrics-addr", "127.0.0.1:8083", "address of the worker's /metrics (0 disables)")
	driftMode := fs.String("drift-mode", "enforce", "default mode of the drift webhook: log or enforce")
	callbacks, driftApproval, checkCallbacks := cli.DriftReportingFlags(fs)
	fs.StringVar(&f.stateDir, "state-dir", "", "keep etcd's data, the API server's certificates and Temporal's database here, so the next start with it resumes every object and run (default: thrown away on exit)")
	fs.StringVar(&f.codecAddr, "codec-addr", "127.0.0.1:8091", "address of the operator's codec server: the Web UI and 'temporal --codec-endpoint' read Remedy's sealed payloads and send a person's approval decisions through it (docs/approvals.md)")
	fs.StringVar(&f.amAddr, "alertmanager-addr", "127.0.0.1:9093", "address of Alertmanager's API and UI")
	fs.StringVar(&f.alertsAddr, "alerts-addr", "127.0.0.1:9095", "address of the worker's Alertmanager receiver")
	fs.StringVar(&f.promAddr, "prometheus-addr", "127.0.0.1:9090", "address of Prometheus's API (headless: no UI); 0 runs no Prometheus and no kube-state-metrics")
	fs.StringVar(&f.ksmAddr, "kube-state-metrics-addr", "127.0.0.1:8084", "address of kube-state-metrics's /metrics")
	fs.StringVar(&f.alertFor, "alert-for", devenv.DefaultAlertFor, "the for: of the standard Kubernetes alerts ("+devenv.KubernetesAlertsFile+") in dev, instead of their real 15m and 1h; empty keeps them")
	fs.DurationVar(&f.interval, "monitoring-interval", devenv.DefaultMonitoringInterval, "Prometheus's scrape and evaluation interval")
	fs.BoolVar(&f.runNode, "node", false, "also run a real node (containerd, kube-scheduler, the kubelet; Linux, root) so that Pods run; 'make dev' sets it unless NODE=0")
	fs.StringVar(&f.nodeImages, "node-images", "bin/remedy-image.tar,bin/pause-image.tar", "image tarballs the node imports ('make image' writes them), relative to --repo; the pause image is "+image.PauseReference())
	fs.DurationVar(&f.workerStop, "worker-stop-timeout", worker.DefaultStopTimeout, "on Ctrl-C, how long the worker's in-flight activities may finish before they are cancelled")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), devUsage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if err := checkCallbacks(); err != nil {
		return nil, err
	}
	f.callbacks, f.driftApproval = callbacks, *driftApproval
	mode, err := kv1.ParseMode(*driftMode)
	if err != nil || mode == "" {
		return nil, fmt.Errorf("--drift-mode %q: want log or enforce", *driftMode)
	}
	f.mode = mode
	if f.interval < time.Second || f.interval%time.Second != 0 {
		return nil, fmt.Errorf("--monitoring-interval %s: want whole seconds", f.interval)
	}
	if f.root, err = filepath.Abs(*repo); err != nil {
		return nil, fmt.Errorf("resolve repository root: %w", err)
	}
	if f.devDir == "" {
		f.devDir = filepath.Join(f.root, ".dev")
	}
	return &f, nil
}

const devUsage = `Usage: remedy-dev [flags]

Runs the whole platform on this machine: etcd, kube-apiserver,
kube-controller-manager, the Temporal dev server with its Web UI, the drift
webhook, the operator and the worker; with --node also a real node
(containerd, kube-scheduler, the kubelet, the images of --node-images
imported, no registry ever contacted), so that Pods run. It writes <dev-dir>/kubeconfig,
<dev-dir>/env (source it: KUBECONFIG, TEMPORAL_ADDRESS, REMEDY_WEB_UI,
TEMPORAL_CODEC_ENDPOINT, ALERTMANAGER_URL, ALERTMANAGER_HTTP_CONFIG,
PROMETHEUS_URL, and PATH with <dev-dir>/bin first) and links the pinned
kubectl, temporal, amtool and kubectl-remedy into <dev-dir>/bin.

Monitoring, all on loopback: Alertmanager (--alertmanager-addr, basic auth)
routes to the worker's receiver (--alerts-addr). kube-state-metrics
(--kube-state-metrics-addr) exports Pods, Deployments, ReplicaSets,
StatefulSets, DaemonSets, Nodes and Namespaces as the user
remedy-dev:kube-state-metrics (list and watch only). Prometheus
(--prometheus-addr, headless: API only) scrapes it (job kube-state-metrics),
the API server (job apiserver) and, with --node, the kubelet's /metrics,
/metrics/cadvisor and /metrics/probes (job kubelet) as the user
remedy-dev:prometheus, every --monitoring-interval; it evaluates the standard
alerts of deploy/monitoring/kubernetes-alerts.yaml with every for: set to
--alert-for, and sends to Alertmanager. docs/development.md says more.

Temporal payloads are sealed; the operator serves the codec server on
--codec-addr, and the Web UI is pointed at it. Approve through Temporal as a
Kubernetes identity (the ServiceAccount demo/approver may decide in demo):

  export TEMPORAL_CODEC_AUTH="Bearer $(kubectl create token approver -n demo)"
  temporal workflow update execute --workflow-id <id> --name decide --input '{"approved":true}'

In the Web UI, sign in at <codec>/login with such a token, then set the UI's
codec server (browser setting) to <codec> with "Include cross-origin
credentials" on (docs/approvals.md, "Deciding through Temporal").

The pinned binaries: the directory $KUBEBUILDER_ASSETS (etcd, kube-apiserver,
kube-controller-manager, kubectl), the file $TEMPORAL_CLI, and $PROMETHEUS and
$KUBE_STATE_METRICS; where either is
unset, the tools cache ($REMEDY_TOOLS_CACHE, default ~/.cache/remedy/tools) at
the versions of <repo>/hack/tools/versions.env: kubernetes-<KUBERNETES_VERSION>-<KUBERNETES_BUILD>/
temporal-<TEMPORAL_CLI_VERSION>/temporal, prometheus-<PROMETHEUS_VERSION>-<PROMETHEUS_BUILD>/
and kube-state-metrics-<KUBE_STATE_METRICS_VERSION>/. ` + "`make tools`" + ` (or
hack/tools/install.sh kubernetes temporal prometheus kube-state-metrics) builds them there; ` + "`make dev`" + `
does both and passes DEV_FLAGS on.

Flags:
`
