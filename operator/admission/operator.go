package admission

import (
	"context"
	"fmt"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	ctrlwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/remedy-dev/remedy/internal/authz"
	"github.com/remedy-dev/remedy/internal/policy"
	"github.com/remedy-dev/remedy/internal/webhookauth"
)

// OperatorOptions say where the operator's admission webhooks (approval
// decisions and requester stamping) listen and whose decisions they trust.
type OperatorOptions struct {
	Host    string
	Port    int
	CertDir string
	// ClientAuth admits only the API server's client certificate.
	ClientAuth webhookauth.ClientAuth
	// TrustedRecorders are usernames (the worker's) whose recorded decisions keep their attribution.
	TrustedRecorders []string
	// WorkerUser is the worker's username, the only one that may pass a
	// RemediationRequest's requester on to the request's steps.
	WorkerUser string
	// OperatorUser is the operator's own username: the only one, besides the
	// worker, that may record Expired on a request past requiredBy whose
	// workflow is gone.
	OperatorUser string
	// PolicyNamespace holds the safety policy's ConfigMaps (the worker's
	// action namespace); their admission compiles the policy.
	PolicyNamespace string
}

// NewOperatorServer is the TLS server the operator's manager runs the webhooks on.
func NewOperatorServer(o OperatorOptions) (ctrlwebhook.Server, error) {
	tlsOpts, err := o.ClientAuth.TLSOpts(ctrl.Log.WithName("webhook"), "operator")
	if err != nil {
		return nil, err
	}
	return ctrlwebhook.NewServer(ctrlwebhook.Options{Host: o.Host, Port: o.Port, CertDir: o.CertDir, TLSOpts: tlsOpts}), nil
}

// RegisterOperatorWebhooks serves the approval and requester webhooks on
// mgr's webhook server, reading through mgr's cache and authorizing with
// SubjectAccessReviews as cfg's identity. Conditions compile in the same
// sandbox the worker's validation uses.
func RegisterOperatorWebhooks(mgr manager.Manager, cfg *rest.Config, o OperatorOptions) error {
	approval := NewApproval(mgr.GetClient(), mgr.GetScheme(), o.TrustedRecorders)
	if o.OperatorUser != "" {
		approval.Expirers = []string{o.OperatorUser}
	}
	mgr.GetWebhookServer().Register(ApprovalPath, &ctrlwebhook.Admission{Handler: approval})
	mgr.GetWebhookServer().Register(ApprovalMainPath, &ctrlwebhook.Admission{Handler: &ApprovalMain{Decoder: approval.Decoder}})
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("build clientset: %w", err)
	}
	engine := policy.NewEngine()
	review, mapper := authz.SARReview(cs.AuthorizationV1().SubjectAccessReviews()), mgr.GetRESTMapper()
	authorize := func(ctx context.Context, r authz.Request) error { return authz.Authorize(ctx, review, mapper, r) }
	// The schemas a refusal checks are built now: a bad embedded CRD stops
	// the operator here, and no refusal waits for the build.
	if _, err := schemas(); err != nil {
		return fmt.Errorf("build the CRD schemas admission checks: %w", err)
	}
	mgr.GetWebhookServer().Register(RequesterPath, &ctrlwebhook.Admission{Handler: &Requester{
		Authorize: authorize, Client: mgr.GetAPIReader(), Namespaces: mgr.GetClient(),
		CheckCondition: engine.CheckCondition, Worker: o.WorkerUser,
	}})
	mgr.GetWebhookServer().Register(PolicyPath, &ctrlwebhook.Admission{Handler: &Policy{
		Decoder: approval.Decoder, Reader: mgr.GetAPIReader(), Namespace: o.PolicyNamespace, CheckSafety: engine.CheckSafety,
	}})
	return nil
}
