package devenv

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"golang.org/x/sync/errgroup"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/remedy-dev/remedy/operator"
	"github.com/remedy-dev/remedy/worker"
)

// InstallRemedy applies Remedy's identities, RBAC, per-action accounts and
// admission policies from the repository's deploy/ tree. It applies all of
// deploy/rbac, so also the example roles deploy/rbac/*-example.yaml, which
// are not in its kustomization: on purpose, so that `make dev` and the tests
// have remedy-oncall and remedy-approver (group sre-approvers) as the docs
// describe.
func (e *Env) InstallRemedy(ctx context.Context, repoRoot string) error {
	return Install(ctx, e.Config, filepath.Join(repoRoot, "deploy", "rbac"), filepath.Join(repoRoot, "deploy", "actions"),
		filepath.Join(repoRoot, "deploy", "admission"))
}

// RunRemedy runs the operator and the worker in-process, each as its own
// ServiceAccount, until ctx ends. It returns once both are running; done
// reports how they stopped.
func (e *Env) RunRemedy(ctx context.Context) (done <-chan error, err error) {
	mgr, err := e.NewOperator(ctx)
	if err != nil {
		return nil, err
	}
	wCfg, err := ServiceAccountConfig(ctx, e.Config, Namespace, "remedy-worker")
	if err != nil {
		return nil, err
	}
	w, err := worker.New(worker.Options{Temporal: e.Temporal, Kube: wCfg, ActionNamespace: Namespace, StopTimeout: e.WorkerStopTimeout})
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
func (e *Env) NewOperator(ctx context.Context) (ctrl.Manager, error) {
	opCfg, err := ServiceAccountConfig(ctx, e.Config, Namespace, "remedy-operator")
	if err != nil {
		return nil, err
	}
	o := operator.Options{Temporal: e.Temporal, MetricsAddr: "0", SkipNameValidation: true, WorkflowCheckInterval: e.WorkflowCheckInterval}
	if wh := e.Kube.WebhookInstallOptions; wh.LocalServingPort != 0 {
		// The operator serves the admission webhooks envtest registered.
		worker := "system:serviceaccount:" + Namespace + ":remedy-worker"
		o.Webhook = &operator.WebhookOptions{Host: wh.LocalServingHost, Port: wh.LocalServingPort, CertDir: wh.LocalServingCertDir,
			ClientAuth: e.webhookClientAuth(), TrustedRecorders: []string{worker}, WorkerUser: worker,
			OperatorUser: "system:serviceaccount:" + Namespace + ":remedy-operator"}
	}
	return operator.New(opCfg, o)
}
