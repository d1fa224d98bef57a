// Package devenv starts Remedy's real parts on one machine: etcd and
// kube-apiserver through envtest, optionally kube-controller-manager, and a
// Temporal dev server. Tests and `remedy-dev` share it.
package devenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/testsuite"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/remedy-dev/remedy/internal/seal"
)

// Options say what to start and where the pinned binaries are.
type Options struct {
	// Assets is the directory with etcd, kube-apiserver, kube-controller-manager
	// and kubectl (KUBEBUILDER_ASSETS, written by `make tools`).
	Assets string
	// TemporalCLI is the path of the temporal binary.
	TemporalCLI string
	// CRDDir holds the generated CRDs to install.
	CRDDir string
	// OperatorWebhooks are the operator's webhook configurations (approval
	// decisions, requester stamping); envtest points them at the operator's
	// local TLS port with generated certificates. The drift webhook is
	// installed by RunDriftWebhook with its own certificate.
	OperatorWebhooks []string
	// ControllerManager also runs kube-controller-manager with real built-in controllers.
	ControllerManager bool
	// ExtraControllers are more kube-controller-manager controllers to run
	// (e.g. ttl-after-finished-controller).
	ExtraControllers []string
	// AuditLog makes kube-apiserver write an audit log (Env.AuditLogPath).
	AuditLog bool
	// ExtraCRDs are more CRD files or directories to install (test fixtures).
	ExtraCRDs []string
	// TemporalHostPort binds the Temporal frontend; empty picks a free port.
	TemporalHostPort string
	// TemporalUIPort enables the Web UI on that port; empty runs headless.
	TemporalUIPort string
	// TemporalUICodecEndpoint is the codec server the Web UI reads payloads
	// through (the operator's --codec-addr); empty: none.
	TemporalUICodecEndpoint string
	// Log receives the child processes' output; nil discards it.
	Log io.Writer
	// DieWithParent ties etcd, kube-apiserver, kube-controller-manager and
	// temporal to this process's life on Linux: they get SIGKILL when it
	// dies, even by SIGKILL. main must call ExecIfWrapped first.
	DieWithParent bool
	// TemporalMetrics receives the Temporal client's SDK metrics; nil drops them.
	TemporalMetrics client.MetricsHandler
	// APIServerFlags are more kube-apiserver flags (name without dashes).
	APIServerFlags map[string]string
	// StateDir, when set, keeps etcd's data, kube-apiserver's certificates
	// and signing keys, and Temporal's database across Stop, so the next
	// Start with the same StateDir resumes every object and run.
	StateDir string
	// Node, when set, also runs a real node (containerd, kube-scheduler and
	// the kubelet; Linux, root) so that Pods run. It needs ControllerManager.
	Node *NodeOptions
	// TemporalForPods makes the Temporal frontend reachable from Pods: Env's
	// TemporalAddress is then on the node's IP (a forwarder to the dev
	// server on loopback), for Remedy's own Deployments installed as
	// written. It needs Node. The node IP is on this machine: nothing leaves it.
	TemporalForPods bool
}

// Env is a running set of real parts.
type Env struct {
	Kube     *envtest.Environment
	Config   *rest.Config // cluster-admin: for setup and assertions, never for Remedy itself
	Temporal client.Client
	// TemporalAddress is host:port of the Temporal frontend.
	TemporalAddress string
	// WebhookClientCA signs the client certificate the API server presents
	// to admission webhooks (WebhookClientCert, WebhookClientKey); Remedy's
	// webhooks admit no other client.
	WebhookClientCA, WebhookClientCert, WebhookClientKey string
	// AuditLogPath is kube-apiserver's JSON audit log when Options.AuditLog is set.
	AuditLogPath string
	// Resumed says Start found the state of an earlier run in Options.StateDir.
	Resumed bool
	// PayloadKeys is the directory of Remedy's payload keys, as Secret
	// remedy-payload-keys lays them out (--payload-keys): fresh at each
	// start, kept in Options.StateDir. Keys is that keyring; Temporal
	// seals with it.
	PayloadKeys string
	Keys        *seal.Keyring

	devServer *testsuite.DevServer
	kcm       *exec.Cmd
	kcmExited chan struct{}
	node      *node
	tmpDir    string
	log       io.Writer

	// temporalForward puts the dev server on the node's IP (TemporalForPods).
	temporalForward *Forwarder
}

