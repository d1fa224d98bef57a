package integration

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/actions"
	"github.com/remedy-dev/remedy/test/harness"
	"github.com/remedy-dev/remedy/workflows"
)

// badRollout sets DEMO_MODE=crash on the Deployment's container, as the
// walkthrough's `kubectl set env` does, and waits until the controller has
// made the ReplicaSets of both revisions.
func badRollout(t *testing.T, ns, name string) {
	t.Helper()
	ctx := context.Background()
	var d appsv1.Deployment
	require.NoError(t, harness.Kube().Get(ctx, ctrlclient.ObjectKey{Namespace: ns, Name: name}, &d))
	before := d.DeepCopy()
	d.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "DEMO_MODE", Value: "crash"}}
	require.NoError(t, harness.Kube().Patch(ctx, &d, ctrlclient.MergeFrom(before)))
	waitRevisions(t, ns, 1, 2)
}

// waitRevisions waits until ns's ReplicaSets carry exactly the revisions want.
func waitRevisions(t *testing.T, ns string, want ...int) {
	t.Helper()
	var got []int
	require.Eventually(t, func() bool {
		var rss appsv1.ReplicaSetList
		require.NoError(t, harness.Kube().List(context.Background(), &rss, ctrlclient.InNamespace(ns)))
		got = nil
		for _, rs := range rss.Items {
			n, err := strconv.Atoi(rs.Annotations["deployment.kubernetes.io/revision"])
			if err == nil {
				got = append(got, n)
			}
		}
		return assert.ElementsMatch(new(testing.T), want, got)
	}, runTimeout, 100*time.Millisecond, "revisions %v, want %v", got, want)
}

func envOf(t *testing.T, ns, name string) []corev1.EnvVar {
	t.Helper()
	var d appsv1.Deployment
	require.NoError(t, harness.Kube().Get(context.Background(), ctrlclient.ObjectKey{Namespace: ns, Name: name}, &d))
	return d.Spec.Template.Spec.Containers[0].Env
}

func undoSpec(ns, name string) v1alpha1.KubernetesExecutionSpec {
	return v1alpha1.KubernetesExecutionSpec{Action: "rollout-undo", Target: target(ns, name), DryRun: true, RollbackWindow: v1alpha1.DurationOf(time.Hour)}
}

// A bad rollout is undone to the previous ReplicaSet's template through the
// gate; the rollback of the undo restores the bad template exactly, after
// the controller has renumbered the restored revision.
func TestRolloutUndoRestoresThePreviousTemplateAndRollsBack(t *testing.T) {
	ctx := context.Background()
	ns := harness.Namespace(t)
	harness.Deployment(t, ns, "web", 1)
	badRollout(t, ns, "web")

	k := createExecution(t, ns, "undo-web", undoSpec(ns, "web"))
	k = waitPhase(t, k, v1alpha1.PhaseRollbackReady)
	require.NotNil(t, k.Status.ValidationResults.DryRunResults)
	assert.True(t, k.Status.ValidationResults.DryRunResults.Success)
	assert.Equal(t, "template: revision 2 -> revision 1", k.Status.ValidationResults.DryRunResults.EstimatedImpact)
	assert.Equal(t, []v1alpha1.ResourceChange{{Kind: "Deployment", Namespace: ns, Name: "web", Action: "rollout undone",
		Before: "template: revision 2", After: "template: revision 1"}}, k.Status.ExecutionResults.ResourcesAffected)
	require.True(t, k.Status.RollbackInformation.Available)
	assert.Equal(t, "rollout-undo", k.Status.RollbackInformation.RollbackAction)
	assert.Equal(t, ptr.To[int64](2), k.Status.RollbackInformation.RollbackParameters.Revision)

	assert.Empty(t, envOf(t, ns, "web"), "the template of revision 1 is back")
	var d appsv1.Deployment
	require.NoError(t, harness.Kube().Get(ctx, ctrlclient.ObjectKey{Namespace: ns, Name: "web"}, &d))
	assert.NotEmpty(t, d.Annotations[v1alpha1.RolloutUndoneAtAnnotation])
	assert.NotContains(t, d.Spec.Template.Labels, "pod-template-hash")
	// The real controller takes the old ReplicaSet back as revision 3.
	waitRevisions(t, ns, 2, 3)

	require.NoError(t, harness.Temporal().SignalWorkflow(ctx, k.Status.WorkflowID, "", workflows.SignalRollback,
		workflows.RollbackRequest{Requester: "alice", Reason: "the undo was wrong"}))
	k = waitPhase(t, k, v1alpha1.PhaseCompleted)
	assert.Equal(t, v1alpha1.ReasonRolledBack, k.Status.Reason)
	require.Len(t, k.Status.ExecutionResults.ResourcesAffected, 2)
	assert.Equal(t, "template: revision 3", k.Status.ExecutionResults.ResourcesAffected[1].Before)
	assert.Equal(t, "template: revision 2", k.Status.ExecutionResults.ResourcesAffected[1].After)
	assert.Equal(t, []corev1.EnvVar{{Name: "DEMO_MODE", Value: "crash"}}, envOf(t, ns, "web"), "the rollback restores the undone template")
	require.NoError(t, harness.Kube().Get(ctx, ctrlclient.ObjectKey{Namespace: ns, Name: "web"}, &d))
	assert.NotContains(t, d.Annotations, v1alpha1.RolloutUndoneAtAnnotation, "the rollback takes the undo's marks away")
	assert.NotContains(t, d.Annotations, v1alpha1.RolloutRestoredAnnotation)
	waitRevisions(t, ns, 3, 4)
}

