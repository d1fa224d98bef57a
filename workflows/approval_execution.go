package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/remedy-dev/remedy/activities/gate"
	"github.com/remedy-dev/remedy/api/v1alpha1"
)

// approvalTimeout applies the first two levels of the hierarchy, which need
// no I/O: spec, then policy; 0 means "ask the namespace".
func approvalTimeout(spec v1alpha1.KubernetesExecutionSpec, policyTimeout string) time.Duration {
	if spec.Approval != nil {
		if d := spec.Approval.Timeout.Or(0); d > 0 {
			return d
		}
	}
	if d, err := time.ParseDuration(policyTimeout); err == nil && d > 0 {
		return d
	}
	return 0
}

// awaitApproval asks through the shared gate with the execution as subject,
// mirrors WaitingApproval and the outcome, and returns true when the run may
// execute.
func (r *executionRun) awaitApproval(ctx workflow.Context, pol gate.PolicyResult) bool {
	spec := r.in.Spec
	name := v1alpha1.ApprovalRequestName(r.in.Name)
	reason := "spec.approval.required is set"
	if pol.Validation.RequiredApproval {
		reason = "policy " + pol.Validation.PolicyName + " requires approval"
	}
	requester, distinct := requesterName(spec.Requester), distinctApprover(spec, pol)
	who := ""
	if distinct {
		who = "; an approver other than the requester " + orUnknown(requester) + " must approve"
	}
	ask := ApprovalAsk{
		Namespace: r.in.Namespace, Name: name, SubjectUID: r.in.UID, Timeout: approvalTimeout(spec, pol.ApprovalTimeout),
		TTLSecondsAfterFinished: spec.TTLSecondsAfterFinished,
		Subject:                 v1alpha1.ObjectRef{APIVersion: v1alpha1.GroupVersion.String(), Kind: "KubernetesExecution", Namespace: r.in.Namespace, Name: r.in.Name},
		Context: v1alpha1.ApprovalContext{Reason: reason, Action: spec.Action, Target: spec.Target, PolicyEvaluation: &v1alpha1.PolicyEvaluation{
			PolicyName: pol.Validation.PolicyName, Decision: policyDecision(pol.Validation), PolicyHash: pol.Validation.PolicyHash,
		}, Requester: requester, RequireDistinctApprover: distinct},
		Opened: func(ctx workflow.Context, requiredBy time.Time) {
			r.status.ApprovalRequestRef = &v1alpha1.LocalRef{Name: name}
			r.setPhase(ctx, v1alpha1.PhaseWaitingApproval, v1alpha1.ReasonApprovalRequested,
				fmt.Sprintf("%s; approve or reject RemediationApprovalRequest %s before %s%s", reason, name, requiredBy.UTC().Format(time.RFC3339), who))
		},
	}
	if spec.RemediationRequestRef != nil {
		ask.RemediationRequest = spec.RemediationRequestRef.Name
	}
	if r.approval == nil {
		r.approval = &approvalGate{}
	}
	d, err := r.approval.awaitDecision(ctx, ask)
	if err != nil {
		r.fail(ctx, err, v1alpha1.ReasonInvalidParameters)
		return false
	}
	switch d.Decision {
	case v1alpha1.DecisionApproved:
		return true
	case v1alpha1.DecisionRejected:
		r.setPhase(ctx, v1alpha1.PhaseFailed, v1alpha1.ReasonApprovalRejected, fmt.Sprintf("rejected by %s via %s: %s", d.DecidedBy, d.Via, d.Message))
	default:
		r.setPhase(ctx, v1alpha1.PhaseFailed, v1alpha1.ReasonApprovalExpired, d.Message)
	}
	return false
}

// distinctApprover combines the two levels: the policy's
// require_distinct_approver (by default on for approvals it requires), and the
// spec, which may make it stricter, never weaker.
func distinctApprover(spec v1alpha1.KubernetesExecutionSpec, pol gate.PolicyResult) bool {
	return pol.DistinctApprover || (spec.Approval != nil && spec.Approval.RequireDistinctApprover)
}

func policyDecision(p v1alpha1.PolicyValidation) string {
	if p.RequiredApproval {
		return "require_approval"
	}
	return "allow"
}
