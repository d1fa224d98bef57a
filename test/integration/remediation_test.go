package integration

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/image"
	"github.com/remedy-dev/remedy/internal/release"
	"github.com/remedy-dev/remedy/test/harness"
)

func createRemediation(t *testing.T, ns, name string, steps ...v1alpha1.RemediationStep) *v1alpha1.RemediationRequest {
	t.Helper()
	rr := &v1alpha1.RemediationRequest{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1alpha1.RemediationRequestSpec{Steps: steps, RollbackPolicy: v1alpha1.RollbackOnRequiredPostConditionFailure}}
	require.NoError(t, harness.Kube().Create(context.Background(), rr))
	return rr
}

func stepExecution(t *testing.T, ns, name string) *v1alpha1.KubernetesExecution {
	t.Helper()
	var k v1alpha1.KubernetesExecution
	require.NoError(t, harness.Kube().Get(context.Background(), ctrlclient.ObjectKey{Namespace: ns, Name: name}, &k))
	return &k
}

func imageOf(t *testing.T, ns, name string) string {
	t.Helper()
	var d appsv1.Deployment
	require.NoError(t, harness.Kube().Get(context.Background(), ctrlclient.ObjectKey{Namespace: ns, Name: name}, &d))
	return d.Spec.Template.Spec.Containers[0].Image
}

func TestRemediationRunsStepsInOrder(t *testing.T) {
	ns := harness.Namespace(t)
	harness.Deployment(t, ns, "web", 1)
	rr := createRemediation(t, ns, "recover",
		v1alpha1.RemediationStep{Name: "scale", Execution: scaleSpec(ns, "web", 2)},
		v1alpha1.RemediationStep{Name: "restart", Execution: v1alpha1.KubernetesExecutionSpec{Action: "restart", Target: target(ns, "web")}},
	)
	rr = harness.Eventually(t, rr, runTimeout, func(rr *v1alpha1.RemediationRequest) bool { return rr.Status.Phase.Terminal() })
	assert.Equal(t, v1alpha1.PhaseCompleted, rr.Status.Phase, rr.Status.Message)
	assert.Equal(t, int32(2), rr.Status.CurrentStep)
	for _, s := range rr.Status.Steps {
		assert.Equal(t, v1alpha1.PhaseCompleted, s.Phase, s.Name)
		assert.False(t, s.RolledBack)
	}
	k := stepExecution(t, ns, "recover-scale")
	assert.Equal(t, "RemediationRequest", metav1.GetControllerOf(k).Kind, "steps are owned by the request")
	k = harness.Eventually(t, k, runTimeout, func(k *v1alpha1.KubernetesExecution) bool { return k.Status.Phase == v1alpha1.PhaseCompleted })
	assert.Equal(t, v1alpha1.ExecutionWorkflowID(ns, "recover-scale", string(k.UID)), k.Status.WorkflowID)
	assert.Equal(t, int32(2), replicasOf(t, ns, "web"))
	harness.ReplayHistory(t, rr.Status.WorkflowID, "remediation-completed.json")
	// The step's own run, a child that waited for the request to finalize it.
	harness.ReplayHistory(t, k.Status.WorkflowID, "execution-step-finalized.json")
}

// neverHolds is a required postcondition that fails within a second.
func neverHolds() []v1alpha1.Condition {
	return []v1alpha1.Condition{{
		Name: "never", Rego: "package post.never\n\npass if input.target.spec.replicas == 42\n", Required: true,
		Timeout: v1alpha1.DurationOf(time.Second),
	}}
}