// A Deployment on its first revision has nothing to undo to: the run fails
// permanently with the reason, and writes nothing.
func TestRolloutUndoWithoutAPreviousRevisionIsRefused(t *testing.T) {
	ns := harness.Namespace(t)
	harness.Deployment(t, ns, "fresh", 1)
	waitRevisions(t, ns, 1)
	k := createExecution(t, ns, "undo-fresh", undoSpec(ns, "fresh"))
	k = waitPhase(t, k, v1alpha1.PhaseFailed)
	assert.Equal(t, v1alpha1.ReasonInvalidParameters, k.Status.Reason)
	assert.Contains(t, k.Status.Message, "nothing to undo: Deployment "+ns+"/fresh has no revision before its current revision 1 (its ReplicaSets hold revisions [1])")
	assert.Nil(t, k.Status.ExecutionResults, "nothing was executed")
	var d appsv1.Deployment
	require.NoError(t, harness.Kube().Get(context.Background(), ctrlclient.ObjectKey{Namespace: ns, Name: "fresh"}, &d))
	assert.NotContains(t, d.Annotations, v1alpha1.RolloutUndoneAtAnnotation)
}

// Admission refuses an undo of anything but a Deployment, and a requester
// without the grant; neither is ever run.
func TestRolloutUndoRefusedAtAdmission(t *testing.T) {
	ctx := context.Background()
	ns := harness.Namespace(t)
	harness.Deployment(t, ns, "web", 1)
	badRollout(t, ns, "web")

	sts := undoSpec(ns, "db")
	sts.Target.Kind = "StatefulSet"
	err := harness.Kube().Create(ctx, &v1alpha1.KubernetesExecution{ObjectMeta: metav1.ObjectMeta{Name: "undo-db", Namespace: ns}, Spec: sts})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "action rollout-undo supports target kind Deployment (apiVersion apps/v1) only")

	// May create executions, holds no execute grant and cannot patch the
	// Deployment itself: refused, and the bad template stays.
	grantRules(t, ns, "intern-ian", createExecutions, execute("restart"))
	err = impersonating(t, "intern-ian").Create(ctx, &v1alpha1.KubernetesExecution{ObjectMeta: metav1.ObjectMeta{Name: "undo-web", Namespace: ns}, Spec: undoSpec(ns, "web")})
	requireForbidden(t, err, `grant the verb "execute" on actions.remedy.dev/rollout-undo`)
	assert.Equal(t, []corev1.EnvVar{{Name: "DEMO_MODE", Value: "crash"}}, envOf(t, ns, "web"))

	// With the grant the same person's undo runs.
	grantRules(t, ns, "oncall-olga", createExecutions, execute("rollout-undo"))
	k := &v1alpha1.KubernetesExecution{ObjectMeta: metav1.ObjectMeta{Name: "undo-web", Namespace: ns}, Spec: undoSpec(ns, "web")}
	require.NoError(t, impersonating(t, "oncall-olga").Create(ctx, k))
	waitPhase(t, k, v1alpha1.PhaseRollbackReady)
	assert.Empty(t, envOf(t, ns, "web"))
}

// An undo never undoes an undo: while the Deployment runs the revision an
// undo restored, another would bring the crashing one back. A person's new
// rollout makes an undo an undo again.
func TestRolloutUndoDoesNotUndoAnUndo(t *testing.T) {
	ctx := context.Background()
	ns := harness.Namespace(t)
	harness.Deployment(t, ns, "web", 1)
	badRollout(t, ns, "web")
	first := undoSpec(ns, "web")
	first.RollbackWindow = v1alpha1.DurationOf(0)
	waitPhase(t, createExecution(t, ns, "undo-1", first), v1alpha1.PhaseCompleted)
	waitRevisions(t, ns, 2, 3)

	again := waitPhase(t, createExecution(t, ns, "undo-2", first), v1alpha1.PhaseFailed)
	assert.Equal(t, v1alpha1.ReasonInvalidParameters, again.Status.Reason)
	assert.Contains(t, again.Status.Message, "Deployment "+ns+"/web runs revision 3, which a rollout-undo restored")
	assert.Empty(t, envOf(t, ns, "web"), "the restored template stays")

	var d appsv1.Deployment
	require.NoError(t, harness.Kube().Get(ctx, ctrlclient.ObjectKey{Namespace: ns, Name: "web"}, &d))
	before := d.DeepCopy()
	d.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "DEMO_MODE", Value: "unready"}}
	require.NoError(t, harness.Kube().Patch(ctx, &d, ctrlclient.MergeFrom(before)))
	waitRevisions(t, ns, 2, 3, 4)
	third := harness.Eventually(t, createExecution(t, ns, "undo-3", first), runTimeout, func(k *v1alpha1.KubernetesExecution) bool {
		return k.Status.Phase == v1alpha1.PhaseCompleted || k.Status.Phase == v1alpha1.PhaseFailed
	})
	require.Equal(t, v1alpha1.PhaseCompleted, third.Status.Phase, third.Status.Message)
	assert.Equal(t, "template: revision 4 -> revision 3", actions.Impact(third.Status.ExecutionResults.ResourcesAffected[0]))
	assert.Empty(t, envOf(t, ns, "web"), "revision 3's template again")
}
