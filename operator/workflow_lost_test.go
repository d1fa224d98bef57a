package operator

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/enums/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/remedy-dev/remedy/api/v1alpha1"
)

// Long because it is a table: one row per way a run's workflow may be found gone or not.
func TestPlanExecutionWorkflowLost(t *testing.T) {
	now := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	entered := now.Add(-10 * time.Minute)
	kexec := func(phase v1alpha1.Phase, seq int64, age time.Duration) *v1alpha1.KubernetesExecution {
		return &v1alpha1.KubernetesExecution{
			ObjectMeta: metav1.ObjectMeta{Generation: 1, CreationTimestamp: metav1.NewTime(now.Add(-age))},
			Status: v1alpha1.KubernetesExecutionStatus{Phase: phase, WorkflowID: "id", Sequence: seq,
				PhaseTransitions: []v1alpha1.PhaseTransition{{Phase: phase, Time: metav1.NewMicroTime(entered)}}},
		}
	}
	final := func(phase v1alpha1.Phase, reason string, seq int64) *v1alpha1.KubernetesExecutionStatus {
		return &v1alpha1.KubernetesExecutionStatus{Phase: phase, Reason: reason, Sequence: seq,
			PhaseTransitions: []v1alpha1.PhaseTransition{{Phase: v1alpha1.PhaseWaitingApproval, Time: metav1.NewMicroTime(entered)}, {Phase: phase, Reason: reason, Time: metav1.NewMicroTime(now)}}}
	}
	open := runLook{state: runOpen, recheck: 2 * time.Minute}
	for _, tc := range []struct {
		name      string
		kexec     *v1alpha1.KubernetesExecution
		observed  *v1alpha1.KubernetesExecutionStatus
		run       runLook
		wantLost  string // a part of the message; "" when not lost
		wantPhase v1alpha1.Phase
		// wantRequeue is checked when nothing is lost.
		wantRequeue time.Duration
	}{
		{name: "pushing run still running: no write, looked at again later", kexec: kexec(v1alpha1.PhaseWaitingApproval, 3, time.Hour), run: open,
			wantRequeue: 2 * time.Minute},
		{name: "pushing run not looked at: wait for its look", kexec: kexec(v1alpha1.PhaseRollbackReady, 3, time.Hour), run: runLook{recheck: 40 * time.Second},
			wantRequeue: 40 * time.Second},
		{name: "workflow not found", kexec: kexec(v1alpha1.PhaseWaitingApproval, 3, time.Hour), run: runLook{state: runMissing},
			wantLost: "workflow id does not exist in Temporal while in phase WaitingApproval"},
		{name: "terminated by hand", kexec: kexec(v1alpha1.PhaseRollbackReady, 3, time.Hour), run: runLook{state: runKilled, how: "Terminated"},
			wantLost: "workflow id was terminated while in phase RollbackReady"},
		{name: "timed out", kexec: kexec(v1alpha1.PhaseExecuting, 2, time.Hour), run: runLook{state: runKilled, how: "TimedOut"},
			wantLost: "was timed out while in phase Executing"},
		{name: "completed with a final phase whose push did not land: mirrored, not lost", kexec: kexec(v1alpha1.PhaseRollbackReady, 3, time.Hour),
			run: runLook{state: runClosed, how: "Completed"}, observed: final(v1alpha1.PhaseCompleted, "Succeeded", 4), wantPhase: v1alpha1.PhaseCompleted},
		{name: "canceled run that wrote Failed/Canceled in its last query: mirrored", kexec: kexec(v1alpha1.PhaseExecuting, 3, time.Hour),
			run: runLook{state: runClosed, how: "Canceled"}, observed: final(v1alpha1.PhaseFailed, "Canceled", 4), wantPhase: v1alpha1.PhaseFailed},
		{name: "closed by itself without a final phase", kexec: kexec(v1alpha1.PhaseExecuting, 3, time.Hour),
			run: runLook{state: runClosed, how: "Failed"}, observed: final(v1alpha1.PhaseExecuting, "Executing", 3),
			wantLost: "closed Failed without a final phase while in phase Executing"},
		{name: "closed, final status unreadable", kexec: kexec(v1alpha1.PhaseExecuting, 3, time.Hour), run: runLook{state: runClosed, how: "Completed"},
			wantLost: "closed Completed without a final phase"},
		{name: "queried run just created whose workflow is not there yet (a step)", kexec: kexec(v1alpha1.PhasePending, 0, time.Second),
			run: runLook{state: runMissing}, wantRequeue: queryRetry},
		{name: "queried run whose workflow stays missing", kexec: kexec(v1alpha1.PhasePending, 0, time.Hour), run: runLook{state: runMissing},
			wantLost: "does not exist in Temporal"},
		{name: "queried run terminated", kexec: kexec(v1alpha1.PhaseValidating, 0, time.Hour), run: runLook{state: runKilled, how: "Terminated"},
			wantLost: "was terminated"},
		{name: "a terminal object is never lost", kexec: kexec(v1alpha1.PhaseCompleted, 5, time.Hour), run: runLook{state: runKilled, how: "Terminated"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := planExecution(tc.kexec, "id", tc.observed, tc.run, false, now)
			if tc.wantLost == "" && tc.wantPhase == "" {
				assert.Nil(t, p.status)
				assert.Empty(t, p.events)
				assert.Equal(t, tc.wantRequeue, p.requeueAfter)
				return
			}
			require.NotNil(t, p.status)
			if tc.wantPhase != "" {
				assert.Equal(t, tc.wantPhase, p.status.Phase)
				assert.NotEqual(t, v1alpha1.ReasonWorkflowLost, p.status.Reason)
				return
			}
			s := p.status
			assert.Equal(t, v1alpha1.PhaseFailed, s.Phase)
			assert.Equal(t, v1alpha1.ReasonWorkflowLost, s.Reason)
			assert.Contains(t, s.Message, tc.wantLost)
			assert.Equal(t, tc.kexec.Status.Sequence, s.Sequence, "the sequence stays, so a late write of the workflow wins")
			last := s.PhaseTransitions[len(s.PhaseTransitions)-1]
			assert.Equal(t, v1alpha1.PhaseFailed, last.Phase)
			assert.Equal(t, v1alpha1.ReasonWorkflowLost, last.Reason)
			ready := meta.FindStatusCondition(s.Conditions, v1alpha1.ConditionReady)
			require.NotNil(t, ready)
			assert.Equal(t, metav1.ConditionFalse, ready.Status)
			assert.Equal(t, v1alpha1.ReasonWorkflowLost, ready.Reason)
			require.Len(t, p.events, 1)
			assert.Equal(t, corev1.EventTypeWarning, p.events[0].eventType)
			assert.Equal(t, "Failed", p.events[0].reason)
			assert.Contains(t, p.events[0].note, "WorkflowLost: ")
			require.Len(t, p.entered, 1)
			assert.Equal(t, phaseEntry{phase: "Failed", reason: v1alpha1.ReasonWorkflowLost, prevPhase: string(tc.kexec.Status.Phase), prevDuration: 10 * time.Minute}, p.entered[0])
		})
	}
}

