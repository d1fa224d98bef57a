package admission

import (
	"context"
	"fmt"
	"net/http"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/remedy-dev/remedy/api/v1alpha1"
)

// ApprovalMainPath serves UPDATE of remediationapprovalrequests itself
// (deploy/webhook/approval.yaml). It is a mutating webhook because only the
// mutating phase sees the status a client sent to the main resource: the API
// server puts the stored status back before validation.
const ApprovalMainPath = "/mutate-remedy-dev-v1alpha1-remediationapprovalrequest"

// ApprovalMain refuses a status change sent to the main resource, which the
// API server would ignore while kubectl reports "patched (no change)".
type ApprovalMain struct {
	Decoder admission.Decoder
}

// Handle compares the status sent with the stored one.
func (a *ApprovalMain) Handle(_ context.Context, req admission.Request) admission.Response {
	var old, cur v1alpha1.RemediationApprovalRequest
	if err := decodeUpdate(a.Decoder, req, &old, &cur); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	if msg := MainResourceStatusChange(req.SubResource, cur.Namespace, cur.Name, old.Status, cur.Status); msg != "" {
		resp := admission.Denied(msg)
		resp.Result.Code = http.StatusUnprocessableEntity
		resp.Result.Reason = metav1.StatusReasonInvalid
		return resp
	}
	return admission.Allowed("")
}

// MainResourceStatusChange is the refusal of an update of the main resource
// that changes the status, or "" when it changes none.
func MainResourceStatusChange(subresource, namespace, name string, old, cur v1alpha1.RemediationApprovalRequestStatus) string {
	if subresource != "" || equality.Semantic.DeepEqual(old, cur) {
		return ""
	}
	return fmt.Sprintf("RemediationApprovalRequest %s/%s: the status is written only through the status subresource, so the API server would ignore this change (kubectl says \"patched (no change)\"); add --subresource=status: %s",
		namespace, name, howToDecide)
}

// decodeUpdate decodes an UPDATE's old and new objects.
func decodeUpdate(d admission.Decoder, req admission.Request, old, cur runtime.Object) error {
	if err := d.DecodeRaw(req.OldObject, old); err != nil {
		return fmt.Errorf("decode old object: %w", err)
	}
	if err := d.DecodeRaw(req.Object, cur); err != nil {
		return fmt.Errorf("decode object: %w", err)
	}
	return nil
}
