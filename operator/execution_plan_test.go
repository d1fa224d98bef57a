package operator

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/remedy-dev/remedy/api/v1alpha1"
)

// runOf is the run recorded with a workflow ID in these plans' objects.
func runOf(id string) string {
	if id == "" {
		return ""
	}
	return "run-of-" + id
}

func TestPlanExecution(t *testing.T) {
	now := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	kexec := func(phase v1alpha1.Phase, id string) *v1alpha1.KubernetesExecution {
		return &v1alpha1.KubernetesExecution{
			ObjectMeta: metav1.ObjectMeta{Generation: 1},
			Status:     v1alpha1.KubernetesExecutionStatus{Phase: phase, WorkflowID: id, RunID: runOf(id)},
		}
	}
	observed := func(phase v1alpha1.Phase, reason string) *v1alpha1.KubernetesExecutionStatus {
		return &v1alpha1.KubernetesExecutionStatus{Phase: phase, Reason: reason, Message: "m",
			PhaseTransitions: []v1alpha1.PhaseTransition{{Phase: phase, Reason: reason, Message: "m", Time: metav1.NewMicroTime(now.Add(-time.Second))}}}
	}
	for _, tc := range []struct {
		name        string
		kexec       *v1alpha1.KubernetesExecution
		observed    *v1alpha1.KubernetesExecutionStatus
		wantStart   bool
		wantWrite   bool
		wantPhase   v1alpha1.Phase
		wantEvent   string
		wantEvType  string
		wantReady   metav1.ConditionStatus
		wantRequeue time.Duration
	}{
		{name: "new object starts its workflow", kexec: kexec("", ""), wantStart: true, wantWrite: true,
			wantPhase: v1alpha1.PhasePending, wantEvent: "Started", wantEvType: corev1.EventTypeNormal, wantReady: metav1.ConditionUnknown, wantRequeue: firstPushWait},
		{name: "phase change is mirrored with an event", kexec: kexec(v1alpha1.PhasePending, "id"), observed: observed(v1alpha1.PhaseExecuting, "Executing"),
			wantWrite: true, wantPhase: v1alpha1.PhaseExecuting, wantEvent: "Executing", wantEvType: corev1.EventTypeNormal, wantReady: metav1.ConditionUnknown, wantRequeue: freshPoll},
		{name: "failure is a warning and stops polling", kexec: kexec(v1alpha1.PhaseExecuting, "id"), observed: observed(v1alpha1.PhaseFailed, "Forbidden"),
			wantWrite: true, wantPhase: v1alpha1.PhaseFailed, wantEvent: "Failed", wantEvType: corev1.EventTypeWarning, wantReady: metav1.ConditionFalse},
		{name: "completion sets Ready", kexec: kexec(v1alpha1.PhaseRollbackReady, "id"), observed: observed(v1alpha1.PhaseCompleted, "Succeeded"),
			wantWrite: true, wantPhase: v1alpha1.PhaseCompleted, wantEvent: "Completed", wantEvType: corev1.EventTypeNormal, wantReady: metav1.ConditionTrue},
		{name: "waiting phases poll slower", kexec: kexec(v1alpha1.PhaseExecuting, "id"), observed: observed(v1alpha1.PhaseRollbackReady, "RollbackAvailable"),
			wantWrite: true, wantPhase: v1alpha1.PhaseRollbackReady, wantEvent: "RollbackReady", wantEvType: corev1.EventTypeNormal, wantReady: metav1.ConditionUnknown, wantRequeue: waitingPoll},
		{name: "no query result, nothing to do", kexec: kexec(v1alpha1.PhaseCompleted, "id")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := planExecution(tc.kexec, "id", tc.observed, runLook{}, false, now)
			assert.Equal(t, tc.wantStart, p.start)
			assert.Equal(t, tc.wantRequeue, p.requeueAfter)
			if !tc.wantWrite {
				assert.Nil(t, p.status)
				assert.Empty(t, p.events)
				return
			}
			require.NotNil(t, p.status)
			assert.Equal(t, tc.wantPhase, p.status.Phase)
			assert.Equal(t, "id", p.status.WorkflowID)
			assert.Equal(t, runOf(tc.kexec.Status.WorkflowID), p.status.RunID, "the recorded run is kept; the query's status names none")
			assert.Equal(t, int64(1), p.status.ObservedGeneration)
			require.Len(t, p.events, 1)
			assert.Equal(t, tc.wantEvent, p.events[0].reason)
			assert.Equal(t, tc.wantEvType, p.events[0].eventType)
			require.Len(t, p.status.Conditions, 1)
			assert.Equal(t, tc.wantReady, p.status.Conditions[0].Status)
		})
	}
}

