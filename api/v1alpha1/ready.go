package v1alpha1

import (
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SetReady maps a phase onto the Ready condition: True once Completed, False
// once Failed, Unknown while the run is going. The operator and the workflow's
// status writer both use it, so a status reads the same whoever wrote it.
func SetReady(conds *[]metav1.Condition, phase Phase, reason, message string, generation int64, now time.Time) {
	status := metav1.ConditionUnknown
	switch phase {
	case PhaseCompleted:
		status = metav1.ConditionTrue
	case PhaseFailed:
		status = metav1.ConditionFalse
	}
	if reason == "" {
		reason = string(phase)
	}
	// SetStatusCondition keeps the transition time unless the status flips.
	meta.SetStatusCondition(conds, metav1.Condition{Type: ConditionReady, Status: status, Reason: reason,
		Message: message, ObservedGeneration: generation, LastTransitionTime: metav1.NewTime(now)})
}