func TestPlanExecutionWorkflowLostKeepsTheTransitionBound(t *testing.T) {
	now := time.Now()
	k := &v1alpha1.KubernetesExecution{Status: v1alpha1.KubernetesExecutionStatus{Phase: v1alpha1.PhaseExecuting, WorkflowID: "id", Sequence: 40,
		PhaseTransitions: make([]v1alpha1.PhaseTransition, maxPhaseTransitions)}}
	p := planExecution(k, "id", nil, runLook{state: runMissing}, false, now)
	require.NotNil(t, p.status)
	assert.Equal(t, v1alpha1.ReasonWorkflowLost, p.status.Reason)
	assert.Len(t, p.status.PhaseTransitions, maxPhaseTransitions)
}

func TestPlanRemediationWorkflowLost(t *testing.T) {
	now := time.Now()
	rr := func(seq int64) *v1alpha1.RemediationRequest {
		return &v1alpha1.RemediationRequest{ObjectMeta: metav1.ObjectMeta{Generation: 1, CreationTimestamp: metav1.NewTime(now.Add(-time.Hour))},
			Status: v1alpha1.RemediationRequestStatus{Phase: v1alpha1.PhaseExecuting, WorkflowID: "id", Sequence: seq}}
	}
	t.Run("terminated", func(t *testing.T) {
		p := planRemediation(rr(4), "id", nil, runLook{state: runKilled, how: "Terminated"}, now)
		require.NotNil(t, p.status)
		assert.Equal(t, v1alpha1.PhaseFailed, p.status.Phase)
		assert.Equal(t, v1alpha1.ReasonWorkflowLost, p.status.Reason)
		assert.Equal(t, int64(4), p.status.Sequence)
		assert.Equal(t, metav1.ConditionFalse, meta.FindStatusCondition(p.status.Conditions, v1alpha1.ConditionReady).Status)
		require.Len(t, p.events, 1)
		assert.Equal(t, corev1.EventTypeWarning, p.events[0].eventType)
	})
	t.Run("running: looked at again later", func(t *testing.T) {
		p := planRemediation(rr(4), "id", nil, runLook{state: runOpen, recheck: time.Minute}, now)
		assert.Nil(t, p.status)
		assert.Equal(t, time.Minute, p.requeueAfter)
	})
	t.Run("completed with a late final push: mirrored", func(t *testing.T) {
		p := planRemediation(rr(4), "id", &v1alpha1.RemediationRequestStatus{Phase: v1alpha1.PhaseCompleted, Reason: "Succeeded", Sequence: 5},
			runLook{state: runClosed, how: "Completed"}, now)
		require.NotNil(t, p.status)
		assert.Equal(t, v1alpha1.PhaseCompleted, p.status.Phase)
	})
	t.Run("a queried run just created", func(t *testing.T) {
		r := rr(0)
		r.CreationTimestamp = metav1.NewTime(now)
		p := planRemediation(r, "id", nil, runLook{state: runMissing}, now)
		assert.Nil(t, p.status)
		assert.Equal(t, queryRetry, p.requeueAfter)
	})
}

