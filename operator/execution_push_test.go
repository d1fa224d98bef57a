package operator

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/remedy-dev/remedy/api/v1alpha1"
)

// A run that writes its own status costs the operator nothing: no write, no
// event, no requeue; only the rollback annotation is still relayed.
func TestPlanExecutionLeavesPushingRunsAlone(t *testing.T) {
	now := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	pushed := func(phase v1alpha1.Phase, annotations map[string]string) *v1alpha1.KubernetesExecution {
		return &v1alpha1.KubernetesExecution{
			ObjectMeta: metav1.ObjectMeta{Generation: 1, Annotations: annotations, CreationTimestamp: metav1.NewTime(now)},
			Status:     v1alpha1.KubernetesExecutionStatus{Phase: phase, WorkflowID: "id", Sequence: 3},
		}
	}
	for _, phase := range []v1alpha1.Phase{v1alpha1.PhaseValidating, v1alpha1.PhaseExecuting, v1alpha1.PhaseWaitingApproval, v1alpha1.PhaseRollbackReady} {
		t.Run(string(phase), func(t *testing.T) {
			p := planExecution(pushed(phase, nil), "id", nil, runLook{}, true, now)
			assert.Equal(t, executionPlan{}, p)
		})
	}

	t.Run("rollback annotation in RollbackReady is relayed", func(t *testing.T) {
		p := planExecution(pushed(v1alpha1.PhaseRollbackReady, map[string]string{RollbackAnnotation: "bad rollout", v1alpha1.RollbackRequesterAnnotation: "alice"}), "id", nil, runLook{}, false, now)
		require.NotNil(t, p.rollback)
		assert.Equal(t, "alice", p.rollback.Requester)
		assert.Equal(t, "bad rollout", p.rollback.Reason)
		assert.Nil(t, p.status)
		assert.Zero(t, p.requeueAfter)
	})
	t.Run("rollback annotation outside RollbackReady waits", func(t *testing.T) {
		p := planExecution(pushed(v1alpha1.PhaseExecuting, map[string]string{RollbackAnnotation: "x"}), "id", nil, runLook{}, false, now)
		assert.Nil(t, p.rollback)
	})

	t.Run("a query that finds a pushing run neither writes nor polls", func(t *testing.T) {
		k := pushed(v1alpha1.PhasePending, nil)
		k.Status.Sequence = 0
		obs := &v1alpha1.KubernetesExecutionStatus{Phase: v1alpha1.PhaseValidating, Sequence: 1,
			PhaseTransitions: []v1alpha1.PhaseTransition{{Phase: v1alpha1.PhaseValidating, Time: metav1.NewMicroTime(now)}}}
		assert.Equal(t, executionPlan{}, planExecution(k, "id", obs, runLook{}, false, now))
	})
	t.Run("a run started before the push is still mirrored", func(t *testing.T) {
		k := pushed(v1alpha1.PhasePending, nil)
		k.Status.Sequence = 0
		obs := &v1alpha1.KubernetesExecutionStatus{Phase: v1alpha1.PhaseValidating,
			PhaseTransitions: []v1alpha1.PhaseTransition{{Phase: v1alpha1.PhaseValidating, Time: metav1.NewMicroTime(now)}}}
		p := planExecution(k, "id", obs, runLook{}, false, now)
		require.NotNil(t, p.status)
		assert.Equal(t, v1alpha1.PhaseValidating, p.status.Phase)
		assert.Equal(t, freshPoll, p.requeueAfter)
	})
}

func TestPlanRemediationLeavesPushingRunsAlone(t *testing.T) {
	rr := &v1alpha1.RemediationRequest{Status: v1alpha1.RemediationRequestStatus{Phase: v1alpha1.PhasePending, WorkflowID: "id"}}
	p := planRemediation(rr, "id", &v1alpha1.RemediationRequestStatus{Phase: v1alpha1.PhaseExecuting, Sequence: 1}, runLook{}, time.Now())
	assert.Nil(t, p.status)
	assert.Zero(t, p.requeueAfter)
	p = planRemediation(rr, "id", &v1alpha1.RemediationRequestStatus{Phase: v1alpha1.PhaseExecuting}, runLook{}, time.Now())
	require.NotNil(t, p.status, "a run started before the push is still mirrored")
	assert.Equal(t, v1alpha1.PhaseExecuting, p.status.Phase)
}
