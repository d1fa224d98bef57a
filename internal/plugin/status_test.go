package plugin

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/utils/ptr"

	"github.com/remedy-dev/remedy/api/v1alpha1"
)

// A rollback is offered only while the run is RollbackReady; an ended run
// says what became of it, even though its status keeps rollbackInformation.
func TestRollbackText(t *testing.T) {
	scaleBack := &v1alpha1.RollbackInformation{Available: true, RollbackAction: "scale", RollbackParameters: &v1alpha1.ActionParameters{Replicas: ptr.To[int32](2)}}
	step := &v1alpha1.LocalRef{Name: "fix"}
	for _, tc := range []struct {
		name   string
		phase  v1alpha1.Phase
		reason string
		rb     *v1alpha1.RollbackInformation
		parent *v1alpha1.LocalRef
		want   string
	}{
		{"RollbackReady", v1alpha1.PhaseRollbackReady, v1alpha1.ReasonRollbackAvailable, scaleBack, nil, "available (scale to replicas 2)"},
		{"a held step", v1alpha1.PhaseRollbackReady, v1alpha1.ReasonRollbackAvailable, scaleBack, step, "available (scale to replicas 2) until RemediationRequest fix ends"},
		{"the window closed", v1alpha1.PhaseCompleted, v1alpha1.ReasonSucceeded, scaleBack, nil, "closed: the run has ended, so its rollback window is over (scale to replicas 2 is no longer offered)"},
		{"a finalized step", v1alpha1.PhaseCompleted, v1alpha1.ReasonSucceeded, scaleBack, step, "closed: RemediationRequest fix ended and kept this change (scale to replicas 2 is no longer offered)"},
		{"rolled back", v1alpha1.PhaseCompleted, v1alpha1.ReasonRolledBack, scaleBack, step, "done: rolled back (scale to replicas 2)"},
		{"no change", v1alpha1.PhaseCompleted, v1alpha1.ReasonNoChange, &v1alpha1.RollbackInformation{Reason: "nothing was changed, so there is nothing to roll back"}, nil,
			"none: nothing was changed, so there is nothing to roll back"},
		{"still executing", v1alpha1.PhaseVerifying, "Verifying", scaleBack, nil, "captured (scale to replicas 2); offered once the run is RollbackReady"},
		{"not captured yet", v1alpha1.PhaseValidating, "Validating", nil, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := &v1alpha1.KubernetesExecution{
				Spec:   v1alpha1.KubernetesExecutionSpec{RemediationRequestRef: tc.parent},
				Status: v1alpha1.KubernetesExecutionStatus{Phase: tc.phase, Reason: tc.reason, RollbackInformation: tc.rb},
			}
			assert.Equal(t, tc.want, rollbackText(k))
		})
	}
}