func TestCheckDue(t *testing.T) {
	now := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	every := 2 * time.Minute
	for _, tc := range []struct {
		name             string
		quiet, lastCheck time.Time
		wantDue          bool
		wantWait         time.Duration
	}{
		{name: "a run that just moved waits the whole interval", quiet: now, wantWait: every},
		{name: "quiet for a while: waits the rest", quiet: now.Add(-90 * time.Second), wantWait: 30 * time.Second},
		{name: "quiet for the interval, never looked at: due", quiet: now.Add(-every), wantDue: true, wantWait: every},
		{name: "quiet long, looked at recently: waits from the look", quiet: now.Add(-time.Hour), lastCheck: now.Add(-time.Minute), wantWait: time.Minute},
		{name: "quiet long, looked at an interval ago: due", quiet: now.Add(-time.Hour), lastCheck: now.Add(-every), wantDue: true, wantWait: every},
		{name: "first look at a request past requiredBy", wantDue: true, wantWait: every},
	} {
		t.Run(tc.name, func(t *testing.T) {
			due, wait := checkDue(tc.quiet, tc.lastCheck, now, every)
			assert.Equal(t, tc.wantDue, due)
			assert.Equal(t, tc.wantWait, wait)
		})
	}
}

func TestClosedLook(t *testing.T) {
	for status, want := range map[enums.WorkflowExecutionStatus]runLook{
		enums.WORKFLOW_EXECUTION_STATUS_RUNNING:          {state: runOpen},
		enums.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW: {state: runOpen},
		enums.WORKFLOW_EXECUTION_STATUS_TERMINATED:       {state: runKilled, how: "Terminated"},
		enums.WORKFLOW_EXECUTION_STATUS_TIMED_OUT:        {state: runKilled, how: "TimedOut"},
		enums.WORKFLOW_EXECUTION_STATUS_COMPLETED:        {state: runClosed, how: "Completed"},
		enums.WORKFLOW_EXECUTION_STATUS_FAILED:           {state: runClosed, how: "Failed"},
		enums.WORKFLOW_EXECUTION_STATUS_CANCELED:         {state: runClosed, how: "Canceled"},
	} {
		t.Run(status.String(), func(t *testing.T) {
			assert.Equal(t, want, closedLook(status))
		})
	}
}

