package operator

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/remedy-dev/remedy/api/v1alpha1"
)

// ConditionRollbackRequest reports a rollback annotation the run could not
// act on because it had ended; its message says when the window closed.
const ConditionRollbackRequest = "RollbackRequest"

// reasonRollbackTooLate is the condition's and the Warning Event's reason.
const reasonRollbackTooLate = "RollbackTooLate"

// planLateRollback answers a rollback annotation on an execution whose run
// has ended without rolling back: its workflow is closed, so no signal can
// reach it. It sets the RollbackRequest condition and plans one Warning
// Event per annotation value; nil when there is nothing (new) to say.
func planLateRollback(kexec *v1alpha1.KubernetesExecution, now time.Time) *executionPlan {
	reason, ok := kexec.Annotations[RollbackAnnotation]
	s := kexec.Status
	if !ok || !s.Phase.Terminal() || rollbackStarted(s.PhaseTransitions) {
		return nil
	}
	msg := fmt.Sprintf("rollback requested after the window closed at %s; the run has ended %s (%s), so nothing was rolled back",
		windowClosed(s.PhaseTransitions), s.Phase, s.Reason)
	if !offeredRollback(s.PhaseTransitions) {
		msg = fmt.Sprintf("rollback requested, but this execution never offered one: it ended %s (%s), so nothing was rolled back", s.Phase, s.Reason)
	}
	msg += fmt.Sprintf(" (annotation %s=%q)", RollbackAnnotation, reason)
	if c := meta.FindStatusCondition(s.Conditions, ConditionRollbackRequest); c != nil && c.Message == msg {
		return nil
	}
	next := s.DeepCopy()
	meta.SetStatusCondition(&next.Conditions, metav1.Condition{Type: ConditionRollbackRequest, Status: metav1.ConditionFalse,
		Reason: reasonRollbackTooLate, Message: msg, ObservedGeneration: kexec.Generation, LastTransitionTime: metav1.NewTime(now)})
	return &executionPlan{status: next, events: []event{{corev1.EventTypeWarning, reasonRollbackTooLate, msg}}}
}

// rollbackStarted reports whether the run began rolling back, whatever came of it.
func rollbackStarted(trs []v1alpha1.PhaseTransition) bool {
	for _, tr := range trs {
		if tr.Reason == v1alpha1.ReasonRollingBack || tr.Reason == v1alpha1.ReasonRolledBack {
			return true
		}
	}
	return false
}

func offeredRollback(trs []v1alpha1.PhaseTransition) bool {
	for _, tr := range trs {
		if tr.Phase == v1alpha1.PhaseRollbackReady {
			return true
		}
	}
	return false
}

// windowClosed is when the run left RollbackReady for the last time, in RFC 3339.
func windowClosed(trs []v1alpha1.PhaseTransition) string {
	for i := len(trs) - 1; i > 0; i-- {
		if trs[i-1].Phase == v1alpha1.PhaseRollbackReady {
			return trs[i].Time.UTC().Format(time.RFC3339)
		}
	}
	return "an unknown time"
}
