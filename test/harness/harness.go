// Package harness shares one set of real parts per test package: etcd and
// kube-apiserver (optionally kube-controller-manager), a Temporal dev server,
// Remedy's RBAC installed, and the operator and worker running in-process as
// their own ServiceAccounts. Call Main from TestMain.
package harness

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/remedy-dev/remedy/internal/devcompose"
	"github.com/remedy-dev/remedy/internal/devenv"
	"github.com/remedy-dev/remedy/internal/image"
	"github.com/remedy-dev/remedy/internal/seal"
	"github.com/remedy-dev/remedy/operator"
)

// Options say which parts a package needs.
type Options struct {
	// ControllerManager runs kube-controller-manager's built-in controllers.
	ControllerManager bool
	// ExtraControllers are more kube-controller-manager controllers
	// (ttl-after-finished-controller collects finished Jobs).
	ExtraControllers []string
	// Remedy runs the operator and the worker.
	Remedy bool
	// Drift, when set, runs the drift webhook and installs its configuration
	// (Manifest defaults to deploy/webhook/drift.yaml).
	Drift *devcompose.DriftWebhookOptions
	// DriftCallbackURLs are the worker's --drift-callback-url: every drift is reported to them.
	DriftCallbackURLs []string
	// AuditLog makes kube-apiserver write its audit log (AuditLogPath).
	AuditLog bool
	// CRDs are test fixture CRDs to install, relative to the repository root.
	CRDs []string
	// Manifests are directories applied after the drift webhook and before
	// the operator and worker, as `remedy dev` applies the demo workloads.
	Manifests []string
	// WorkflowCheckInterval shortens how long a quiet run waits before the
	// operator checks that its workflow exists (0: the operator's default).
	WorkflowCheckInterval time.Duration
	// Alerts runs a real Alertmanager routed to Remedy's receiver.
	Alerts *AlertsOptions
	// Monitoring runs real kube-state-metrics and Prometheus, sending to
	// Alerts' Alertmanager (StartMonitoring).
	Monitoring *MonitoringOptions
	// Node runs a real node (containerd, kube-scheduler, the kubelet) with
	// Remedy's image and the pause image built from this tree and imported,
	// so Pods run. It implies ControllerManager. One node runs per machine:
	// packages with one take turns (devenv's node lock).
	Node bool
	// LogPath receives the parts' logs; empty picks a file in the temp dir,
	// removed when every test passed.
	LogPath string
}

// A test binary starts etcd, kube-apiserver and temporal through links to
// itself (devenv.Options.DieWithParent), so that a killed `go test` (a CI
// timeout, a Ctrl-C) leaves none of them behind. Package init runs before the
// importing test package's own state and TestMain.
func init() { devenv.ExecIfWrapped() }

var (
	env        *devenv.Env
	remedyOpts devcompose.RemedyOptions
	kube       ctrlclient.Client
	logPath    string
	// Root is the repository root.
	Root = repoRoot()
)

// Main starts the parts, runs the package's tests and stops everything.
// A missing part fails the package; it is never skipped.
func Main(m *testing.M, o Options) int {
	logPath = o.LogPath
	if logPath == "" {
		logPath = filepath.Join(os.TempDir(), fmt.Sprintf("remedy-test-%d.log", os.Getpid()))
	}
	logFile, err := os.Create(logPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, "harness:", err)
		return 1
	}
	defer logFile.Close()
	ctrl.SetLogger(zap.New(zap.WriteTo(logFile), zap.UseDevMode(true)))
	// net/http logs refused TLS clients through the standard logger.
	log.SetOutput(logFile)

	opts, removeDirs, err := envOptions(o, logFile)
	defer removeDirs()
	if err != nil {
		fmt.Fprintln(os.Stderr, "harness:", err)
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	start := time.Now()
	env, err = devenv.Start(ctx, opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "harness: start:", err, "(logs:", logPath+")")
		return 1
	}
	defer func() { _ = env.Stop() }()
	stopAlerts, err := install(ctx, &o, logFile)
	defer stopAlerts()
	if err != nil {
		fmt.Fprintln(os.Stderr, "harness:", err)
		return 1
	}
	var stopped <-chan error
	if o.Remedy {
		if stopped, err = devcompose.RunRemedy(ctx, env, remedyOpts); err != nil {
			fmt.Fprintln(os.Stderr, "harness: run remedy:", err)
			return 1
		}
	}
	fmt.Fprintf(os.Stderr, "harness: real parts up in %.1fs (logs: %s)\n", time.Since(start).Seconds(), logPath)

	code := m.Run()
	cancel()
	if stopped != nil {
		if err := <-stopped; err != nil {
			fmt.Fprintln(os.Stderr, "harness: operator/worker:", err)
		}
	}
	if code == 0 && o.LogPath == "" {
		_ = os.Remove(logPath)
	}
	return code
}

