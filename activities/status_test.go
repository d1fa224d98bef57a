package activities

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/remedy-dev/remedy/api/v1alpha1"
)

func pushedStatus(seq int64, phases ...v1alpha1.Phase) v1alpha1.KubernetesExecutionStatus {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := v1alpha1.KubernetesExecutionStatus{Sequence: seq, WorkflowID: "kexec/shop/x/u1"}
	for i, p := range phases {
		s.PhaseTransitions = append(s.PhaseTransitions, v1alpha1.PhaseTransition{Phase: p, Reason: string(p), Time: metav1.NewMicroTime(t0.Add(time.Duration(i) * time.Second))})
		s.Phase, s.Reason = p, string(p)
	}
	return s
}

func TestMergeExecutionStatusGuard(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 1, 0, 0, time.UTC)
	pending := v1alpha1.KubernetesExecutionStatus{Phase: v1alpha1.PhasePending, WorkflowID: "kexec/shop/x/u1"}
	v1alpha1.SetReady(&pending.Conditions, pending.Phase, "", "", 1, now.Add(-time.Minute))
	validating := pushedStatus(1, v1alpha1.PhaseValidating)
	executing := pushedStatus(2, v1alpha1.PhaseValidating, v1alpha1.PhaseExecuting)
	completed := pushedStatus(3, v1alpha1.PhaseValidating, v1alpha1.PhaseExecuting, v1alpha1.PhaseCompleted)
	for _, tc := range []struct {
		name        string
		cur, pushed v1alpha1.KubernetesExecutionStatus
		ok          bool
		entered     []v1alpha1.Phase
		ready       metav1.ConditionStatus
	}{
		{"first write over the operator's Pending", pending, validating, true, []v1alpha1.Phase{v1alpha1.PhaseValidating}, metav1.ConditionUnknown},
		{"next phase", validating, executing, true, []v1alpha1.Phase{v1alpha1.PhaseExecuting}, metav1.ConditionUnknown},
		{"a lost write is caught up by the next", validating, completed, true, []v1alpha1.Phase{v1alpha1.PhaseExecuting, v1alpha1.PhaseCompleted}, metav1.ConditionTrue},
		{"a retried write that already landed", executing, executing, false, nil, ""},
		{"a stale writer never takes the run back", completed, executing, false, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			next, entered, ok := mergeExecutionStatus(tc.cur, tc.pushed, 1, now)
			require.Equal(t, tc.ok, ok)
			if !ok {
				assert.Equal(t, tc.cur, next, "a refused write changes nothing")
				assert.Empty(t, entered)
				return
			}
			assert.Equal(t, tc.pushed.Phase, next.Phase)
			assert.Equal(t, tc.pushed.Sequence, next.Sequence)
			assert.Equal(t, int64(1), next.ObservedGeneration)
			var got []v1alpha1.Phase
			for _, e := range entered {
				got = append(got, e.Phase)
			}
			assert.Equal(t, tc.entered, got, "one Event per phase entered since the stored status")
			ready := meta.FindStatusCondition(next.Conditions, v1alpha1.ConditionReady)
			require.NotNil(t, ready)
			assert.Equal(t, tc.ready, ready.Status)
		})
	}
}

func TestMergeExecutionStatusPhaseDurations(t *testing.T) {
	_, entered, ok := mergeExecutionStatus(pushedStatus(1, v1alpha1.PhaseValidating), pushedStatus(3, v1alpha1.PhaseValidating, v1alpha1.PhaseExecuting, v1alpha1.PhaseCompleted), 1, time.Now())
	require.True(t, ok)
	require.Len(t, entered, 2)
	assert.Equal(t, v1alpha1.PhaseValidating, entered[0].prev)
	assert.Equal(t, time.Second, entered[0].prevFor)
	assert.Equal(t, v1alpha1.PhaseExecuting, entered[1].prev)
	assert.Equal(t, 2, entered[1].index)
}

func TestMergeRemediationStatusGuard(t *testing.T) {
	now := time.Now()
	cur := v1alpha1.RemediationRequestStatus{Phase: v1alpha1.PhaseExecuting, Reason: "Executing", Sequence: 4, WorkflowID: "rr/shop/x/u1"}
	_, _, ok := mergeRemediationStatus(cur, v1alpha1.RemediationRequestStatus{Phase: v1alpha1.PhaseExecuting, Sequence: 3}, 1, now)
	assert.False(t, ok, "stale")
	next, changed, ok := mergeRemediationStatus(cur, v1alpha1.RemediationRequestStatus{Phase: v1alpha1.PhaseExecuting, Reason: "Executing", Sequence: 5, CurrentStep: 2}, 1, now)
	require.True(t, ok)
	assert.False(t, changed, "a step's progress is no phase change")
	assert.Equal(t, "rr/shop/x/u1", next.WorkflowID, "the stored workflowID stays")
	_, changed, ok = mergeRemediationStatus(cur, v1alpha1.RemediationRequestStatus{Phase: v1alpha1.PhaseCompleted, Reason: "Succeeded", Sequence: 6}, 1, now)
	require.True(t, ok)
	assert.True(t, changed)
}