func TestPlanApprovalWorkflowGone(t *testing.T) {
	requiredBy := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	waiting, ended := approvalSubject{uid: "u1"}, approvalSubject{gone: true, uid: "u1"}
	rar := func(status v1alpha1.RemediationApprovalRequestStatus) *v1alpha1.RemediationApprovalRequest {
		return &v1alpha1.RemediationApprovalRequest{
			ObjectMeta: metav1.ObjectMeta{Name: "scale-web-approval", Namespace: "shop", Generation: 1},
			Spec: v1alpha1.RemediationApprovalRequestSpec{SubjectRef: v1alpha1.ObjectRef{Kind: "KubernetesExecution", Name: "scale-web"},
				WorkflowID: "kexec/shop/scale-web/u1", RequiredBy: metav1.NewTime(requiredBy)},
			Status: status,
		}
	}
	canceled := v1alpha1.RemediationApprovalRequestStatus{Conditions: []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: reasonCanceled}}}
	for _, tc := range []struct {
		name        string
		rar         *v1alpha1.RemediationApprovalRequest
		subject     approvalSubject
		run         runLook
		now         time.Time
		wantExpired string // a part of the decision message; "" when not expired
		wantRequeue time.Duration
	}{
		{name: "past requiredBy, workflow terminated: expired by the operator", rar: rar(v1alpha1.RemediationApprovalRequestStatus{}), subject: waiting,
			run: runLook{state: runKilled, how: "Terminated"}, now: requiredBy,
			wantExpired: "expired by remedy-operator: workflow kexec/shop/scale-web/u1 closed Terminated, so its timer cannot record the expiry of 2026-01-01T12:00:00Z"},
		{name: "past requiredBy, workflow not found", rar: rar(v1alpha1.RemediationApprovalRequestStatus{}), subject: waiting,
			run: runLook{state: runMissing}, now: requiredBy.Add(time.Second), wantExpired: "workflow kexec/shop/scale-web/u1 does not exist in Temporal"},
		{name: "past requiredBy, closed request whose subject ended", rar: rar(canceled), subject: ended,
			run: runLook{state: runClosed, how: "Completed"}, now: requiredBy, wantExpired: "closed Completed"},
		{name: "past requiredBy, workflow still running: its timer decides, looked at again later", rar: rar(v1alpha1.RemediationApprovalRequestStatus{}),
			subject: waiting, run: runLook{state: runOpen, recheck: 2 * time.Minute}, now: requiredBy, wantRequeue: 2 * time.Minute},
		{name: "before requiredBy a gone workflow expires nothing", rar: rar(canceled), subject: ended, run: runLook{state: runMissing},
			now: requiredBy.Add(-time.Minute), wantRequeue: time.Minute},
		{name: "a request naming another workflow is not expired", rar: rar(v1alpha1.RemediationApprovalRequestStatus{}), subject: approvalSubject{uid: "u2"},
			run: runLook{state: runMissing}, now: requiredBy},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := planApproval(tc.rar, tc.subject, tc.run, tc.now)
			assert.Equal(t, tc.wantRequeue, p.requeueAfter)
			if tc.wantExpired == "" {
				if p.status != nil {
					assert.Empty(t, p.status.Decision)
				}
				return
			}
			require.NotNil(t, p.status)
			s := p.status
			assert.Equal(t, v1alpha1.DecisionExpired, s.Decision)
			assert.Equal(t, OperatorName, s.DecidedBy)
			assert.Equal(t, v1alpha1.DecidedViaTimer, s.DecidedVia)
			assert.Equal(t, tc.now, s.DecidedAt.Time)
			assert.Contains(t, s.DecisionMessage, tc.wantExpired)
			assert.Empty(t, s.TimeRemaining)
			ready := meta.FindStatusCondition(s.Conditions, v1alpha1.ConditionReady)
			assert.Equal(t, metav1.ConditionTrue, ready.Status)
			assert.Equal(t, "Expired", ready.Reason)
			require.Len(t, p.events, 1)
			assert.Equal(t, corev1.EventTypeWarning, p.events[0].eventType)
			assert.Equal(t, "Expired", p.events[0].reason)
			assert.Empty(t, p.signal)

			// Once stored, the decided request is quiet.
			tc.rar.Status = *s
			again := planApproval(tc.rar, tc.subject, runLook{}, tc.now.Add(time.Second))
			assert.Nil(t, again.status)
			assert.Empty(t, again.events)
		})
	}
}

func TestExpiryCheckDue(t *testing.T) {
	requiredBy := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	rar := &v1alpha1.RemediationApprovalRequest{ObjectMeta: metav1.ObjectMeta{Namespace: "shop"},
		Spec: v1alpha1.RemediationApprovalRequestSpec{SubjectRef: v1alpha1.ObjectRef{Kind: "KubernetesExecution", Name: "scale-web"},
			WorkflowID: "kexec/shop/scale-web/u1", RequiredBy: metav1.NewTime(requiredBy)}}
	decided := rar.DeepCopy()
	decided.Status.Decision = v1alpha1.DecisionApproved
	subject := approvalSubject{uid: "u1"}
	assert.False(t, expiryCheckDue(rar, subject, requiredBy.Add(-time.Second)), "not before requiredBy")
	assert.True(t, expiryCheckDue(rar, subject, requiredBy), "at requiredBy")
	assert.False(t, expiryCheckDue(decided, subject, requiredBy.Add(time.Hour)), "not once decided")
	assert.False(t, expiryCheckDue(rar, approvalSubject{uid: "u2"}, requiredBy), "not for a workflow of another subject")
	assert.False(t, expiryCheckDue(rar, approvalSubject{gone: true}, requiredBy), "not when the subject is deleted: no workflow to name")
}