// envOptions are the parts o asks for, with a node's images and the API
// server's token file in temporary directories that removeDirs removes.
func envOptions(o Options, logFile *os.File) (opts devenv.Options, removeDirs func(), err error) {
	var dirs []string
	removeDirs = func() {
		for _, d := range dirs {
			_ = os.RemoveAll(d)
		}
	}
	if opts, err = devenv.OptionsFromEnv(Root); err != nil {
		return opts, removeDirs, err
	}
	opts.ControllerManager = o.ControllerManager || o.Node || len(o.ExtraControllers) > 0
	opts.ExtraControllers = o.ExtraControllers
	if o.Node {
		imageDir, err := os.MkdirTemp("", "remedy-images-")
		if err != nil {
			return opts, removeDirs, fmt.Errorf("node: %w", err)
		}
		// containerd has imported them once Start returns.
		dirs = append(dirs, imageDir)
		if opts.Node, err = image.NodeOptions(context.Background(), Root, runtime.GOARCH, imageDir); err != nil {
			return opts, removeDirs, fmt.Errorf("node: %w", err)
		}
	}
	opts.AuditLog = o.AuditLog
	tokenDir, err := os.MkdirTemp("", "remedy-tokens-")
	if err != nil {
		return opts, removeDirs, fmt.Errorf("tokens: %w", err)
	}
	dirs = append(dirs, tokenDir)
	tokenFile, err := writeTokenFile(tokenDir)
	if err != nil {
		return opts, removeDirs, fmt.Errorf("tokens: %w", err)
	}
	if opts.APIServerFlags == nil {
		opts.APIServerFlags = map[string]string{}
	}
	opts.APIServerFlags["token-auth-file"] = tokenFile
	for _, c := range o.CRDs {
		opts.ExtraCRDs = append(opts.ExtraCRDs, filepath.Join(Root, c))
	}
	opts.Log = logFile
	opts.DieWithParent = true
	return opts, removeDirs, nil
}

