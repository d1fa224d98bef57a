package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/remedy-dev/remedy/internal/devenv"
	remedyrelease "github.com/remedy-dev/remedy/internal/release"
)

// access is what a person at the keyboard uses: Alertmanager and the
// worker's receiver, the admin kubeconfig and env file in the dev directory,
// and the pinned tools linked into its bin/.
type access struct {
	am                                  *devenv.Alertmanager
	receiver, prometheus                string
	person                              *rest.Config
	kubeconfig, envFile, binDir, plugin string
}

// startAlertsAndAccess starts Alertmanager routed to the worker's receiver,
// and Prometheus and kube-state-metrics sending to it, writes the person's kubeconfig and env file, and links kubectl, temporal,
// amtool and kubectl-remedy into <dev-dir>/bin.
func (s *session) startAlertsAndAccess(ctx context.Context) (*access, error) {
	a := &access{kubeconfig: filepath.Join(s.f.devDir, "kubeconfig"), envFile: filepath.Join(s.f.devDir, "env"), binDir: filepath.Join(s.f.devDir, "bin")}
	done := step("starting Alertmanager on " + s.f.amAddr + ", routed to the worker's receiver on " + s.f.alertsAddr)
	var err error
	if a.am, a.receiver, err = startDevAlerts(ctx, s.env, s.f.root, s.f.devDir, s.f.amAddr, s.f.alertsAddr, s.log); err != nil {
		return nil, err
	}
	s.onExit(func() { _ = a.am.Stop() })
	done()
	if a.prometheus, err = s.startMonitoring(ctx, a.am); err != nil {
		return nil, err
	}
	if a.person, err = writeAccess(s.env, a.kubeconfig, a.envFile, devenv.ShellEnv{
		Kubeconfig: a.kubeconfig, TemporalAddress: s.env.TemporalAddress, WebUI: s.webUI(), BinDir: a.binDir, AlertmanagerURL: a.am.URL,
		AlertmanagerHTTPConfig: a.am.HTTPConfig, PrometheusURL: a.prometheus,
		CodecEndpoint: s.codecURL(),
	}); err != nil {
		return nil, err
	}
	pluginPath, unlink, err := linkKubectlPlugin(a.binDir)
	if err != nil {
		return nil, err
	}
	s.onExit(unlink)
	a.plugin = pluginPath
	amBin, err := devenv.AlertmanagerBinary(s.f.root)
	if err != nil {
		return nil, err
	}
	unlinkTools, err := linkTools(a.binDir, map[string]string{"kubectl": filepath.Join(s.opts.Assets, "kubectl"), "temporal": s.opts.TemporalCLI,
		"amtool": filepath.Join(filepath.Dir(amBin), "amtool")})
	if err != nil {
		return nil, err
	}
	s.onExit(unlinkTools)
	return a, nil
}

// writeAccess writes an admin kubeconfig for the person at the keyboard and
// the .dev/env file people and scripts source, and returns that person's config.
func writeAccess(env *devenv.Env, kubeconfig, envFile string, shell devenv.ShellEnv) (*rest.Config, error) {
	user, err := env.Kube.AddUser(envtest.User{Name: "remedy-dev-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return nil, fmt.Errorf("add admin user: %w", err)
	}
	kc, err := user.KubeConfig()
	if err != nil {
		return nil, fmt.Errorf("render kubeconfig: %w", err)
	}
	if err := os.WriteFile(kubeconfig, kc, 0o600); err != nil {
		return nil, fmt.Errorf("write %s: %w", kubeconfig, err)
	}
	if err := os.WriteFile(envFile, shell.Render(), 0o644); err != nil {
		return nil, fmt.Errorf("write %s: %w", envFile, err)
	}
	return user.Config(), nil
}

// printReady prints the banner: where everything is, and what to try.
func (s *session) printReady(a *access) {
	fmt.Printf(`
  version:         %s
  kubeconfig:      %s
  Temporal:        %s
  Temporal Web UI: %s/namespaces/default/workflows
  codec server:    %s (sign in at /login with: kubectl create token approver -n demo)
  logs:            %s
  metrics:         %s
  kubectl, temporal, kubectl-remedy, amtool: %s (the pinned ones, linked)
  environment:     source %s   (KUBECONFIG, TEMPORAL_ADDRESS, REMEDY_WEB_UI, ALERTMANAGER_URL, ALERTMANAGER_HTTP_CONFIG, PROMETHEUS_URL, and PATH with %s first)

  Try it:
    source %s
    kubectl apply -f %s
    kubectl get kexec -n demo -w

  Drift (docs/drift.md): scale demo/drift-demo's ReplicaSet by hand, watch the
  Deployment controller's revert be judged, and find RemedyKind='Drift' in the Web UI.

  Alerts (docs/alerts.md): Alertmanager UI %s (user remedy, password in $ALERTMANAGER_HTTP_CONFIG), receiver %s;
    amtool --alertmanager.url "$ALERTMANAGER_URL" --http.config.file "$ALERTMANAGER_HTTP_CONFIG" alert add DemoHighLatency namespace=demo deployment=web
    kubectl get rr -n demo -l remedy.dev/rule=demo-latency -w
%s
`, remedyrelease.String(), a.kubeconfig, s.env.TemporalAddress, s.webUI(), s.codecURL(), s.log.Name(), s.metrics.banner(), filepath.Dir(a.plugin),
		a.envFile, a.binDir, a.envFile, filepath.Join(s.f.root, "deploy", "samples", "kexec-scale.yaml"), a.am.URL, a.receiver, s.monitoringBanner(a))
	fmt.Println("remedy-dev: ready")
}

// monitoringBanner says where Prometheus is and what it alerts on.
func (s *session) monitoringBanner(a *access) string {
	if a.prometheus == "" {
		return ""
	}
	return fmt.Sprintf(`
  Prometheus (docs/development.md, Monitoring): %s (API only: curl "$PROMETHEUS_URL/api/v1/alerts"), kube-state-metrics http://%s/metrics;
    the standard alerts (%s) fire with for: %s (--alert-for; ALERT_FOR in make dev)
`, a.prometheus, s.f.ksmAddr, devenv.KubernetesAlertsFile, forSetting(s.f.alertFor))
}
