package status

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/remedy-dev/remedy/activities/gate"
	"github.com/remedy-dev/remedy/activities/internal/activitytest"
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

// TestStatusPushOnlyFromTheOwnRun: a status is stored only from the run the
// object records; another run's push, even with a newer sequence, writes
// nothing, and an unrecorded run is retried.
func TestStatusPushOnlyFromTheOwnRun(t *testing.T) {
	defer func(d time.Duration) { gate.RunRecordWait = d }(gate.RunRecordWait)
	gate.RunRecordWait = 200 * time.Millisecond
	s := runtime.NewScheme()
	require.NoError(t, v1alpha1.AddToScheme(s))
	for _, tc := range []struct {
		name, workflowID, runID string
		// want: "" written, "retry" a retryable refusal, else the permanent reason.
		want string
	}{
		{"the recorded run", activitytest.TestWorkflowID, activitytest.TestRunID, ""},
		{"another run of the same workflow ID", activitytest.TestWorkflowID, "the-closed-run", v1alpha1.ReasonSubjectMismatch},
		{"another workflow", "kexec/shop/x/u1", activitytest.TestRunID, v1alpha1.ReasonSubjectMismatch},
		{"a run not recorded yet", activitytest.TestWorkflowID, "", "retry"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cur := v1alpha1.KubernetesExecutionStatus{Phase: v1alpha1.PhaseCompleted, Sequence: 3, WorkflowID: tc.workflowID, RunID: tc.runID}
			k := &v1alpha1.KubernetesExecution{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "x", UID: "u1"}, Status: cur}
			c := fake.NewClientBuilder().WithScheme(s).WithObjects(k).WithStatusSubresource(k).Build()
			st := &Statuses{Client: c, Kube: kubefake.NewClientset()}
			var suite testsuite.WorkflowTestSuite
			env := suite.NewTestActivityEnvironment()
			env.RegisterActivity(st)
			pushed := pushedStatus(9, v1alpha1.PhaseRollbackReady)
			_, err := env.ExecuteActivity(st.PushExecutionStatus, ExecutionStatusPush{Namespace: "shop", Name: "x", UID: "u1", Action: "scale", Status: pushed})
			var got v1alpha1.KubernetesExecution
			require.NoError(t, c.Get(t.Context(), ctrlclient.ObjectKeyFromObject(k), &got))
			if tc.want == "" {
				require.NoError(t, err)
				assert.Equal(t, v1alpha1.PhaseRollbackReady, got.Status.Phase)
				assert.Equal(t, tc.runID, got.Status.RunID, "the recorded run stays")
				return
			}
			var app *temporal.ApplicationError
			require.ErrorAs(t, err, &app)
			assert.Equal(t, tc.want != "retry", app.NonRetryable())
			if tc.want != "retry" {
				assert.Equal(t, tc.want, app.Type())
			}
			assert.Equal(t, cur.Phase, got.Status.Phase, "nothing written")
			assert.Equal(t, cur.Sequence, got.Status.Sequence)
		})
	}
}

// TestStatusPushFromTheKeptCopy: a run's pushes after its first start from
// what the last one wrote, with no read; a write by anyone else since makes
// the copy's update conflict, and the push is redone from a live read that
// keeps the other write; a copy that would refuse is never believed.
func TestStatusPushFromTheKeptCopy(t *testing.T) {
	k := &v1alpha1.KubernetesExecution{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "x", UID: "u1"},
		Status: v1alpha1.KubernetesExecutionStatus{Phase: v1alpha1.PhasePending, WorkflowID: activitytest.TestWorkflowID, RunID: activitytest.TestRunID}}
	c, gets := activitytest.CountingClient(t, k)
	seen := gate.NewSeen(8)
	st := &Statuses{Client: c, Kube: kubefake.NewClientset(), Seen: seen}
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(st)
	push := func(seq int64, phase v1alpha1.Phase) {
		t.Helper()
		_, err := env.ExecuteActivity(st.PushExecutionStatus, ExecutionStatusPush{Namespace: "shop", Name: "x", UID: "u1", Action: "scale", Status: pushedStatus(seq, phase)})
		require.NoError(t, err)
		var got v1alpha1.KubernetesExecution
		require.NoError(t, c.Get(t.Context(), ctrlclient.ObjectKeyFromObject(k), &got))
		gets.Add(-1)
		require.Equal(t, phase, got.Status.Phase)
	}
	push(1, v1alpha1.PhaseValidating)
	assert.Equal(t, int32(1), gets.Load(), "the first push reads the object")
	push(2, v1alpha1.PhaseExecuting)
	assert.Equal(t, int32(1), gets.Load(), "the next starts from what the first wrote")

	// Someone else writes the status since: the copy is old.
	var other v1alpha1.KubernetesExecution
	require.NoError(t, c.Get(t.Context(), ctrlclient.ObjectKeyFromObject(k), &other))
	gets.Add(-1)
	other.Status.Conditions = append(other.Status.Conditions, metav1.Condition{Type: "Other", Status: metav1.ConditionTrue, Reason: "Other", LastTransitionTime: metav1.Now()})
	require.NoError(t, c.Status().Update(t.Context(), &other))
	push(3, v1alpha1.PhaseVerifying)
	assert.Equal(t, int32(2), gets.Load(), "the conflict was redone from a live read")
	var got v1alpha1.KubernetesExecution
	require.NoError(t, c.Get(t.Context(), ctrlclient.ObjectKeyFromObject(k), &got))
	gets.Add(-1)
	assert.NotNil(t, meta.FindStatusCondition(got.Status.Conditions, "Other"), "the other write stays")

	// A copy naming another run is not believed: the live object decides.
	forged := got.DeepCopy()
	forged.Status.RunID = "another-run"
	forged.ResourceVersion = "999999"
	seen.Put(forged)
	push(4, v1alpha1.PhaseCompleted)
	assert.Equal(t, int32(3), gets.Load(), "read live")
}
