// Package compose builds Remedy's processes from their parts, as
// cmd/remedy runs them: the operator with its admission webhooks, the
// worker's Alertmanager receiver and the codec server. Only here (and in
// internal/devcompose, which runs them in-process against a devenv.Env) do
// the reconcilers and the admission code meet. It imports no devenv: the
// product binary links no envtest and no Temporal dev server.
package compose

import (
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/remedy-dev/remedy/operator"
	"github.com/remedy-dev/remedy/operator/admission"
)

// Operator builds the operator's manager and, when hooks is set, serves the
// approval and requester webhooks on it.
func Operator(cfg *rest.Config, o operator.Options, hooks *admission.OperatorOptions) (manager.Manager, error) {
	if hooks != nil {
		srv, err := admission.NewOperatorServer(*hooks)
		if err != nil {
			return nil, err
		}
		o.WebhookServer = srv
	}
	mgr, err := operator.New(cfg, o)
	if err != nil {
		return nil, err
	}
	if hooks != nil {
		if err := admission.RegisterOperatorWebhooks(mgr, cfg, *hooks); err != nil {
			return nil, err
		}
	}
	return mgr, nil
}
