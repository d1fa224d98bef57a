package operator

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/workflows"
)

// remainingStep is the granularity of status.timeRemaining: coarse, so the
// operator writes it twice a minute rather than on every reconcile.
const remainingStep = 30 * time.Second

// Reasons of the RAR's Ready condition besides the decisions.
const (
	reasonPending  = "Pending"
	reasonCanceled = "Canceled"
)

// approvalPlan is what one reconcile of a RAR does.
type approvalPlan struct {
	status       *v1alpha1.RemediationApprovalRequestStatus // nil: no write
	events       []event
	signal       string // approve or reject, relaying a kubectl decision
	payload      workflows.ApprovalSignal
	requeueAfter time.Duration
}

// planApproval decides from the RAR alone and whether its subject is gone
// (deleted or finished without a decision). It takes no client.
func planApproval(rar *v1alpha1.RemediationApprovalRequest, subjectGone bool, now time.Time) approvalPlan {
	var p approvalPlan
	next := rar.Status.DeepCopy()
	ready := meta.FindStatusCondition(rar.Status.Conditions, v1alpha1.ConditionReady)
	d := rar.Status.Decision
	switch {
	case d != "":
		next.TimeRemaining = ""
		if ready == nil || ready.Reason != string(d) {
			msg := fmt.Sprintf("%s by %s via %s", d, rar.Status.DecidedBy, rar.Status.DecidedVia)
			if rar.Status.DecisionMessage != "" {
				msg += ": " + rar.Status.DecisionMessage
			}
			setApprovalCondition(next, metav1.ConditionTrue, string(d), msg, rar.Generation, now)
			t := corev1.EventTypeNormal
			if d != v1alpha1.DecisionApproved {
				t = corev1.EventTypeWarning
			}
			p.events = append(p.events, event{t, string(d), msg})
			if rar.Status.DecidedVia == v1alpha1.DecidedViaKubectl {
				p.signal = workflows.SignalApprove
				if d == v1alpha1.DecisionRejected {
					p.signal = workflows.SignalReject
				}
				// Naming the request keeps a late relay from deciding a newer request of the same run.
				p.payload = workflows.ApprovalSignal{Approver: rar.Status.DecidedBy, Reason: rar.Status.DecisionMessage,
					Via: string(v1alpha1.DecidedViaKubectl), Request: rar.Name}
			}
		}
	case !rar.Spec.RequiredBy.After(now):
		// Past requiredBy the workflow's timer records Expired; there is nothing to add.
		return p
	case subjectGone:
		next.TimeRemaining = ""
		if ready == nil || ready.Reason != reasonCanceled {
			msg := "subject " + rar.Spec.SubjectRef.Name + " ended before a decision; nothing will be executed"
			setApprovalCondition(next, metav1.ConditionFalse, reasonCanceled, msg, rar.Generation, now)
			p.events = append(p.events, event{corev1.EventTypeNormal, reasonCanceled, msg})
		}
	default:
		if ready == nil {
			setApprovalCondition(next, metav1.ConditionUnknown, reasonPending, "waiting for a decision", rar.Generation, now)
			p.events = append(p.events, event{corev1.EventTypeNormal, "Requested", requestedNote(rar)})
		}
		remaining := rar.Spec.RequiredBy.Sub(now)
		next.TimeRemaining = ceilStep(remaining).String()
		p.requeueAfter = remainingStep
		if remaining > 0 && remaining%remainingStep != 0 {
			p.requeueAfter = remaining % remainingStep
		}
	}
	next.ObservedGeneration = rar.Generation
	if !equality.Semantic.DeepEqual(&rar.Status, next) {
		p.status = next
	}
	return p
}

// ceilStep rounds up to remainingStep, so the value only changes on step boundaries.
func ceilStep(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return (d + remainingStep - 1) / remainingStep * remainingStep
}

func setApprovalCondition(s *v1alpha1.RemediationApprovalRequestStatus, status metav1.ConditionStatus, reason, msg string, generation int64, now time.Time) {
	meta.SetStatusCondition(&s.Conditions, metav1.Condition{Type: v1alpha1.ConditionReady, Status: status, Reason: reason,
		Message: msg, ObservedGeneration: generation, LastTransitionTime: metav1.NewTime(now)})
}

// requestedNote gives approvers the three ready-to-paste ways to decide; the
// Temporal ones name the request, so they cannot decide a later one by mistake.
func requestedNote(rar *v1alpha1.RemediationApprovalRequest) string {
	id := rar.Spec.WorkflowID
	return fmt.Sprintf("%s on %s before %s. Approve: temporal workflow signal --workflow-id %s --name approve --input '{\"approver\":\"<you>\",\"reason\":\"...\",\"request\":\"%s\"}'"+
		" | or: temporal workflow update execute --workflow-id %s --name decide --input '{\"approved\":true,\"approver\":\"<you>\",\"reason\":\"...\",\"request\":\"%s\"}'"+
		" | or: kubectl patch rar %s -n %s --subresource=status --type=merge -p '{\"status\":{\"decision\":\"Approved\",\"decisionMessage\":\"...\"}}'"+
		" (reject: --name reject, \"approved\":false, or \"Rejected\")",
		rar.Spec.ApprovalContext.Action, rar.Spec.ApprovalContext.Target.String(), rar.Spec.RequiredBy.UTC().Format(time.RFC3339),
		id, rar.Name, id, rar.Name, rar.Name, rar.Namespace)
}