// Start brings everything up; on error it stops what it started.
func Start(ctx context.Context, o Options) (env *Env, err error) {
	if o.Log == nil {
		o.Log = io.Discard
	}
	env = &Env{log: o.Log}
	defer func() {
		if err != nil {
			_ = env.Stop()
			env = nil
		}
	}()
	if env.tmpDir, err = os.MkdirTemp("", "remedy-devenv-"); err != nil {
		return env, fmt.Errorf("create temp dir: %w", err)
	}
	if err := env.configureControlPlane(&o); err != nil {
		return env, err
	}
	dbDir := env.tmpDir
	if o.StateDir != "" {
		if env.Resumed, err = env.useStateDir(o.StateDir); err != nil {
			return env, err
		}
		dbDir = o.StateDir
	}
	if env.PayloadKeys, env.Keys, err = payloadKeys(dbDir); err != nil {
		return env, err
	}
	if o.TemporalForPods && o.Node == nil {
		return env, errors.New("Temporal for Pods needs a node (Options.Node)")
	}
	if o.Node != nil {
		if !o.ControllerManager {
			return env, errors.New("a node needs kube-controller-manager (Options.ControllerManager)")
		}
		// The network and containerd come first: the API server binds the node IP.
		env.node, err = prepareNode(ctx, env, *o.Node, o.Log)
		if err != nil {
			return env, fmt.Errorf("prepare the node: %w", err)
		}
	}
	if err := env.startServers(ctx, o, dbDir); err != nil {
		return env, err
	}
	if o.ControllerManager {
		if err := env.startControllerManager(o); err != nil {
			return env, err
		}
	}
	if env.node != nil {
		if err := env.node.startKubelet(ctx, env, o.Assets); err != nil {
			return env, fmt.Errorf("start the node: %w", err)
		}
	}
	return env, nil
}

// configureControlPlane sets up envtest's etcd and kube-apiserver: the CRDs,
// the webhook client certificate, the audit log, the API server's flags,
// and with DieWithParent the links that tie them to this process.
func (e *Env) configureControlPlane(o *Options) error {
	e.Kube = &envtest.Environment{
		BinaryAssetsDirectory: o.Assets,
		CRDDirectoryPaths:     append([]string{o.CRDDir}, o.ExtraCRDs...),
		ErrorIfCRDPathMissing: true,
		// A stuck kube-apiserver is killed after this.
		ControlPlaneStopTimeout: 5 * time.Second,
	}
	if err := e.configureWebhookClientCert(); err != nil {
		return err
	}
	if o.AuditLog {
		if err := e.configureAuditLog(); err != nil {
			return err
		}
	}
	// Without a watch grace period kube-apiserver waits for open watches (a
	// `kubectl get -w` in another terminal) until envtest kills it after
	// ControlPlaneStopTimeout; with one it ends them and stops in about a second.
	e.Kube.ControlPlane.GetAPIServer().Configure().Set("shutdown-watch-termination-grace-period", "200ms")
	for k, v := range o.APIServerFlags {
		e.Kube.ControlPlane.GetAPIServer().Configure().Set(k, v)
	}
	if o.DieWithParent && canWrap {
		return e.wrapBinaries(o)
	}
	return nil
}

