package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	kv1 "github.com/remedy-dev/remedy/api/kausality/v1alpha1"
	"github.com/remedy-dev/remedy/internal/compose"
	"github.com/remedy-dev/remedy/internal/devenv"
	"github.com/remedy-dev/remedy/internal/image"
	remedymetrics "github.com/remedy-dev/remedy/internal/metrics"
	remedyrelease "github.com/remedy-dev/remedy/internal/release"
	"github.com/remedy-dev/remedy/worker"
)

func runDev(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("dev", flag.ContinueOnError)
	port := fs.String("temporal-port", "7233", "Temporal frontend port on 127.0.0.1")
	uiPort := fs.String("ui-port", "8233", "Temporal Web UI port on 127.0.0.1")
	repo := fs.String("repo", ".", "repository root (holds deploy/ and receives .dev/)")
	devDirFlag := fs.String("dev-dir", "", "directory of the lock, kubeconfig, env file and log (default <repo>/.dev)")
	operatorMetrics := fs.String("operator-metrics-addr", "127.0.0.1:8080", "address of the operator's /metrics (0 disables)")
	webhookMetrics := fs.String("webhook-metrics-addr", "127.0.0.1:8082", "address of the drift webhook's /metrics (0 disables)")
	workerMetrics := fs.String("worker-metrics-addr", "127.0.0.1:8083", "address of the worker's /metrics (0 disables)")
	driftMode := fs.String("drift-mode", "enforce", "default mode of the drift webhook: log or enforce")
	callbacks, driftApproval, checkCallbacks := callbackFlags(fs)
	stateDirFlag := fs.String("state-dir", "", "keep etcd's data, the API server's certificates and Temporal's database here, so the next start with it resumes every object and run (default: thrown away on exit)")
	codecAddr := fs.String("codec-addr", "127.0.0.1:8091", "address of the operator's codec server: the Web UI and 'temporal --codec-endpoint' read Remedy's sealed payloads and send a person's approval decisions through it (docs/approvals.md)")
	amAddr := fs.String("alertmanager-addr", "127.0.0.1:9093", "address of Alertmanager's API and UI")
	alertsAddr := fs.String("alerts-addr", "127.0.0.1:9095", "address of the worker's Alertmanager receiver")
	runNode := fs.Bool("node", false, "also run a real node (containerd, kube-scheduler, the kubelet; Linux, root) so that Pods run; 'make dev' sets it unless NODE=0")
	nodeImages := fs.String("node-images", "bin/remedy-image.tar,bin/pause-image.tar", "image tarballs the node imports ('make image' writes them), relative to --repo; the pause image is "+image.PauseReference())
	workerStop := fs.Duration("worker-stop-timeout", worker.DefaultStopTimeout, "on Ctrl-C, how long the worker's in-flight activities may finish before they are cancelled")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), devUsage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := checkCallbacks(); err != nil {
		return err
	}
	mode, err := kv1.ParseMode(*driftMode)
	if err != nil || mode == "" {
		return fmt.Errorf("--drift-mode %q: want log or enforce", *driftMode)
	}
	root, err := filepath.Abs(*repo)
	if err != nil {
		return fmt.Errorf("resolve repository root: %w", err)
	}
	opts, err := devenv.OptionsFromEnv(root)
	if err != nil {
		return err
	}
	devDir := *devDirFlag
	if devDir == "" {
		devDir = filepath.Join(root, ".dev")
	}
	// Nothing in devDir is written before it is claimed, and nothing is
	// started before every fixed port is known to be free.
	release, err := claimDevDir(devDir)
	if err != nil {
		return err
	}
	defer release()
	stateDir := *stateDirFlag
	if stateDir != "" {
		if stateDir, err = filepath.Abs(stateDir); err != nil {
			return fmt.Errorf("resolve --state-dir: %w", err)
		}
		if err := os.MkdirAll(stateDir, 0o700); err != nil {
			return fmt.Errorf("create --state-dir: %w", err)
		}
		// Two instances on one etcd data directory or Temporal database would corrupt both.
		lock, err := lockDevDir(stateDir)
		if err != nil {
			return err
		}
		defer lock.release()
	}
	if err := checkPortsFree([]fixedPort{
		{"Temporal frontend", "127.0.0.1:" + *port, "temporal-port"},
		{"Temporal Web UI", "127.0.0.1:" + *uiPort, "ui-port"},
		{"codec server", *codecAddr, "codec-addr"},
	}); err != nil {
		return err
	}
	metrics, err := serveDevMetrics([]fixedPort{
		{"operator metrics", *operatorMetrics, "operator-metrics-addr"},
		{"drift webhook metrics", *webhookMetrics, "webhook-metrics-addr"},
		{"worker metrics", *workerMetrics, "worker-metrics-addr"},
	})
	if err != nil {
		return err
	}
	defer metrics.stop()
	logFile, err := os.Create(filepath.Join(devDir, "dev.log"))
	if err != nil {
		return fmt.Errorf("create log file: %w", err)
	}
	defer logFile.Close()
	// Every part writes JSON lines to the one log: the operator, worker and
	// webhook through zap, the rest through slog, and net/http's refused TLS
	// clients (the webhooks' own readiness dials) through the standard
	// logger, which slog.SetDefault routes to slog's handler.
	ctrl.SetLogger(zap.New(zap.WriteTo(logFile)))
	devLog := slog.New(slog.NewJSONHandler(logFile, nil)).With("logger", "remedy-dev")
	slog.SetDefault(devLog)
	opts.ControllerManager = true
	opts.TemporalHostPort = "127.0.0.1:" + *port
	opts.TemporalUIPort = *uiPort
	codecURL := "http://" + *codecAddr
	opts.TemporalUICodecEndpoint = codecURL
	opts.Log = logFile
	opts.DieWithParent = true
	opts.StateDir = stateDir
	opts.TemporalMetrics = remedymetrics.NewTemporalHandler(ctrlmetrics.Registry)
	parts := "etcd, kube-apiserver, kube-controller-manager and the Temporal dev server"
	if *runNode {
		node, err := devenv.NodeOptionsFromEnv(root)
		if err != nil {
			return err
		}
		for _, img := range strings.Split(*nodeImages, ",") {
			if !filepath.IsAbs(img) {
				img = filepath.Join(root, img)
			}
			node.Images = append(node.Images, img)
		}
		node.SandboxImage = image.PauseReference()
		opts.Node = &node
		parts += ", and a node (containerd, kube-scheduler, kubelet)"
	}

	step := func(msg string) func() {
		start := time.Now()
		fmt.Printf("remedy dev: %s ...\n", msg)
		return func() { fmt.Printf("remedy dev: %s done (%.1fs)\n", msg, time.Since(start).Seconds()) }
	}
	done := step("starting " + parts)
	env, err := devenv.Start(ctx, opts)
	if err != nil {
		return err
	}
	done()
	kubeconfig := filepath.Join(devDir, "kubeconfig")
	envFile := filepath.Join(devDir, "env")
	defer func() {
		_ = os.Remove(kubeconfig)
		_ = os.Remove(envFile)
		_ = os.Remove(filepath.Join(devDir, alertsTokenFile))
		_ = os.Remove(filepath.Join(devDir, alertmanagerHTTPConfig))
		start := time.Now()
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "remedy dev: stop:", err)
			return
		}
		took := time.Since(start).Seconds()
		fmt.Printf("remedy dev: stopped the API server, Temporal and the rest of the platform in %.1fs\n", took)
		devLog.Info("stopped the API server, Temporal and the rest of the platform", "seconds", took)
	}()

	done = step("installing CRDs, RBAC, the example roles of deploy/rbac/*-example.yaml and per-action ServiceAccounts into namespace " + devenv.Namespace)
	if err := env.InstallRemedy(ctx, root); err != nil {
		return err
	}
	done()

	// The drift webhook comes before the demo workloads, so they get traces.
	done = step("starting the drift webhook (mode " + string(mode) + ") and installing its configuration")
	webhookStopped, err := compose.RunDriftWebhook(ctx, env, compose.DriftWebhookOptions{
		Manifest: filepath.Join(root, "deploy", "webhook", "drift.yaml"), DefaultMode: mode,
	})
	if err != nil {
		return err
	}
	done()

	if env.Resumed {
		// Applying them again would undo what the last session changed, such as a scale.
		fmt.Printf("remedy dev: resuming from %s: the default policy and demo workloads stay as the last session left them\n", stateDir)
	} else {
		done = step("installing the default policy and the demo workloads")
		if err := devenv.Install(ctx, env.Config, filepath.Join(root, "deploy", "policies"), filepath.Join(root, "deploy", "samples", "demo")); err != nil {
			return err
		}
		done()
	}
	binDir := filepath.Join(devDir, "bin")
	kubectl := filepath.Join(opts.Assets, "kubectl")
	webUI := "http://127.0.0.1:" + *uiPort
	done = step("starting Alertmanager on " + *amAddr + ", routed to the worker's receiver on " + *alertsAddr)
	am, receiver, err := startDevAlerts(ctx, env, root, devDir, *amAddr, *alertsAddr, logFile)
	if err != nil {
		return err
	}
	defer func() { _ = am.Stop() }()
	done()
	person, err := writeAccess(env, kubeconfig, envFile, devenv.ShellEnv{
		Kubeconfig: kubeconfig, TemporalAddress: env.TemporalAddress, WebUI: webUI, BinDir: binDir, AlertmanagerURL: am.URL,
		AlertmanagerHTTPConfig: am.HTTPConfig,
		CodecEndpoint:          codecURL,
	})
	if err != nil {
		return err
	}
	pluginPath, unlink, err := linkKubectlPlugin(binDir)
	if err != nil {
		return err
	}
	defer unlink()
	amBin, err := devenv.AlertmanagerBinary(root)
	if err != nil {
		return err
	}
	unlinkTools, err := linkTools(binDir, map[string]string{"kubectl": kubectl, "temporal": opts.TemporalCLI, "amtool": filepath.Join(filepath.Dir(amBin), "amtool")})
	if err != nil {
		return err
	}
	defer unlinkTools()

	done = step("starting the operator and the worker")
	stopped, err := compose.RunRemedy(ctx, env, compose.RemedyOptions{WorkerStopTimeout: *workerStop,
		DriftCallbackURLs: *callbacks, DriftApproval: *driftApproval, AlertmanagerURL: am.URL,
		AlertmanagerHTTPConfigFile: am.HTTPConfig,
		Codec:                      &compose.CodecOptions{Addr: *codecAddr, AllowedOrigins: []string{webUI, "http://localhost:" + *uiPort}}})
	if err != nil {
		return err
	}
	done()
	if !env.Resumed {
		// The operator's admission webhook stamps the rule's author: it must be
		// serving. The author is the person at the keyboard, as if they had
		// applied it, so their own `kubectl apply` of it changes nothing.
		done = step("installing the sample RemediationRule demo/demo-latency")
		if err := installWhenAdmitted(ctx, person, filepath.Join(root, "deploy", "samples", "rrule-demo-latency.yaml")); err != nil {
			return err
		}
		done()
	}

	fmt.Printf(`
  version:         %s
  kubeconfig:      %s
  Temporal:        %s
  Temporal Web UI: %s/namespaces/default/workflows
  codec server:    %s (sign in at /login with: kubectl create token approver -n demo)
  logs:            %s
  metrics:         %s
  kubectl, temporal, kubectl-remedy, amtool: %s (the pinned ones, linked)
  environment:     source %s   (KUBECONFIG, TEMPORAL_ADDRESS, REMEDY_WEB_UI, ALERTMANAGER_URL, ALERTMANAGER_HTTP_CONFIG, and PATH with %s first)

  Try it:
    source %s
    kubectl apply -f %s
    kubectl get kexec -n demo -w

  Drift (docs/drift.md): scale demo/drift-demo's ReplicaSet by hand, watch the
  Deployment controller's revert be judged, and find RemedyKind='Drift' in the Web UI.

  Alerts (docs/alerts.md): Alertmanager UI %s (user remedy, password in $ALERTMANAGER_HTTP_CONFIG), receiver %s;
    amtool --alertmanager.url "$ALERTMANAGER_URL" --http.config.file "$ALERTMANAGER_HTTP_CONFIG" alert add DemoHighLatency namespace=demo deployment=web
    kubectl get rr -n demo -l remedy.dev/rule=demo-latency -w

`, remedyrelease.String(), kubeconfig, env.TemporalAddress, webUI, codecURL, logFile.Name(), metrics.banner(), filepath.Dir(pluginPath),
		envFile, binDir, envFile, filepath.Join(root, "deploy", "samples", "kexec-scale.yaml"), am.URL, receiver)
	fmt.Println("remedy dev: ready")

	select {
	case <-ctx.Done():
		fmt.Println("remedy dev: stopping")
		start := time.Now()
		<-stopped
		<-webhookStopped
		// Both: the terminal is where the person who pressed Ctrl-C looks.
		took := time.Since(start).Seconds()
		fmt.Printf("remedy dev: stopped the operator, the worker and the drift webhook in %.1fs\n", took)
		devLog.Info("stopped the operator, the worker and the drift webhook", "seconds", took)
		return nil
	case err := <-stopped:
		if err == nil {
			err = errors.New("operator and worker stopped unexpectedly")
		}
		return err
	case err := <-webhookStopped:
		if err == nil {
			err = errors.New("drift webhook stopped unexpectedly")
		}
		return err
	}
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

