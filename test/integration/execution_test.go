package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/temporal"
	appsv1 "k8s.io/api/apps/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/actions"
	"github.com/remedy-dev/remedy/test/harness"
	"github.com/remedy-dev/remedy/workflows"
)

const runTimeout = 30 * time.Second

func target(ns, name string) v1alpha1.ObjectRef {
	return v1alpha1.ObjectRef{APIVersion: "apps/v1", Kind: "Deployment", Namespace: ns, Name: name}
}

func createExecution(t *testing.T, ns, name string, spec v1alpha1.KubernetesExecutionSpec) *v1alpha1.KubernetesExecution {
	t.Helper()
	k := &v1alpha1.KubernetesExecution{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: spec}
	require.NoError(t, harness.Kube().Create(context.Background(), k))
	return k
}

func waitPhase(t *testing.T, k *v1alpha1.KubernetesExecution, phase v1alpha1.Phase) *v1alpha1.KubernetesExecution {
	t.Helper()
	return harness.Eventually(t, k, runTimeout, func(k *v1alpha1.KubernetesExecution) bool { return k.Status.Phase == phase })
}

func TestScaleCompletesWithRollbackWindow(t *testing.T) {
	ctx := context.Background()
	ns := harness.Namespace(t)
	harness.Deployment(t, ns, "web", 1)
	k := createExecution(t, ns, "scale-web", v1alpha1.KubernetesExecutionSpec{
		Action: "scale", Target: target(ns, "web"),
		Parameters:     &v1alpha1.ActionParameters{Replicas: ptr.To[int32](3)},
		DryRun:         true,
		RollbackWindow: v1alpha1.DurationOf(2 * time.Second),
	})

	k = waitPhase(t, k, v1alpha1.PhaseRollbackReady)
	assert.Equal(t, v1alpha1.ExecutionWorkflowID(ns, "scale-web", string(k.UID)), k.Status.WorkflowID)
	require.NotNil(t, k.Status.RollbackInformation)
	assert.True(t, k.Status.RollbackInformation.Available)
	assert.Equal(t, "scale", k.Status.RollbackInformation.RollbackAction)
	assert.Equal(t, int32(1), *k.Status.RollbackInformation.RollbackParameters.Replicas)

	k = waitPhase(t, k, v1alpha1.PhaseCompleted)
	assert.Equal(t, v1alpha1.ReasonSucceeded, k.Status.Reason)
	vr := k.Status.ValidationResults
	require.NotNil(t, vr)
	assert.Equal(t, ptr.To(true), vr.ParameterValidation)
	assert.Equal(t, ptr.To(true), vr.ResourceExists)
	require.NotNil(t, vr.DryRunResults)
	assert.True(t, vr.DryRunResults.Success)
	assert.Equal(t, "replicas: 1 -> 3", vr.DryRunResults.EstimatedImpact)
	require.NotNil(t, k.Status.ExecutionResults)
	assert.Equal(t, []v1alpha1.ResourceChange{{Kind: "Deployment", Namespace: ns, Name: "web", Action: "scaled", Before: "replicas: 1", After: "replicas: 3"}},
		k.Status.ExecutionResults.ResourcesAffected)
	assert.NotNil(t, k.Status.ExecutionResults.StartTime)
	assert.True(t, k.Status.RollbackInformation.Available, "rollback information is kept after the window")
	ready := findCondition(k.Status.Conditions, v1alpha1.ConditionReady)
	require.NotNil(t, ready)
	assert.Equal(t, metav1.ConditionTrue, ready.Status)
	assert.Equal(t, k.Generation, k.Status.ObservedGeneration)

	var d appsv1.Deployment
	require.NoError(t, harness.Kube().Get(ctx, ctrlclient.ObjectKey{Namespace: ns, Name: "web"}, &d))
	assert.Equal(t, int32(3), *d.Spec.Replicas)
	// The real deployment controller follows: the ReplicaSet is scaled too.
	harness.Eventually(t, &d, runTimeout, func(d *appsv1.Deployment) bool {
		return d.Status.ObservedGeneration == d.Generation && d.Status.Replicas == 3
	})

	assertEvents(t, ns, "scale-web", "Started", "Validating", "Executing", "RollbackReady", "Completed")

	// The run is findable the way the README tells people to find it in the
	// Web UI. The pushed status can be ahead of Temporal's visibility store.
	assert.Eventually(t, func() bool {
		resp, err := harness.Temporal().ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Query: fmt.Sprintf("RemedyKind='KubernetesExecution' AND WorkflowId='%s' AND RemedyPhase='Completed'", k.Status.WorkflowID),
		})
		require.NoError(t, err)
		return len(resp.Executions) == 1
	}, 10*time.Second, 100*time.Millisecond)
	harness.ReplayHistory(t, k.Status.WorkflowID, "execution-scale-window-closed.json")
}