// Step 3's required postcondition fails: steps 3, 2 and 1 are rolled back,
// newest first, and every target is back where it started.
func TestRemediationRollsBackInReverseOrder(t *testing.T) {
	ns := harness.Namespace(t)
	harness.Deployment(t, ns, "web", 1)
	harness.Deployment(t, ns, "api", 1)
	third := scaleSpec(ns, "api", 3)
	third.PostConditions = neverHolds()
	rr := createRemediation(t, ns, "risky",
		v1alpha1.RemediationStep{Name: "scale-web", Execution: scaleSpec(ns, "web", 2)},
		v1alpha1.RemediationStep{Name: "new-image", Execution: v1alpha1.KubernetesExecutionSpec{
			Action: "set-image", Target: target(ns, "web"),
			Parameters: &v1alpha1.ActionParameters{Container: "web", Image: image.DemoReference()},
		}},
		v1alpha1.RemediationStep{Name: "scale-api", Execution: third},
	)
	rr = harness.Eventually(t, rr, runTimeout, func(rr *v1alpha1.RemediationRequest) bool { return rr.Status.Phase.Terminal() })
	assert.Equal(t, v1alpha1.PhaseFailed, rr.Status.Phase)
	assert.Equal(t, v1alpha1.ReasonRolledBack, rr.Status.Reason)
	assert.Contains(t, rr.Status.Message, "step scale-api: required postcondition never failed")
	require.Len(t, rr.Status.Steps, 3)
	for _, s := range rr.Status.Steps {
		assert.True(t, s.RolledBack, s.Name)
	}

	var rolledBackAt []time.Time
	for _, name := range []string{"risky-scale-api", "risky-new-image", "risky-scale-web"} {
		k := harness.Eventually(t, stepExecution(t, ns, name), runTimeout, func(k *v1alpha1.KubernetesExecution) bool { return k.Status.Phase.Terminal() })
		assert.Equal(t, v1alpha1.ReasonRolledBack, k.Status.Reason, name)
		last := k.Status.PhaseTransitions[len(k.Status.PhaseTransitions)-1]
		rolledBackAt = append(rolledBackAt, last.Time.Time)
		if name == "risky-scale-api" {
			// The step whose postcondition failed, rolled back by the request.
			harness.ReplayHistory(t, k.Status.WorkflowID, "execution-step-rolled-back.json")
		}
	}
	assert.False(t, rolledBackAt[1].Before(rolledBackAt[0]), "step 2 rolled back after step 3")
	assert.False(t, rolledBackAt[2].Before(rolledBackAt[1]), "step 1 rolled back after step 2")
	assert.Equal(t, int32(1), replicasOf(t, ns, "web"))
	assert.Equal(t, int32(1), replicasOf(t, ns, "api"))
	assert.Equal(t, release.Image(), imageOf(t, ns, "web"), "harness.Deployment's image")
	harness.ReplayHistory(t, rr.Status.WorkflowID, "remediation-rolled-back.json")
}

// A step that would fail its checks fails the request before the first
// write: the earlier step's scale never happens and no step execution exists.
func TestRemediationChecksEveryStepFirst(t *testing.T) {
	ns := harness.Namespace(t)
	harness.Deployment(t, ns, "web", 1)
	rr := createRemediation(t, ns, "halts",
		v1alpha1.RemediationStep{Name: "scale-web", Execution: scaleSpec(ns, "web", 2)},
		v1alpha1.RemediationStep{Name: "ghost", Execution: scaleSpec(ns, "ghost", 2)},
		v1alpha1.RemediationStep{Name: "never-runs", Execution: scaleSpec(ns, "web", 5)},
	)
	rr = harness.Eventually(t, rr, runTimeout, func(rr *v1alpha1.RemediationRequest) bool { return rr.Status.Phase.Terminal() })
	assert.Equal(t, v1alpha1.PhaseFailed, rr.Status.Phase)
	assert.Equal(t, v1alpha1.ReasonNotFound, rr.Status.Reason)
	assert.Contains(t, rr.Status.Message, `step ghost: deployments.apps "ghost" not found`)
	assert.Contains(t, rr.Status.Message, "every step is checked before the first write, so nothing was changed")
	assert.Equal(t, v1alpha1.PhaseFailed, rr.Status.Steps[1].Phase)
	for _, s := range rr.Status.Steps {
		assert.Nil(t, s.ExecutionRef, "no step ran: %s", s.Name)
	}
	var steps v1alpha1.KubernetesExecutionList
	require.NoError(t, harness.Kube().List(context.Background(), &steps, ctrlclient.InNamespace(ns)))
	assert.Empty(t, steps.Items)
	assert.Equal(t, int32(1), replicasOf(t, ns, "web"), "the first step never wrote")
	harness.ReplayHistory(t, rr.Status.WorkflowID, "remediation-checked-first.json")
}

// With rollbackPolicy Never a failed required postcondition fails the
// request but leaves every step's change in place.
func TestRemediationRollbackPolicyNeverKeepsTheSteps(t *testing.T) {
	ns := harness.Namespace(t)
	harness.Deployment(t, ns, "web", 1)
	step := scaleSpec(ns, "web", 2)
	step.PostConditions = neverHolds()
	rr := &v1alpha1.RemediationRequest{ObjectMeta: metav1.ObjectMeta{Name: "keep", Namespace: ns},
		Spec: v1alpha1.RemediationRequestSpec{Steps: []v1alpha1.RemediationStep{{Name: "scale-web", Execution: step}}, RollbackPolicy: v1alpha1.RollbackNever}}
	require.NoError(t, harness.Kube().Create(context.Background(), rr))
	rr = harness.Eventually(t, rr, runTimeout, func(rr *v1alpha1.RemediationRequest) bool { return rr.Status.Phase.Terminal() })
	assert.Equal(t, v1alpha1.PhaseFailed, rr.Status.Phase)
	assert.Equal(t, v1alpha1.ReasonPostConditionFailed, rr.Status.Reason)
	assert.Contains(t, rr.Status.Message, "rollbackPolicy Never: nothing rolled back")
	require.Len(t, rr.Status.Steps, 1)
	assert.False(t, rr.Status.Steps[0].RolledBack)
	assert.Equal(t, int32(2), replicasOf(t, ns, "web"))
	harness.ReplayHistory(t, rr.Status.WorkflowID, "remediation-rollback-never.json")
}