const devUsage = `Usage: remedy dev [flags]

Runs the whole platform on this machine: etcd, kube-apiserver,
kube-controller-manager, the Temporal dev server with its Web UI, the drift
webhook, the operator and the worker; with --node also a real node
(containerd, kube-scheduler, the kubelet, the images of --node-images
imported, no registry ever contacted), so that Pods run. It writes <dev-dir>/kubeconfig,
<dev-dir>/env (source it: KUBECONFIG, TEMPORAL_ADDRESS, REMEDY_WEB_UI,
TEMPORAL_CODEC_ENDPOINT, and PATH with <dev-dir>/bin first) and links the
pinned kubectl and temporal and kubectl-remedy into <dev-dir>/bin.

Temporal payloads are sealed; the operator serves the codec server on
--codec-addr, and the Web UI is pointed at it. Approve through Temporal as a
Kubernetes identity (the ServiceAccount demo/approver may decide in demo):

  export TEMPORAL_CODEC_AUTH="Bearer $(kubectl create token approver -n demo)"
  temporal workflow update execute --workflow-id <id> --name decide --input '{"approved":true}'

In the Web UI, sign in at <codec>/login with such a token, then set the UI's
codec server (browser setting) to <codec> with "Include cross-origin
credentials" on (docs/approvals.md, "Deciding through Temporal").

The pinned binaries: the directory $KUBEBUILDER_ASSETS (etcd, kube-apiserver,
kube-controller-manager, kubectl) and the file $TEMPORAL_CLI; where either is
unset, the tools cache ($REMEDY_TOOLS_CACHE, default ~/.cache/remedy/tools) at
the versions of <repo>/hack/tools/versions.env: kubernetes-<KUBERNETES_VERSION>-<KUBERNETES_BUILD>/
and temporal-<TEMPORAL_CLI_VERSION>/temporal. ` + "`make tools`" + ` (or
hack/tools/install.sh kubernetes temporal) builds them there; ` + "`make dev`" + `
does both and passes DEV_FLAGS on.

Flags:
`