func TestRestartCompletes(t *testing.T) {
	ctx := context.Background()
	ns := harness.Namespace(t)
	harness.Deployment(t, ns, "api", 1)
	// Created from YAML as kubectl would, so the CRD's defaults fill the spec
	// and the operator's writes must leave that spec byte-for-byte alone.
	manifest := decode(t, []byte(`
apiVersion: remedy.dev/v1alpha1
kind: KubernetesExecution
metadata: {name: restart-api, namespace: `+ns+`}
spec:
  action: restart
  target: {apiVersion: apps/v1, kind: Deployment, namespace: `+ns+`, name: api}
`))[0]
	require.NoError(t, harness.Kube().Create(ctx, manifest))
	k := waitPhase(t, &v1alpha1.KubernetesExecution{ObjectMeta: metav1.ObjectMeta{Name: "restart-api", Namespace: ns}}, v1alpha1.PhaseCompleted)
	assert.Equal(t, "5m", manifest.Object["spec"].(map[string]any)["timeout"], "CRD default applied")
	assert.Equal(t, ptr.To(v1alpha1.Duration("1h")), k.Spec.RollbackWindow)
	require.NotNil(t, k.Status.RollbackInformation)
	assert.False(t, k.Status.RollbackInformation.Available)

	var d appsv1.Deployment
	require.NoError(t, harness.Kube().Get(ctx, ctrlclient.ObjectKey{Namespace: ns, Name: "api"}, &d))
	got := d.Spec.Template.Annotations[v1alpha1.RestartedAtAnnotation]
	require.NotEmpty(t, got)
	assert.Equal(t, v1alpha1.RestartedAtAnnotation+": "+got, k.Status.ExecutionResults.ResourcesAffected[0].After)
	harness.ReplayHistory(t, k.Status.WorkflowID, "execution-restart.json")
}

func TestMissingTargetFailsNotFound(t *testing.T) {
	ns := harness.Namespace(t)
	k := createExecution(t, ns, "scale-ghost", v1alpha1.KubernetesExecutionSpec{
		Action: "scale", Target: target(ns, "ghost"), Parameters: &v1alpha1.ActionParameters{Replicas: ptr.To[int32](2)},
	})
	k = waitPhase(t, k, v1alpha1.PhaseFailed)
	assert.Equal(t, "NotFound", k.Status.Reason)
	assert.Contains(t, k.Status.Message, `"ghost" not found`)
	assert.Equal(t, ptr.To(false), k.Status.ValidationResults.ResourceExists)
	assert.Nil(t, k.Status.ExecutionResults, "nothing was executed")
	ready := findCondition(k.Status.Conditions, v1alpha1.ConditionReady)
	require.NotNil(t, ready)
	assert.Equal(t, metav1.ConditionFalse, ready.Status)
	assertEvents(t, ns, "scale-ghost", "Failed")
	harness.ReplayHistory(t, k.Status.WorkflowID, "execution-not-found.json")
}

// The restart action's ServiceAccount loses "patch": the API server's RBAC,
// asked by SubjectAccessReview, refuses it during validation, and the run fails
// Forbidden before anything is read or written.
func TestMissingPermissionFailsForbidden(t *testing.T) {
	ctx := context.Background()
	var role rbacv1.ClusterRole
	require.NoError(t, harness.Kube().Get(ctx, ctrlclient.ObjectKey{Name: actions.ServiceAccountName("restart")}, &role))
	original := role.DeepCopy()
	role.Rules = []rbacv1.PolicyRule{{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"get"}}}
	require.NoError(t, harness.Kube().Update(ctx, &role))
	t.Cleanup(func() {
		var cur rbacv1.ClusterRole
		require.NoError(t, harness.Kube().Get(ctx, ctrlclient.ObjectKey{Name: original.Name}, &cur))
		cur.Rules = original.Rules
		require.NoError(t, harness.Kube().Update(ctx, &cur))
	})

	ns := harness.Namespace(t)
	harness.Deployment(t, ns, "locked", 1)
	k := createExecution(t, ns, "restart-locked", v1alpha1.KubernetesExecutionSpec{Action: "restart", Target: target(ns, "locked")})
	k = waitPhase(t, k, v1alpha1.PhaseFailed)
	assert.Equal(t, "Forbidden", k.Status.Reason)
	assert.Equal(t, "RBAC: system:serviceaccount:remedy-system:remedy-action-restart may not patch deployments.apps in namespace "+ns+
		"; grant it in the ClusterRole remedy-action-restart", k.Status.Message)
	assert.Equal(t, ptr.To(false), k.Status.ValidationResults.RBACValidation)
	assert.Nil(t, k.Status.ValidationResults.ResourceExists, "validation stopped before reading the target")

	var d appsv1.Deployment
	require.NoError(t, harness.Kube().Get(ctx, ctrlclient.ObjectKey{Namespace: ns, Name: "locked"}, &d))
	assert.Empty(t, d.Spec.Template.Annotations[v1alpha1.RestartedAtAnnotation])
	harness.ReplayHistory(t, k.Status.WorkflowID, "execution-forbidden.json")
}

