package integration

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/operator"
	"github.com/remedy-dev/remedy/test/harness"
	"github.com/remedy-dev/remedy/workflows"
)

// A rollback asked for after the window gets an answer on the execution: the
// workflow is closed, so Temporal refuses the signal, and the annotation
// leaves a Warning Event and a RollbackRequest condition saying when the
// window closed.
func TestLateRollbackAnnotationLeavesAnEvent(t *testing.T) {
	ctx := context.Background()
	ns := harness.Namespace(t)
	harness.Deployment(t, ns, "web", 1)
	k := createExecution(t, ns, "scale-late", v1alpha1.KubernetesExecutionSpec{
		Action: "scale", Target: target(ns, "web"), Parameters: &v1alpha1.ActionParameters{Replicas: ptr.To[int32](2)},
		RollbackWindow: v1alpha1.DurationOf(time.Second),
	})
	k = waitPhase(t, k, v1alpha1.PhaseCompleted)
	harness.WaitClosed(t, k.Status.WorkflowID, runTimeout)
	closedAt := k.Status.PhaseTransitions[len(k.Status.PhaseTransitions)-1].Time.UTC().Format(time.RFC3339)

	err := harness.Temporal().SignalWorkflow(ctx, k.Status.WorkflowID, "", workflows.SignalRollback, workflows.RollbackRequest{Requester: "alice"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "workflow execution already completed")

	before := k.DeepCopy()
	k.Annotations = map[string]string{operator.RollbackAnnotation: "errors up"}
	require.NoError(t, harness.Kube().Patch(ctx, k, ctrlclient.MergeFrom(before)))
	k = harness.Eventually(t, k, runTimeout, func(k *v1alpha1.KubernetesExecution) bool {
		return meta.FindStatusCondition(k.Status.Conditions, operator.ConditionRollbackRequest) != nil
	})
	c := meta.FindStatusCondition(k.Status.Conditions, operator.ConditionRollbackRequest)
	assert.Equal(t, metav1.ConditionFalse, c.Status)
	assert.Equal(t, "rollback requested after the window closed at "+closedAt+
		`; the run has ended Completed (Succeeded), so nothing was rolled back (annotation remedy.dev/rollback="errors up")`, c.Message)
	assert.Equal(t, v1alpha1.PhaseCompleted, k.Status.Phase)
	assertEvents(t, ns, k.Name, "RollbackTooLate")
}

// The typo: `approve` for `approved` used to record a rejection.
// Through the real temporal CLI and server, it is refused with the field's
// name and leaves no trace; so is a decide without `approved`. A signal with
// a misspelled field cannot be refused, and is ignored.
func TestMisspelledDecideIsRefused(t *testing.T) {
	ns := harness.Namespace(t)
	k, rar := awaitingApproval(t, ns, "scale-typo", time.Hour, 0)
	id := k.Status.WorkflowID
	before := settledHistoryLength(t, id)

	out, err := temporalCLIAs(t, ns, "alice", "workflow", "update", "execute", "--workflow-id", id, "--name", "decide", "--input", `{"approve":true,"approver":"alice"}`)
	require.Error(t, err, out)
	assert.Contains(t, out, `unknown field \"approve\"`)
	out, err = temporalCLIAs(t, ns, "alice", "workflow", "update", "execute", "--workflow-id", id, "--name", "decide", "--input", `{"approver":"alice"}`)
	require.Error(t, err, out)
	assert.Contains(t, out, `\"approved\" is required: true approves, false rejects`)
	assert.Equal(t, before, historyLength(t, id), "refused updates leave no trace in history")
	assert.Equal(t, v1alpha1.PhaseWaitingApproval, queryPhase(t, id))

	// Without "request" spelled right this would approve whichever request is open.
	out, err = temporalCLIAs(t, ns, "mallory", "workflow", "signal", "--workflow-id", id, "--name", "approve", "--input", `{"approver":"mallory","requst":"other"}`)
	require.NoError(t, err, out)
	out, err = temporalCLIAs(t, ns, "alice", "workflow", "update", "execute", "--workflow-id", id, "--name", "decide", "--input", `{"approved":true,"approver":"alice"}`)
	require.NoError(t, err, out)
	k = waitPhase(t, k, v1alpha1.PhaseCompleted)
	assert.Equal(t, v1alpha1.ReasonSucceeded, k.Status.Reason)
	require.NoError(t, harness.Kube().Get(context.Background(), ctrlclient.ObjectKeyFromObject(rar), rar))
	assert.Equal(t, "alice", rar.Status.DecidedBy, "the malformed signal was ignored")
	assert.Equal(t, v1alpha1.DecidedViaUpdate, rar.Status.DecidedVia)
	harness.ReplayHistory(t, id, "execution-approval-malformed-signal.json")
}

// A request the operator closed (its subject ended: Canceled) refuses a
// kubectl decision instead of storing it beside Canceled.
func TestDecisionOnCanceledRequestIsRefused(t *testing.T) {
	ctx := context.Background()
	ns := harness.Namespace(t)
	grant(t, ns, "carol", "approve")
	ghost := v1alpha1.ObjectRef{APIVersion: v1alpha1.GroupVersion.String(), Kind: "KubernetesExecution", Namespace: ns, Name: "ghost"}
	rar := &v1alpha1.RemediationApprovalRequest{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ghost-approval"},
		Spec: v1alpha1.RemediationApprovalRequestSpec{SubjectRef: ghost, WorkflowID: v1alpha1.ExecutionWorkflowID(ns, "ghost", "gone"),
			RequiredBy:      metav1.NewTime(time.Now().Add(time.Hour)),
			ApprovalContext: v1alpha1.ApprovalContext{Reason: "test", Action: "scale", Target: target(ns, "web")}},
	}
	require.NoError(t, asWorker(t).Create(ctx, rar))
	rar = harness.Eventually(t, rar, runTimeout, func(r *v1alpha1.RemediationApprovalRequest) bool {
		c := meta.FindStatusCondition(r.Status.Conditions, v1alpha1.ConditionReady)
		return c != nil && c.Reason == "Canceled"
	})

	err := impersonating(t, "carol").Status().Patch(ctx, rar.DeepCopy(), decisionPatch("Approved", "ship it", ""))
	require.Error(t, err)
	assert.True(t, apierrors.IsConflict(err), "want 409, got %v", err)
	assert.Contains(t, err.Error(), "RemediationApprovalRequest "+ns+"/ghost-approval is closed (Canceled: subject ghost ended before a decision; nothing will be executed): it accepts no decision")
	require.NoError(t, harness.Kube().Get(ctx, ctrlclient.ObjectKeyFromObject(rar), rar))
	assert.Empty(t, rar.Status.Decision)
	assert.Nil(t, rar.Status.RequestedDecision)
}
