package v1alpha1

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// KindName renders the reference as kind/name, as kubectl names objects.
func (r ObjectRef) KindName() string { return r.Kind + "/" + r.Name }

// StepsProgress is steps done of all steps, e.g. 1/2: a step is done once
// its action ran (RollbackReady or Completed).
func StepsProgress(steps []StepStatus, total int) string {
	done := 0
	for _, s := range steps {
		if s.Phase == PhaseCompleted || s.Phase == PhaseRollbackReady {
			done++
		}
	}
	return fmt.Sprintf("%d/%d", done, total)
}

// DecisionText says who took the decision and how: "Approved by alice via
// kubectl". The timer is named once: "Expired by timer".
func DecisionText(d Decision, by string, via DecidedVia) string {
	switch {
	case via == DecidedViaTimer && (by == "" || by == string(DecidedViaTimer)):
		return fmt.Sprintf("%s by timer", d)
	case via == DecidedViaTimer:
		return fmt.Sprintf("%s by %s (timer)", d, by)
	}
	return fmt.Sprintf("%s by %s via %s", d, by, via)
}

// FinishedAt is when a run reached Completed or Failed (its Ready condition
// turned True or False), and false while it has not.
func FinishedAt(phase Phase, conds []metav1.Condition) (time.Time, bool) {
	if !phase.Terminal() {
		return time.Time{}, false
	}
	c := meta.FindStatusCondition(conds, ConditionReady)
	if c == nil {
		return time.Time{}, false
	}
	return c.LastTransitionTime.Time, true
}
