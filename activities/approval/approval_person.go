package approval

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"go.temporal.io/sdk/activity"
	authorizationv1 "k8s.io/api/authorization/v1"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/activities/fail"
	"github.com/remedy-dev/remedy/activities/gate"
	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/seal"
)

// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// ApproveVerb is the verb a person needs on remediationapprovalrequests to
// decide one, whichever channel carries the decision (the approval webhook
// asks the same for kubectl).
const ApproveVerb = "approve"

// ApproverInput is a person's decision, as the codec server sealed it with
// their Kubernetes identity, and the request it decides.
type ApproverInput struct {
	Namespace string      `json:"namespace"`
	Name      string      `json:"name"`
	Person    seal.Person `json:"person"`
}

// AuthorizeApprover asks the API server whether the person who sent a
// decision through Temporal (the codec server's TokenReview vouches for the
// identity) may decide the request: the verb approve on it, asked with their
// user, UID, groups and extra, as the approval webhook asks for kubectl. It
// returns "" when they may, else why not; an anonymous person never may.
// Only the run the request names asks (approvalRun): the answer is about a
// person's grants, read with the worker's power to ask.
func (a *Approvals) AuthorizeApprover(ctx context.Context, in ApproverInput) (string, error) {
	var rar v1alpha1.RemediationApprovalRequest
	if err := a.Client.Get(ctx, ctrlclient.ObjectKey{Namespace: in.Namespace, Name: in.Name}, &rar); err != nil {
		return "", fail.Classify(v1alpha1.ReasonInvalidParameters, fmt.Errorf("read approval request %s/%s: %w", in.Namespace, in.Name, err))
	}
	if err := gate.ApprovalRun(ctx, &gate.Subjects{Client: a.Client}, a.Runs, rar.Namespace, rar.Spec.SubjectRef, rar.Spec.WorkflowID); err != nil {
		return "", err
	}
	p := in.Person
	if strings.TrimSpace(p.Username) == "" || p.Username == "system:anonymous" || slices.Contains(p.Groups, "system:unauthenticated") {
		return fmt.Sprintf("an anonymous user (%q) may not decide RemediationApprovalRequest %s/%s", p.Username, in.Namespace, in.Name), nil
	}
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: p.Username, UID: p.UID, Groups: p.Groups, Extra: extraOf(p.Extra),
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: in.Namespace, Verb: ApproveVerb, Group: v1alpha1.GroupVersion.Group, Resource: "remediationapprovalrequests", Name: in.Name,
		},
	}}
	if err := a.Client.Create(ctx, sar); err != nil {
		return "", fail.Classify(v1alpha1.ReasonInvalidParameters, fmt.Errorf("create SubjectAccessReview for %s: %w", p.Username, err))
	}
	if !sar.Status.Allowed {
		why := fmt.Sprintf("user %q may not decide RemediationApprovalRequest %s/%s: it needs the verb %q on remediationapprovalrequests.remedy.dev in namespace %s (see deploy/rbac/approver-example.yaml)",
			p.Username, in.Namespace, in.Name, ApproveVerb, in.Namespace)
		activity.GetLogger(ctx).Info("approval refused", "user", p.Username, "approvalRequest", in.Namespace+"/"+in.Name, "reason", why)
		return why, nil
	}
	return "", nil
}

func extraOf(extra map[string][]string) map[string]authorizationv1.ExtraValue {
	if len(extra) == 0 {
		return nil
	}
	out := make(map[string]authorizationv1.ExtraValue, len(extra))
	for k, v := range extra {
		out[k] = authorizationv1.ExtraValue(v)
	}
	return out
}
