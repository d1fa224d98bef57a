package operator

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/workflows"
)

// remainingStep is the granularity of status.timeRemaining for d left:
// coarse while much is left, so the operator writes it twice a minute rather
// than on every reconcile, and to the second in the last minute, so 7s left
// does not read 30s.
func remainingStep(d time.Duration) time.Duration {
	switch {
	case d > 10*time.Minute:
		return 30 * time.Second
	case d > time.Minute:
		return 10 * time.Second
	}
	return time.Second
}

// Reasons of the RAR's Ready condition besides the decisions.
const (
	reasonPending  = "Pending"
	reasonCanceled = "Canceled"
	// reasonRelayed: a kubectl decision was signalled to the workflow, which records it if it is the first.
	reasonRelayed = "Relayed"
	// reasonWorkflowMismatch: spec.workflowID is not the workflow of the request's namespace and subject.
	reasonWorkflowMismatch = "WorkflowMismatch"
)

// reasonDecisionIgnored is the Event reason of a kubectl decision that had no effect.
const reasonDecisionIgnored = "DecisionIgnored"

// approvalSubject is what the relay observed of a request's subject.
type approvalSubject struct {
	// gone: a KubernetesExecution subject is deleted, being deleted or finished.
	gone bool
	// uid of a KubernetesExecution subject that exists; empty for other kinds.
	uid string
}

// approvalPlan is what one reconcile of a RAR does.
type approvalPlan struct {
	status       *v1alpha1.RemediationApprovalRequestStatus // nil: no write
	events       []event
	signal       string // approve or reject, relaying a requested kubectl decision
	payload      workflows.ApprovalSignal
	requeueAfter time.Duration
}

// OperatorName is the attribution (decidedBy) of a request the operator
// expired because its workflow is gone.
const OperatorName = "remedy-operator"

// expiryCheckDue says whether the workflow of a request must be looked at:
// the request is past requiredBy without a decision, and names a workflow of
// its own namespace and subject. The workflow's timer records Expired itself;
// only a workflow that is gone leaves the request open for the operator to expire.
func expiryCheckDue(rar *v1alpha1.RemediationApprovalRequest, subject approvalSubject, now time.Time) bool {
	return rar.Status.Decision == "" && !rar.Spec.RequiredBy.After(now) && workflowMismatch(rar, subject.uid) == ""
}