// install puts Remedy's CRDs and RBAC, the shipped safety policy, the drift
// webhook, o's manifests, Alertmanager and monitoring in place, and sets kube
// and remedyOpts. stopAlerts stops monitoring and Alertmanager, if started.
func install(ctx context.Context, o *Options, logFile *os.File) (stopAlerts func(), err error) {
	stopAlerts = func() {}
	remedyOpts = devcompose.RemedyOptions{WorkflowCheckInterval: o.WorkflowCheckInterval, DriftCallbackURLs: o.DriftCallbackURLs,
		WrapTransport: func(rt http.RoundTripper) http.RoundTripper { return countRequests{rt} }}
	if err := env.InstallRemedy(ctx, Root); err != nil {
		return stopAlerts, fmt.Errorf("install: %w", err)
	}
	// The shipped safety policy, as a user installs it: without one nothing runs (PolicyMissing).
	if err := devenv.Install(ctx, env.Config, filepath.Join(Root, "deploy", "policies")); err != nil {
		return stopAlerts, fmt.Errorf("install policies: %w", err)
	}
	if kube, err = ctrlclient.New(env.Config, ctrlclient.Options{Scheme: operator.Scheme()}); err != nil {
		return stopAlerts, fmt.Errorf("client: %w", err)
	}
	// The drift webhook comes before the manifests, so their workloads get traces.
	if o.Drift != nil {
		if o.Drift.Manifest == "" {
			o.Drift.Manifest = filepath.Join(Root, "deploy", "webhook", "drift.yaml")
		}
		if _, err := devcompose.RunDriftWebhook(ctx, env, *o.Drift); err != nil {
			return stopAlerts, fmt.Errorf("drift webhook: %w", err)
		}
	}
	if err := devenv.Install(ctx, env.Config, o.Manifests...); err != nil {
		return stopAlerts, fmt.Errorf("install manifests: %w", err)
	}
	if o.Alerts != nil {
		url, amAuth, err := startAlerts(ctx, *o.Alerts, logFile)
		if err != nil {
			return stopAlerts, fmt.Errorf("alerts: %w", err)
		}
		stopAlerts = func() { _ = alertmanager.Stop() }
		remedyOpts.AlertmanagerURL, remedyOpts.AlertmanagerHTTPConfigFile = url, amAuth
		remedyOpts.AlertmanagerRestartGrace = SweepGrace
	}
	if o.Monitoring != nil {
		if monitoring, err = StartMonitoring(ctx, env, *o.Monitoring, alertmanager, logFile); err != nil {
			return stopAlerts, fmt.Errorf("monitoring: %w", err)
		}
		// Prometheus goes first: it sends to Alertmanager until it stops.
		stopAM := stopAlerts
		stopAlerts = func() { _ = monitoring.Stop(); stopAM() }
	}
	return stopAlerts, nil
}

// Kube is a cluster-admin client for setup and assertions.
func Kube() ctrlclient.Client { return kube }

// Config is the cluster-admin rest config.
func Config() *rest.Config { return env.Config }

// Temporal is a client of the dev server.
func Temporal() client.Client { return env.Temporal }

// Keys are the payload keys the parts and Temporal() seal with (devenv.Env.Keys).
func Keys() *seal.Keyring { return env.Keys }

// RemedyOptions are the options the package's Remedy runs with, for a test
// that starts its own operator with a change.
func RemedyOptions() devcompose.RemedyOptions { return remedyOpts }

// AuditLogPath is kube-apiserver's JSON audit log (Options.AuditLog).
func AuditLogPath() string { return env.AuditLogPath }

// LogPath is the file that receives the parts' logs.
func LogPath() string { return logPath }

// TemporalAddress is the dev server's host:port, for the temporal CLI.
func TemporalAddress() string { return env.TemporalAddress }

func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// Use makes the helpers of this package (Namespace, Deployment, Eventually,
// WaitClosed, ReplayHistory, ...) work against parts another package started,
// as test/faults does with test/procs, instead of calling Main.
func Use(e *devenv.Env) error {
	c, err := ctrlclient.New(e.Config, ctrlclient.Options{Scheme: operator.Scheme()})
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}
	env, kube = e, c
	return nil
}

// RotateKeys rotates the payload keys for the rest of the test, as an
// operator rotates Secret remedy-payload-keys: a fresh key named id becomes
// the active one, the others stay, and Temporal() is a new client sealing
// with it. Parts started afterwards use them; the test's end restores both.
func RotateKeys(t *testing.T, id string) {
	t.Helper()
	dir := t.TempDir()
	entries, err := os.ReadDir(env.PayloadKeys)
	require.NoError(t, err)
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(env.PayloadKeys, e.Name()))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, e.Name()), b, 0o600))
	}
	require.NoError(t, devenv.AddPayloadKey(dir, id))
	keys, err := seal.LoadKeyring(dir)
	require.NoError(t, err)
	dc := seal.DataConverter(keys)
	c, err := client.Dial(client.Options{HostPort: env.TemporalAddress, Namespace: "default", DataConverter: dc, FailureConverter: seal.FailureConverter(dc)})
	require.NoError(t, err)
	old := *env
	env.Temporal, env.Keys, env.PayloadKeys = c, keys, dir
	t.Cleanup(func() {
		env.Temporal, env.Keys, env.PayloadKeys = old.Temporal, old.Keys, old.PayloadKeys
		c.Close()
	})
}
