package admission

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/remedy-dev/remedy/api/v1alpha1"
)

// ApprovalPath serves UPDATE of remediationapprovalrequests/status
// (deploy/webhook/approval.yaml).
const ApprovalPath = "/mutate-remedy-dev-v1alpha1-remediationapprovalrequest-status"

// Approval admits RAR status updates by DecideStatusChange.
type Approval struct {
	// Client creates SubjectAccessReviews.
	Client  ctrlclient.Client
	Decoder admission.Decoder
	// Trusted lists usernames whose decisions carry their own attribution (the worker).
	Trusted []string
	// Expirers lists usernames (the operator) that may record Expired past
	// requiredBy on a request whose workflow is gone, and no other decision.
	Expirers []string
	Now      func() time.Time
}

// NewApproval returns the handler for scheme's types.
func NewApproval(c ctrlclient.Client, scheme *runtime.Scheme, trusted []string) *Approval {
	return &Approval{Client: c, Decoder: admission.NewDecoder(scheme), Trusted: trusted, Now: time.Now}
}

// Handle decodes the old and new objects, asks the API server's authorizer
// when a decision is being set, and maps the verdict to a response.
func (a *Approval) Handle(ctx context.Context, req admission.Request) admission.Response {
	var old, cur v1alpha1.RemediationApprovalRequest
	if err := decodeUpdate(a.Decoder, req, &old, &cur); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	// The requester and the rule come from the stored request: its spec is
	// the worker's, immutable, and the API server vouches for oldObject.
	c := StatusChange{Namespace: cur.Namespace, Name: cur.Name, Old: old.Status, New: cur.Status,
		User: req.UserInfo.Username, RequiredBy: cur.Spec.RequiredBy.Time, Now: a.Now().UTC().Truncate(time.Second),
		Anonymous: Anonymous(req.UserInfo.Username, req.UserInfo.Groups),
		Requester: old.Spec.ApprovalContext.Requester, DistinctApprover: old.Spec.ApprovalContext.RequireDistinctApprover}
	for _, t := range a.Trusted {
		c.Trusted = c.Trusted || t == c.User
	}
	for _, e := range a.Expirers {
		c.Expirer = c.Expirer || e == c.User
	}
	if NeedsAuthorization(old.Status, cur.Status, c.Expirer) && !c.Anonymous {
		ok, err := a.authorized(ctx, req, cur.Namespace, cur.Name)
		if err != nil {
			return admission.Errored(http.StatusInternalServerError, err)
		}
		c.Authorized = ok
	}
	v := DecideStatusChange(c)
	if !v.Allowed {
		log.FromContext(ctx).Info("approval refused", "user", c.User, "approvalRequest", cur.Namespace+"/"+cur.Name, "code", v.Code, "reason", v.Message)
		resp := admission.Denied(v.Message)
		resp.Result.Code = v.Code
		resp.Result.Reason = metav1.StatusReason(http.StatusText(int(v.Code)))
		return resp
	}
	if v.Status == nil {
		return admission.Allowed("")
	}
	cur.Status = *v.Status
	raw, err := json.Marshal(&cur)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("encode object: %w", err))
	}
	if old.Status.RequestedDecision == nil {
		// Tentative: the API server still validates the object (schema, CEL)
		// after this webhook; the operator logs "approval decision relayed" once it is stored.
		log.FromContext(ctx).Info("approval decision passed the webhook (tentative until stored)", "decision", cur.Status.RequestedDecision.Decision, "approver", c.User, "via", v1alpha1.DecidedViaKubectl,
			"workflowID", cur.Spec.WorkflowID, "approvalRequest", cur.Namespace+"/"+cur.Name)
	}
	return admission.PatchResponseFromRaw(req.Object.Raw, raw)
}

// authorized asks whether the requester, with all its groups, may use the approve verb.
func (a *Approval) authorized(ctx context.Context, req admission.Request, namespace, name string) (bool, error) {
	u := req.UserInfo
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: u.Username, UID: u.UID, Groups: u.Groups,
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: namespace, Verb: ApproveVerb, Group: v1alpha1.GroupVersion.Group, Resource: "remediationapprovalrequests", Name: name,
		},
	}}
	if len(u.Extra) > 0 {
		sar.Spec.Extra = map[string]authorizationv1.ExtraValue{}
		for k, v := range u.Extra {
			sar.Spec.Extra[k] = authorizationv1.ExtraValue(v)
		}
	}
	if err := a.Client.Create(ctx, sar); err != nil {
		return false, fmt.Errorf("create SubjectAccessReview: %w", err)
	}
	return sar.Status.Allowed, nil
}