// planApproval decides from the RAR, what was observed of its subject and,
// past requiredBy, what a look at its workflow found (run). It takes no client.
func planApproval(rar *v1alpha1.RemediationApprovalRequest, subject approvalSubject, run runLook, now time.Time) approvalPlan {
	var p approvalPlan
	next := rar.Status.DeepCopy()
	ready := meta.FindStatusCondition(rar.Status.Conditions, v1alpha1.ConditionReady)
	d, req := rar.Status.Decision, rar.Status.RequestedDecision
	mismatch := workflowMismatch(rar, subject.uid)
	next.Target = rar.Spec.ApprovalContext.Target.KindName()
	switch {
	case d != "":
		next.TimeRemaining = ""
		p.events = decided(next, ready, rar.Generation, now)
	case !rar.Spec.RequiredBy.After(now) && mismatch == "" && run.gone():
		// Nothing will record the timer's Expired: the operator does, in its own name.
		what := "does not exist in Temporal"
		if run.state != runMissing {
			what = "closed " + run.how
		}
		next.Decision, next.DecidedBy, next.DecidedVia, next.DecidedAt = v1alpha1.DecisionExpired, OperatorName, v1alpha1.DecidedViaTimer, &metav1.Time{Time: now}
		next.DecisionMessage = fmt.Sprintf("expired by %s: workflow %s %s, so its timer cannot record the expiry of %s",
			OperatorName, rar.Spec.WorkflowID, what, rar.Spec.RequiredBy.UTC().Format(time.RFC3339))
		next.TimeRemaining = ""
		p.events = decided(next, ready, rar.Generation, now)
	case req != nil && !subject.gone && mismatch == "" && (ready == nil || ready.Reason != reasonRelayed):
		// Relayed even past requiredBy: the webhook accepted it before, and the
		// workflow, not the relay, knows whether its timer came first.
		p.signal = workflows.SignalApprove
		if req.Decision == v1alpha1.DecisionRejected {
			p.signal = workflows.SignalReject
		}
		// Naming the request and its namespace keeps a late relay from deciding a
		// newer request of the same run, or a request elsewhere from deciding this one.
		p.payload = workflows.ApprovalSignal{Approver: req.RequestedBy, Reason: req.Message, Via: string(v1alpha1.DecidedViaKubectl),
			Request: rar.Name, Namespace: rar.Namespace}
		setApprovalCondition(next, metav1.ConditionUnknown, reasonRelayed, fmt.Sprintf(
			"%s by %s via kubectl relayed to the workflow, which records it unless another decision reached it first", req.Decision, req.RequestedBy),
			rar.Generation, now)
	case !rar.Spec.RequiredBy.After(now):
		// Past requiredBy the workflow's timer records Expired; its workflow,
		// still running when looked at, is looked at again after run.recheck.
		return approvalPlan{requeueAfter: run.recheck}
	case subject.gone:
		next.TimeRemaining = ""
		if ready == nil || ready.Reason != reasonCanceled {
			msg := "subject " + rar.Spec.SubjectRef.Name + " ended before a decision; nothing will be executed"
			setApprovalCondition(next, metav1.ConditionFalse, reasonCanceled, msg, rar.Generation, now)
			p.events = append(p.events, event{corev1.EventTypeNormal, reasonCanceled, msg})
		}
		if mismatch == "" {
			// Its workflow is looked at once the request expires.
			p.requeueAfter = rar.Spec.RequiredBy.Sub(now)
		}
	case mismatch != "":
		next.TimeRemaining = ""
		if ready == nil || ready.Reason != reasonWorkflowMismatch {
			setApprovalCondition(next, metav1.ConditionFalse, reasonWorkflowMismatch, mismatch, rar.Generation, now)
			p.events = append(p.events, event{corev1.EventTypeWarning, reasonWorkflowMismatch, mismatch})
		}
	default:
		if ready == nil {
			setApprovalCondition(next, metav1.ConditionUnknown, reasonPending, "waiting for a decision", rar.Generation, now)
			p.events = append(p.events, event{corev1.EventTypeNormal, "Requested", requestedNote(rar)})
		}
		remaining := rar.Spec.RequiredBy.Sub(now)
		shown, changes := roundStep(remaining)
		next.TimeRemaining, p.requeueAfter = shown.String(), changes
	}
	next.ObservedGeneration = rar.Generation
	if !equality.Semantic.DeepEqual(&rar.Status, next) {
		p.status = next
	}
	return p
}

// decided sets the Ready condition of a decided request and returns its
// Events, unless the condition already says so: the decision, and a kubectl
// decision that did not count.
func decided(s *v1alpha1.RemediationApprovalRequestStatus, ready *metav1.Condition, generation int64, now time.Time) []event {
	d, req := s.Decision, s.RequestedDecision
	msg := v1alpha1.DecisionText(d, s.DecidedBy, s.DecidedVia)
	if s.DecisionMessage != "" {
		msg += ": " + s.DecisionMessage
	}
	if ready != nil && ready.Reason == string(d) && ready.Message == msg {
		return nil
	}
	setApprovalCondition(s, metav1.ConditionTrue, string(d), msg, generation, now)
	t := corev1.EventTypeNormal
	if d != v1alpha1.DecisionApproved {
		t = corev1.EventTypeWarning
	}
	events := []event{{t, string(d), msg}}
	if req != nil && !(s.DecidedVia == v1alpha1.DecidedViaKubectl && s.DecidedBy == req.RequestedBy && d == req.Decision) {
		events = append(events, event{corev1.EventTypeWarning, reasonDecisionIgnored, fmt.Sprintf(
			"%s by %s via kubectl at %s did not count: the workflow had already taken %s (the first decision wins)",
			req.Decision, req.RequestedBy, req.RequestedAt.UTC().Format(time.RFC3339), msg)})
	}
	return events
}