func TestPlanExecutionIsQuietWhenNothingChanged(t *testing.T) {
	now := time.Now()
	k := &v1alpha1.KubernetesExecution{ObjectMeta: metav1.ObjectMeta{Generation: 1}}
	first := planExecution(k, "id", nil, runLook{}, false, now)
	k.Status = *first.status
	obs := &v1alpha1.KubernetesExecutionStatus{Phase: v1alpha1.PhaseExecuting, Reason: "Executing",
		PhaseTransitions: []v1alpha1.PhaseTransition{{Phase: v1alpha1.PhaseExecuting, Time: metav1.NewMicroTime(now.Add(-time.Minute))}}}
	second := planExecution(k, "id", obs, runLook{}, false, now)
	k.Status = *second.status
	third := planExecution(k, "id", obs.DeepCopy(), runLook{}, false, now.Add(time.Second))
	assert.Nil(t, third.status, "an unchanged phase must not cause a status write")
	assert.Empty(t, third.events)
	assert.Equal(t, activePoll, third.requeueAfter, "a run long in one phase is polled less often")
}

// Phases that came and went between two queries still get their Events.
func TestPlanExecutionEmitsSkippedPhases(t *testing.T) {
	k := &v1alpha1.KubernetesExecution{Status: v1alpha1.KubernetesExecutionStatus{
		Phase: v1alpha1.PhaseValidating, WorkflowID: "id",
		PhaseTransitions: []v1alpha1.PhaseTransition{{Phase: v1alpha1.PhaseValidating}},
	}}
	obs := &v1alpha1.KubernetesExecutionStatus{Phase: v1alpha1.PhaseCompleted, Reason: "Succeeded", PhaseTransitions: []v1alpha1.PhaseTransition{
		{Phase: v1alpha1.PhaseValidating}, {Phase: v1alpha1.PhaseExecuting, Reason: "Executing"}, {Phase: v1alpha1.PhaseCompleted, Reason: "Succeeded"},
	}}
	p := planExecution(k, "id", obs, runLook{}, false, time.Now())
	require.Len(t, p.events, 2)
	assert.Equal(t, "Executing", p.events[0].reason)
	assert.Equal(t, "Completed", p.events[1].reason)
}

// A decided approval is mirrored within a fresh poll, not the slow waiting one.
func TestPlanExecutionPollsFastOnceApprovalIsDecided(t *testing.T) {
	now := time.Now()
	k := &v1alpha1.KubernetesExecution{Status: v1alpha1.KubernetesExecutionStatus{Phase: v1alpha1.PhaseWaitingApproval, WorkflowID: "id"}}
	obs := &v1alpha1.KubernetesExecutionStatus{Phase: v1alpha1.PhaseWaitingApproval}
	assert.Equal(t, waitingPoll, planExecution(k, "id", obs, runLook{}, false, now).requeueAfter)
	assert.Equal(t, freshPoll, planExecution(k, "id", obs, runLook{}, true, now).requeueAfter)
}

// A spec stored before the schema checked durations fails without a
// workflow, naming the field, and is quiet once its status says so.
func TestPlanRefusesInvalidDurations(t *testing.T) {
	now := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	bad := v1alpha1.Duration("5 m")
	k := &v1alpha1.KubernetesExecution{ObjectMeta: metav1.ObjectMeta{Generation: 1}}
	k.Spec.PostConditions = []v1alpha1.Condition{{Name: "up", Timeout: &bad}}
	p := planExecution(k, "id", nil, runLook{}, false, now)
	assert.False(t, p.start)
	require.NotNil(t, p.status)
	assert.Equal(t, v1alpha1.PhaseFailed, p.status.Phase)
	assert.Equal(t, v1alpha1.ReasonInvalidSpec, p.status.Reason)
	assert.Contains(t, p.status.Message, `spec.postConditions[0].timeout: "5 m" is not a duration`)
	require.Len(t, p.events, 1)
	assert.Equal(t, corev1.EventTypeWarning, p.events[0].eventType)
	k.Status = *p.status
	assert.Equal(t, executionPlan{}, planExecution(k, "id", nil, runLook{}, false, now.Add(time.Second)))

	rr := &v1alpha1.RemediationRequest{ObjectMeta: metav1.ObjectMeta{Generation: 1}}
	rr.Spec.Steps = []v1alpha1.RemediationStep{{Name: "a"}, {Name: "b", Execution: v1alpha1.KubernetesExecutionSpec{RollbackWindow: &bad}}}
	q := planRemediation(rr, "id", nil, runLook{}, now)
	assert.False(t, q.start)
	require.NotNil(t, q.status)
	assert.Equal(t, v1alpha1.PhaseFailed, q.status.Phase)
	assert.Contains(t, q.status.Message, `spec.steps[1].execution.rollbackWindow: "5 m" is not a duration`)
	rr.Status = *q.status
	assert.Nil(t, planRemediation(rr, "id", nil, runLook{}, now).status)
}
