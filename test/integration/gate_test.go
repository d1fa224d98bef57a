package integration

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/test/harness"
	"github.com/remedy-dev/remedy/workflows"
)

// A run waits for approval; meanwhile its requester loses the grant, or the
// namespace is protected. The approval arrives, and the write gate, asked
// immediately before the write, refuses it: the wait carried no authorization.
func TestWaitCarriesNoStaleAuthorization(t *testing.T) {
	for _, tc := range []struct {
		name            string
		revoke, protect bool
		reason          string
	}{
		{"grant revoked", true, false, "Forbidden"},
		{"namespace protected", false, true, "ProtectedNamespace"},
		{"both", true, true, "Forbidden"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			ns := harness.Namespace(t)
			harness.Deployment(t, ns, "web", 1)
			grantRules(t, ns, "oncall-rita", createExecutions, execute("scale"))
			k := &v1alpha1.KubernetesExecution{ObjectMeta: metav1.ObjectMeta{Name: "scale-web", Namespace: ns}, Spec: v1alpha1.KubernetesExecutionSpec{
				Action: "scale", Target: target(ns, "web"), Parameters: &v1alpha1.ActionParameters{Replicas: ptr.To[int32](4)},
				Approval: &v1alpha1.ApprovalSpec{Required: true},
			}}
			require.NoError(t, impersonating(t, "oncall-rita").Create(ctx, k))
			k = waitPhase(t, k, v1alpha1.PhaseWaitingApproval)

			if tc.revoke {
				require.NoError(t, harness.Kube().Delete(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "trust-oncall-rita", Namespace: ns}}))
			}
			if tc.protect {
				nsObj := &corev1.Namespace{}
				require.NoError(t, harness.Kube().Get(ctx, ctrlclient.ObjectKey{Name: ns}, nsObj))
				nsObj.Labels["remedy.dev/protected"] = "true"
				require.NoError(t, harness.Kube().Update(ctx, nsObj))
			}
			require.NoError(t, harness.Temporal().SignalWorkflow(ctx, k.Status.WorkflowID, "", workflows.SignalApprove,
				map[string]string{"approver": "alice", "reason": "looks fine"}))

			k = waitPhase(t, k, v1alpha1.PhaseFailed)
			assert.Equal(t, tc.reason, k.Status.Reason, k.Status.Message)
			assert.Contains(t, k.Status.Message, "scale")
			assert.Equal(t, int32(1), replicasOf(t, ns, "web"), "nothing was scaled")
		})
	}
}

// Someone who can reach Temporal starts an execution's workflow again, with
// the UID and spec of an execution that finished and was rolled back long
// ago, under its own ID (the run is closed, so Temporal allows it) or
// another: the run refuses its subject and the Deployment keeps the
// rolled-back replicas.
func TestReplayedStartOfAFinishedExecutionDoesNothing(t *testing.T) {
	ctx := context.Background()
	ns := harness.Namespace(t)
	k := rollbackReady(t, ns, "scale", 3, time.Minute)
	require.NoError(t, harness.Temporal().SignalWorkflow(ctx, k.Status.WorkflowID, "", workflows.SignalRollback,
		workflows.RollbackRequest{Requester: "admin", Reason: "undo"}))
	k = waitPhase(t, k, v1alpha1.PhaseCompleted)
	require.Equal(t, workflows.ReasonRolledBack, k.Status.Reason)
	harness.WaitClosed(t, k.Status.WorkflowID, runTimeout)
	require.Equal(t, int32(1), replicasOf(t, ns, "web"))

	in := workflows.ExecutionInput{Namespace: ns, Name: k.Name, UID: string(k.UID), Spec: k.Spec}
	for _, id := range []string{k.Status.WorkflowID, k.Status.WorkflowID + "-replayed"} {
		run, err := harness.Temporal().ExecuteWorkflow(ctx, client.StartWorkflowOptions{
			ID: id, TaskQueue: workflows.TaskQueue, WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		}, workflows.ExecutionWorkflow, in)
		require.NoError(t, err)
		var res workflows.ExecutionResult
		require.NoError(t, run.Get(ctx, &res))
		assert.Equal(t, v1alpha1.PhaseFailed, res.Status.Phase, id)
		assert.Equal(t, "SubjectMismatch", res.Status.Reason, res.Status.Message)
	}
	assert.Equal(t, int32(1), replicasOf(t, ns, "web"), "the replayed starts scaled nothing")
	require.NoError(t, harness.Kube().Get(ctx, ctrlclient.ObjectKeyFromObject(k), k))
	assert.Equal(t, workflows.ReasonRolledBack, k.Status.Reason, "the finished execution's status is its own run's")
}