// workflowMismatch says why spec.workflowID is not a workflow of the request's
// own namespace and subject, or returns "" when it is one. Only those
// workflows hear a decision relayed from the request, so a request in one
// namespace cannot decide a run in another.
func workflowMismatch(rar *v1alpha1.RemediationApprovalRequest, subjectUID string) string {
	ids := expectedWorkflowIDs(rar, subjectUID)
	if slices.Contains(ids, rar.Spec.WorkflowID) {
		return ""
	}
	want := "none: the subject must be in the request's namespace"
	if len(ids) > 0 {
		want = strings.Join(ids, " or ")
	}
	return fmt.Sprintf("spec.workflowID %s is not a workflow of this request's namespace and subject (want %s); decisions are not relayed",
		rar.Spec.WorkflowID, want)
}

// expectedWorkflowIDs are the IDs (workflows/names.go) a request may name:
// its KubernetesExecution subject's run, given that execution's UID, or for
// any other subject the reload run of that workload and the drift run of the
// owner the worker set to the subject.
func expectedWorkflowIDs(rar *v1alpha1.RemediationApprovalRequest, subjectUID string) []string {
	s := rar.Spec.SubjectRef
	if s.Namespace != "" && s.Namespace != rar.Namespace {
		return nil
	}
	if s.Kind == "KubernetesExecution" {
		if subjectUID == "" {
			return nil
		}
		return []string{v1alpha1.ExecutionWorkflowID(rar.Namespace, s.Name, subjectUID)}
	}
	ids := []string{v1alpha1.ReloadWorkflowID(rar.Namespace, s.Kind, s.Name)}
	for _, o := range rar.OwnerReferences {
		if o.Kind == s.Kind && o.Name == s.Name {
			ids = append(ids, v1alpha1.DriftWorkflowID(string(o.UID)))
		}
	}
	return ids
}

// roundStep rounds d to the nearest remainingStep (a half step down), so a
// 10-minute request reads 10m0s however late the operator looks, and says
// how long until the value changes: then the operator looks again.
func roundStep(d time.Duration) (shown, changes time.Duration) {
	if d <= 0 {
		return 0, time.Second
	}
	step := remainingStep(d)
	shown = (d + step/2 - 1) / step * step
	if shown == 0 {
		// Under half a second left still reads as time left.
		return time.Second, d
	}
	return shown, d - (shown - step/2)
}

func setApprovalCondition(s *v1alpha1.RemediationApprovalRequestStatus, status metav1.ConditionStatus, reason, msg string, generation int64, now time.Time) {
	meta.SetStatusCondition(&s.Conditions, metav1.Condition{Type: v1alpha1.ConditionReady, Status: status, Reason: reason,
		Message: msg, ObservedGeneration: generation, LastTransitionTime: metav1.NewTime(now)})
}

// requestedNote gives approvers the three ready-to-paste ways to decide, the
// decide update first: it answers, where a malformed signal is only a
// Warning Event afterwards. The Temporal ones name the request, so they
// cannot decide a later one by mistake.
func requestedNote(rar *v1alpha1.RemediationApprovalRequest) string {
	id := rar.Spec.WorkflowID
	who := ""
	if c := rar.Spec.ApprovalContext; c.RequireDistinctApprover && c.Requester != "" {
		who = "; an approver other than the requester " + c.Requester + " must approve"
	}
	return fmt.Sprintf("%s on %s before %s%s. Approve: temporal workflow update execute --workflow-id %s --name decide --input '{\"approved\":true,\"reason\":\"...\",\"request\":\"%s\"}'"+
		" (answers at once, and refuses a mistake; through Remedy's codec server: --codec-endpoint <url> --codec-auth \"Bearer <your Kubernetes token>\") | or: kubectl patch rar %s -n %s --subresource=status --type=merge -p '{\"status\":{\"decision\":\"Approved\",\"decisionMessage\":\"...\"}}'"+
		" | or the signal: temporal workflow signal --workflow-id %s --name approve --input '{\"reason\":\"...\",\"request\":\"%s\"}'"+
		" (reject: \"approved\":false, \"Rejected\", or --name reject)",
		rar.Spec.ApprovalContext.Action, rar.Spec.ApprovalContext.Target.String(), rar.Spec.RequiredBy.UTC().Format(time.RFC3339), who,
		id, rar.Name, rar.Name, rar.Namespace, id, rar.Name)
}