// startServers starts Temporal and the API server in parallel (each takes a
// few seconds), then connects to both; with TemporalForPods it puts the
// Temporal frontend on the node's IP.
func (e *Env) startServers(ctx context.Context, o Options, dbDir string) error {
	type result struct {
		srv *testsuite.DevServer
		err error
	}
	temporalDone := make(chan result, 1)
	go func() {
		srv, err := startTemporal(ctx, o, dbDir, e.Keys)
		temporalDone <- result{srv, err}
	}()
	if len(o.OperatorWebhooks) > 0 {
		e.Kube.WebhookInstallOptions = envtest.WebhookInstallOptions{Paths: o.OperatorWebhooks}
	}
	cfg, kubeErr := e.Kube.Start()
	tr := <-temporalDone
	e.devServer = tr.srv
	if kubeErr != nil {
		return fmt.Errorf("start kube-apiserver and etcd: %w", kubeErr)
	}
	if tr.err != nil {
		return fmt.Errorf("start temporal dev server: %w", tr.err)
	}
	e.Config = cfg
	if o.StateDir != "" {
		if err := saveServingCA(o.StateDir, e.Kube.ControlPlane.APIServer.SecureServing.CA); err != nil {
			return err
		}
	}
	e.Temporal = tr.srv.Client()
	e.TemporalAddress = tr.srv.FrontendHostPort()
	if o.TemporalForPods {
		var err error
		if e.temporalForward, err = forward(net.JoinHostPort(NodeIP, "0"), e.TemporalAddress); err != nil {
			return fmt.Errorf("forward Temporal to the node's IP: %w", err)
		}
		e.TemporalAddress = e.temporalForward.Addr()
	}
	return nil
}

// wrapBinaries starts etcd, kube-apiserver and temporal through links that
// tie them to this process (see ExecIfWrapped).
func (e *Env) wrapBinaries(o *Options) error {
	w := wrapper{dir: filepath.Join(e.tmpDir, "bin")}
	var err error
	if o.TemporalCLI, err = w.wrap(o.TemporalCLI); err != nil {
		return err
	}
	api := e.Kube.ControlPlane.GetAPIServer()
	if api.Path, err = w.wrap(filepath.Join(o.Assets, "kube-apiserver")); err != nil {
		return err
	}
	e.Kube.ControlPlane.Etcd = &envtest.Etcd{}
	e.Kube.ControlPlane.Etcd.Path, err = w.wrap(filepath.Join(o.Assets, "etcd"))
	return err
}

// TempDir is a private directory Stop removes.
func (e *Env) TempDir() string { return e.tmpDir }

// HasNode says Pods run: Start was given Options.Node.
func (e *Env) HasNode() bool { return e.node != nil }

// Stop ends every process Start began and removes its files. It logs how
// long each part took to stop.
func (e *Env) Stop() error {
	var (
		mu   sync.Mutex
		errs []error
	)
	timed := func(part string, stop func() error) {
		start := time.Now()
		err := stop()
		mu.Lock()
		defer mu.Unlock()
		slog.New(slog.NewJSONHandler(e.log, nil)).Info("devenv: stopped", "part", part, "seconds", time.Since(start).Seconds())
		if err != nil {
			errs = append(errs, fmt.Errorf("stop %s: %w", part, err))
		}
	}
	// Before the node's teardown removes its IP.
	if e.temporalForward != nil {
		timed("the Temporal forwarder", e.temporalForward.Close)
	}
	// The kubelet goes first: it reports to the API server until it stops.
	if e.node != nil {
		timed("the node", e.node.stop)
	}
	if e.kcm != nil && e.kcm.Process != nil {
		timed("kube-controller-manager", func() error {
			stopProcess(e.kcm.Process, e.kcmExited, os.Interrupt)
			return nil
		})
	}
	// Temporal and the control plane do not depend on each other.
	var wg sync.WaitGroup
	if e.devServer != nil {
		wg.Go(func() { timed("temporal", e.devServer.Stop) })
	}
	if e.Kube != nil {
		wg.Go(func() { timed("kube-apiserver and etcd", e.Kube.Stop) })
	}
	wg.Wait()
	if e.tmpDir != "" {
		errs = append(errs, os.RemoveAll(e.tmpDir))
	}
	return errors.Join(errs...)
}

// stopProcess signals p and waits for exited, killing p after 10 seconds.
func stopProcess(p *os.Process, exited <-chan struct{}, sig os.Signal) {
	_ = p.Signal(sig)
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		_ = p.Kill()
		<-exited
	}
}
