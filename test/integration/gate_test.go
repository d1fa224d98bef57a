package integration

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/reloadrule"
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
	require.Equal(t, v1alpha1.ReasonRolledBack, k.Status.Reason)
	harness.WaitClosed(t, k.Status.WorkflowID, runTimeout)
	require.Equal(t, int32(1), replicasOf(t, ns, "web"))

	in := workflows.ExecutionInput{Namespace: ns, Name: k.Name, UID: string(k.UID), Spec: k.Spec}
	for _, id := range []string{k.Status.WorkflowID, k.Status.WorkflowID + "-replayed"} {
		run, err := harness.Temporal().ExecuteWorkflow(ctx, client.StartWorkflowOptions{
			ID: id, TaskQueue: workflows.TaskQueue, WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		}, workflows.ExecutionWorkflow, in)
		require.NoError(t, err)
		var res workflows.ExecutionResult
		require.NoError(t, workflows.FinalResult(run.Get(ctx, &res), &res))
		assert.Equal(t, v1alpha1.PhaseFailed, res.Status.Phase, id)
		assert.Equal(t, "SubjectMismatch", res.Status.Reason, res.Status.Message)
	}
	assert.Equal(t, int32(1), replicasOf(t, ns, "web"), "the replayed starts scaled nothing")
	require.NoError(t, harness.Kube().Get(ctx, ctrlclient.ObjectKeyFromObject(k), k))
	assert.Equal(t, v1alpha1.ReasonRolledBack, k.Status.Reason, "the finished execution's status is its own run's")
}

// Every workflow type, started by someone who can reach Temporal for a
// subject that does not exist or has finished (under the subject's own
// workflow ID where Temporal allows it again), writes nothing: the
// Deployment keeps its replicas, generation and annotations, and no approval
// request appears. The drift workflow's rows are in test/drift (forged_test.go),
// whose suite runs the drift webhook.
func TestForgedStartsWriteNothing(t *testing.T) {
	ctx := context.Background()
	again := func(id string) client.StartWorkflowOptions {
		return client.StartWorkflowOptions{ID: id, TaskQueue: workflows.TaskQueue, WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE}
	}
	for _, tc := range []struct {
		name string
		// forge prepares a subject in ns and returns the forged start.
		forge func(t *testing.T, ns string) (client.StartWorkflowOptions, any, any)
	}{
		{"execution that does not exist", func(t *testing.T, ns string) (client.StartWorkflowOptions, any, any) {
			in := workflows.ExecutionInput{Namespace: ns, Name: "ghost", UID: "33333333-3333-3333-3333-333333333333", Spec: scaleSpec(ns, "web", 5)}
			return again(v1alpha1.ExecutionWorkflowID(ns, in.Name, in.UID)), workflows.ExecutionWorkflow, in
		}},
		{"execution that finished", func(t *testing.T, ns string) (client.StartWorkflowOptions, any, any) {
			k := waitPhase(t, createExecution(t, ns, "done", scaleSpec(ns, "web", 5)), v1alpha1.PhaseCompleted)
			harness.WaitClosed(t, k.Status.WorkflowID, runTimeout)
			in := workflows.ExecutionInput{Namespace: ns, Name: k.Name, UID: string(k.UID), Spec: k.Spec}
			return again(k.Status.WorkflowID), workflows.ExecutionWorkflow, in
		}},
		{"remediation that does not exist", func(t *testing.T, ns string) (client.StartWorkflowOptions, any, any) {
			in := workflows.RemediationInput{Namespace: ns, Name: "ghost", UID: "44444444-4444-4444-4444-444444444444",
				Spec: v1alpha1.RemediationRequestSpec{Steps: []v1alpha1.RemediationStep{{Name: "scale", Execution: scaleSpec(ns, "web", 5)}}}}
			return again(v1alpha1.RemediationWorkflowID(ns, in.Name, in.UID)), workflows.RemediationWorkflow, in
		}},
		{"remediation that finished", func(t *testing.T, ns string) (client.StartWorkflowOptions, any, any) {
			rr := &v1alpha1.RemediationRequest{ObjectMeta: metav1.ObjectMeta{Name: "done", Namespace: ns}, Spec: v1alpha1.RemediationRequestSpec{
				Steps: []v1alpha1.RemediationStep{{Name: "scale", Execution: scaleSpec(ns, "web", 5)}}}}
			require.NoError(t, harness.Kube().Create(ctx, rr))
			rr = harness.Eventually(t, rr, runTimeout, func(rr *v1alpha1.RemediationRequest) bool { return rr.Status.Phase == v1alpha1.PhaseCompleted })
			harness.WaitClosed(t, rr.Status.WorkflowID, runTimeout)
			in := workflows.RemediationInput{Namespace: ns, Name: rr.Name, UID: string(rr.UID), Spec: rr.Spec}
			return again(rr.Status.WorkflowID), workflows.RemediationWorkflow, in
		}},
		{"reload of a workload no policy selects", func(t *testing.T, ns string) (client.StartWorkflowOptions, any, any) {
			in := workflows.ReloadInput{Namespace: ns, Kind: "Deployment", Name: "web", Policy: "reload"}
			in.Pending = []reloadrule.ConfigChange{{ConfigMap: "app", Hash: "chosen-by-the-caller"}}
			return again(v1alpha1.ReloadWorkflowID(ns, "Deployment", "web")), workflows.ReloadWorkflow, in
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := harness.Namespace(t)
			web := harness.Deployment(t, ns, "web", 1)
			opts, wf, in := tc.forge(t, ns)
			// What a finished run did is undone, so a replayed write would show.
			require.NoError(t, harness.Kube().Patch(ctx, web, ctrlclient.RawPatch(types.MergePatchType, []byte(`{"spec":{"replicas":1}}`))))
			// The Deployment controller's own annotation first, so only a write of Remedy's would show.
			before := harness.Eventually(t, web, runTimeout, func(d *appsv1.Deployment) bool {
				return d.Annotations["deployment.kubernetes.io/revision"] != ""
			}).DeepCopy()

			run, err := harness.Temporal().ExecuteWorkflow(ctx, opts, wf, in)
			require.NoError(t, err)
			_ = run.Get(ctx, nil) // a refused subject ends the run, as a failed phase or an error
			require.NoError(t, harness.Kube().Get(ctx, ctrlclient.ObjectKeyFromObject(web), web))
			assert.Equal(t, int32(1), *web.Spec.Replicas, "not scaled")
			assert.Equal(t, before.Generation, web.Generation, "the spec is unchanged")
			assert.Equal(t, before.Annotations, web.Annotations, "no annotation written")
			assert.Empty(t, web.Spec.Template.Annotations, "no restart")
			var rars v1alpha1.RemediationApprovalRequestList
			require.NoError(t, harness.Kube().List(ctx, &rars, ctrlclient.InNamespace(ns)))
			assert.Empty(t, rars.Items, "no approval request")
		})
	}
}
