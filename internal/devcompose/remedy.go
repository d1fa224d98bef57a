// Package devcompose runs Remedy's processes in-process against a
// devenv.Env, each as its own ServiceAccount: the operator with its
// admission webhooks, the worker, and the drift webhook. remedy-dev and the
// tests use it; the product binary (cmd/remedy) does not, so that it links no
// envtest and no Temporal dev server.
package devcompose

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"golang.org/x/sync/errgroup"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/remedy-dev/remedy/internal/compose"
	"github.com/remedy-dev/remedy/internal/devenv"
	"github.com/remedy-dev/remedy/internal/webhookauth"
	"github.com/remedy-dev/remedy/operator"
	"github.com/remedy-dev/remedy/operator/admission"
	"github.com/remedy-dev/remedy/worker"
)

// RemedyOptions tune the in-process operator and worker; zero values are their defaults.
type RemedyOptions struct {
	// WorkerStopTimeout is the worker's StopTimeout.
	WorkerStopTimeout time.Duration
	// WorkflowCheckInterval is the operator's WorkflowCheckInterval.
	WorkflowCheckInterval time.Duration
	// MaxOpenRunsPerNamespace is the operator's MaxOpenRunsPerNamespace (0: no cap).
	MaxOpenRunsPerNamespace int
	// DriftCallbackURLs and DriftApproval are the worker's.
	DriftCallbackURLs []string
	DriftApproval     bool
	// AlertmanagerURL is the worker's (alert runs verify against it and sweep it).
	AlertmanagerURL string
	// AlertmanagerRestartGrace is the worker's (worker.Options).
	AlertmanagerRestartGrace time.Duration
	// AlertmanagerHTTPConfigFile holds its credentials (required with AlertmanagerURL).
	AlertmanagerHTTPConfigFile string
	// Codec, when set, has the operator serve the codec server (ServeCodec).
	Codec *compose.CodecOptions
	// WrapTransport, when set, wraps the API clients of both processes
	// (the benchmarks count their requests with it).
	WrapTransport func(http.RoundTripper) http.RoundTripper
}

func (o RemedyOptions) wrap(cfg *rest.Config) *rest.Config {
	if o.WrapTransport != nil {
		cfg.Wrap(o.WrapTransport)
	}
	return cfg
}

// RunRemedy runs the operator and the worker in-process, each as its own
// ServiceAccount, until ctx ends. It returns once both are running; done
// reports how they stopped.
func RunRemedy(ctx context.Context, e *devenv.Env, o RemedyOptions) (done <-chan error, err error) {
	mgr, err := NewOperator(ctx, e, o)
	if err != nil {
		return nil, err
	}
	if o.Codec != nil {
		opCfg, err := devenv.ServiceAccountConfig(ctx, e.Config, devenv.Namespace, "remedy-operator")
		if err != nil {
			return nil, err
		}
		if _, err := compose.ServeCodec(ctx, opCfg, e.Keys, *o.Codec); err != nil {
			return nil, err
		}
	}
	wCfg, err := devenv.ServiceAccountConfig(ctx, e.Config, devenv.Namespace, "remedy-worker")
	if err != nil {
		return nil, err
	}
	gate, err := compose.ExecGate(execGateHost(e))
	if err != nil {
		return nil, err
	}
	w, err := worker.New(worker.Options{Temporal: e.Temporal, Kube: o.wrap(wCfg), ActionNamespace: devenv.Namespace, StopTimeout: o.WorkerStopTimeout,
		DriftCallbackURLs: o.DriftCallbackURLs, DriftApproval: o.DriftApproval, AlertmanagerURL: o.AlertmanagerURL, ExecGate: gate,
		AlertmanagerRestartGrace: o.AlertmanagerRestartGrace,
		PayloadKeys:              e.Keys, AlertmanagerHTTPConfigFile: o.AlertmanagerHTTPConfigFile})
	if err != nil {
		return nil, err
	}
	if err := w.Start(); err != nil {
		return nil, fmt.Errorf("start worker: %w", err)
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return mgr.Start(gctx) })
	g.Go(func() error { <-gctx.Done(); w.Stop(); return nil })
	ch := make(chan error, 1)
	go func() {
		err := g.Wait()
		if errors.Is(err, context.Canceled) {
			err = nil
		}
		ch <- err
	}()
	return ch, nil
}

// NewOperator builds the operator as remedy-operator, serving the admission
// webhooks the environment registered; the caller starts it, as often as it likes.
func NewOperator(ctx context.Context, e *devenv.Env, o RemedyOptions) (ctrl.Manager, error) {
	opCfg, err := devenv.ServiceAccountConfig(ctx, e.Config, devenv.Namespace, "remedy-operator")
	if err != nil {
		return nil, err
	}
	var hooks *admission.OperatorOptions
	if wh := e.Kube.WebhookInstallOptions; wh.LocalServingPort != 0 {
		// The operator serves the admission webhooks envtest registered.
		worker := "system:serviceaccount:" + devenv.Namespace + ":remedy-worker"
		hooks = &admission.OperatorOptions{Host: wh.LocalServingHost, Port: wh.LocalServingPort, CertDir: wh.LocalServingCertDir,
			ClientAuth: clientAuth(e), TrustedRecorders: []string{worker}, WorkerUser: worker,
			OperatorUser: "system:serviceaccount:" + devenv.Namespace + ":remedy-operator", PolicyNamespace: devenv.Namespace}
	}
	return compose.Operator(o.wrap(opCfg), operator.Options{Temporal: e.Temporal, MetricsAddr: "0", SkipNameValidation: true,
		WorkflowCheckInterval: o.WorkflowCheckInterval, MaxOpenRunsPerNamespace: o.MaxOpenRunsPerNamespace}, hooks)
}

// clientAuth admits only the API server's client certificate.
func clientAuth(e *devenv.Env) webhookauth.ClientAuth {
	return webhookauth.ClientAuth{CAFile: e.WebhookClientCA, Name: devenv.APIServerClientName}
}

// execGateHost is where the job executor's Pods reach this machine: the
// node's IP; loopback without a node, where no Pod runs.
func execGateHost(e *devenv.Env) string {
	if e.HasNode() {
		return devenv.NodeIP
	}
	return "127.0.0.1"
}