func TestRollbackSignalRestoresReplicas(t *testing.T) {
	ctx := context.Background()
	ns := harness.Namespace(t)
	harness.Deployment(t, ns, "cart", 2)
	k := createExecution(t, ns, "scale-cart", v1alpha1.KubernetesExecutionSpec{
		Action: "scale", Target: target(ns, "cart"),
		Parameters:     &v1alpha1.ActionParameters{Replicas: ptr.To[int32](5)},
		RollbackWindow: v1alpha1.DurationOf(time.Hour),
	})
	k = waitPhase(t, k, v1alpha1.PhaseRollbackReady)
	require.NoError(t, harness.Temporal().SignalWorkflow(ctx, k.Status.WorkflowID, "", workflows.SignalRollback,
		workflows.RollbackRequest{Requester: "alice", Reason: "latency went up"}))

	k = waitPhase(t, k, v1alpha1.PhaseCompleted)
	assert.Equal(t, v1alpha1.ReasonRolledBack, k.Status.Reason)
	require.Len(t, k.Status.ExecutionResults.ResourcesAffected, 2)
	assert.Equal(t, "rolled back", k.Status.ExecutionResults.ResourcesAffected[1].Action)
	assert.Equal(t, "replicas: 2", k.Status.ExecutionResults.ResourcesAffected[1].After)
	var d appsv1.Deployment
	require.NoError(t, harness.Kube().Get(ctx, ctrlclient.ObjectKey{Namespace: ns, Name: "cart"}, &d))
	assert.Equal(t, int32(2), *d.Spec.Replicas)
	harness.ReplayHistory(t, k.Status.WorkflowID, "execution-scale-rolled-back.json")
}

func TestDeletingARunningExecutionCancelsItsWorkflow(t *testing.T) {
	ctx := context.Background()
	ns := harness.Namespace(t)
	harness.Deployment(t, ns, "web", 1)
	k := createExecution(t, ns, "scale-then-delete", v1alpha1.KubernetesExecutionSpec{
		Action: "scale", Target: target(ns, "web"), Parameters: &v1alpha1.ActionParameters{Replicas: ptr.To[int32](2)},
		RollbackWindow: v1alpha1.DurationOf(time.Hour),
	})
	k = waitPhase(t, k, v1alpha1.PhaseRollbackReady)
	id := k.Status.WorkflowID
	require.NoError(t, harness.Kube().Delete(ctx, k))

	harness.WaitClosed(t, id, runTimeout)
	err := harness.Kube().Get(ctx, ctrlclient.ObjectKeyFromObject(k), k)
	assert.True(t, ctrlclient.IgnoreNotFound(err) == nil && err != nil, "execution is gone once its workflow is canceled")
	var res workflows.ExecutionResult
	err = harness.Temporal().GetWorkflow(ctx, id, "").Get(ctx, &res)
	var canceled *temporal.CanceledError
	require.ErrorAs(t, err, &canceled, "the workflow closed canceled")
	require.NoError(t, workflows.FinalResult(err, &res))
	assert.Equal(t, v1alpha1.ReasonCanceled, res.Status.Reason, res.Status.Message)
	harness.ReplayHistory(t, id, "execution-canceled.json")
}

// The target is deleted during the rollback window: the rollback the signal
// asks for cannot be made, and the run ends RollbackFailed.
func TestRollbackOfADeletedTargetFails(t *testing.T) {
	ctx := context.Background()
	ns := harness.Namespace(t)
	d := harness.Deployment(t, ns, "cart", 2)
	spec := scaleSpec(ns, "cart", 4)
	spec.RollbackWindow = v1alpha1.DurationOf(time.Hour)
	k := waitPhase(t, createExecution(t, ns, "scale-gone", spec), v1alpha1.PhaseRollbackReady)
	require.NoError(t, harness.Kube().Delete(ctx, d))
	require.NoError(t, harness.Temporal().SignalWorkflow(ctx, k.Status.WorkflowID, "", workflows.SignalRollback,
		workflows.RollbackRequest{Requester: "alice", Reason: "undo"}))

	k = waitPhase(t, k, v1alpha1.PhaseFailed)
	assert.Equal(t, v1alpha1.ReasonRollbackFailed, k.Status.Reason)
	assert.Contains(t, k.Status.Message, `"cart" not found`)
	harness.ReplayHistory(t, k.Status.WorkflowID, "execution-rollback-failed.json")
}

func findCondition(cs []metav1.Condition, t string) *metav1.Condition {
	for i := range cs {
		if cs[i].Type == t {
			return &cs[i]
		}
	}
	return nil
}

// assertEvents waits until the object has an Event for every wanted reason.
func assertEvents(t *testing.T, ns, name string, want ...string) {
	t.Helper()
	var missing []string
	seen := map[string]bool{}
	ok := assert.Eventually(t, func() bool {
		var list eventsv1.EventList
		require.NoError(t, harness.Kube().List(context.Background(), &list, ctrlclient.InNamespace(ns)))
		for _, e := range list.Items {
			if e.Regarding.Name == name {
				seen[e.Reason] = true
			}
		}
		missing = missing[:0]
		for _, w := range want {
			if !seen[w] {
				missing = append(missing, w)
			}
		}
		return len(missing) == 0
	}, 5*time.Second, 100*time.Millisecond)
	if !ok {
		require.Failf(t, "missing events", "%s/%s has no Event with reason %v (seen %v)", ns, name, missing, seen)
	}
}
