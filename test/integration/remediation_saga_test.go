package integration

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/image"
	"github.com/remedy-dev/remedy/internal/release"
	"github.com/remedy-dev/remedy/test/harness"
)

// createSaga creates a RemediationRequest with the given rollback policy;
// empty leaves it to the CRD's default.
func createSaga(t *testing.T, ns, name string, policy v1alpha1.RollbackPolicy, steps ...v1alpha1.RemediationStep) *v1alpha1.RemediationRequest {
	t.Helper()
	rr := &v1alpha1.RemediationRequest{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1alpha1.RemediationRequestSpec{Steps: steps, RollbackPolicy: policy}}
	require.NoError(t, harness.Kube().Create(context.Background(), rr))
	return rr
}

// failsPrecondition is a step that scales name to replicas once a required
// precondition holds, and it never does: the step fails after timeout.
func failsPrecondition(ns, name string, replicas int32, timeout time.Duration) v1alpha1.KubernetesExecutionSpec {
	spec := scaleSpec(ns, name, replicas)
	spec.PreConditions = []v1alpha1.Condition{{
		Name: "never", Rego: "package pre.never\n\npass if input.target.spec.replicas == 42\n", Required: true,
		Timeout: v1alpha1.DurationOf(timeout),
	}}
	return spec
}

func stepRollbacks(rr *v1alpha1.RemediationRequest) []v1alpha1.StepRollback {
	var out []v1alpha1.StepRollback
	for _, s := range rr.Status.Steps {
		out = append(out, s.Rollback)
	}
	return out
}

func terminal(t *testing.T, rr *v1alpha1.RemediationRequest) *v1alpha1.RemediationRequest {
	t.Helper()
	return harness.Eventually(t, rr, runTimeout, func(rr *v1alpha1.RemediationRequest) bool { return rr.Status.Phase.Terminal() })
}

// The third step fails: with the default rollbackPolicy (OnFailure), steps 2
// and 1 are rolled back in that order and every target is back where it began.
func TestSagaThirdStepFailureRollsBackStepsTwoAndOne(t *testing.T) {
	ns := harness.Namespace(t)
	harness.Deployment(t, ns, "web", 1)
	harness.Deployment(t, ns, "api", 1)
	rr := createSaga(t, ns, "saga", "",
		v1alpha1.RemediationStep{Name: "scale-web", Execution: scaleSpec(ns, "web", 2)},
		v1alpha1.RemediationStep{Name: "new-image", Execution: v1alpha1.KubernetesExecutionSpec{
			Action: "set-image", Target: target(ns, "web"),
			Parameters: &v1alpha1.ActionParameters{Container: "web", Image: image.DemoReference()},
		}},
		v1alpha1.RemediationStep{Name: "scale-api", Execution: failsPrecondition(ns, "api", 3, time.Second)},
	)
	assert.Equal(t, v1alpha1.RollbackOnFailure, rr.Spec.RollbackPolicy, "the default")
	rr = terminal(t, rr)
	assert.Equal(t, v1alpha1.PhaseFailed, rr.Status.Phase)
	assert.Equal(t, v1alpha1.ReasonRolledBack, rr.Status.Reason, rr.Status.Message)
	assert.Contains(t, rr.Status.Message, "step scale-api failed: PreconditionFailed")
	assert.Contains(t, rr.Status.Message, "rolled back, newest first: new-image, scale-web")
	assert.Equal(t, []v1alpha1.StepRollback{v1alpha1.StepRolledBack, v1alpha1.StepRolledBack, ""}, stepRollbacks(rr))
	assert.Equal(t, v1alpha1.ReasonPreconditionFailed, rr.Status.Steps[2].Reason)

	var rolledBackAt []time.Time
	for _, name := range []string{"saga-new-image", "saga-scale-web"} {
		k := stepExecution(t, ns, name)
		assert.Equal(t, v1alpha1.ReasonRolledBack, k.Status.Reason, name)
		rolledBackAt = append(rolledBackAt, k.Status.PhaseTransitions[len(k.Status.PhaseTransitions)-1].Time.Time)
	}
	assert.False(t, rolledBackAt[1].Before(rolledBackAt[0]), "step 1 rolled back after step 2")
	assert.Equal(t, int32(1), replicasOf(t, ns, "web"))
	assert.Equal(t, release.Image(), imageOf(t, ns, "web"), "harness.Deployment's image")
	assert.Equal(t, int32(1), replicasOf(t, ns, "api"), "the failed step never wrote")

	out, err := kubectlRemedy(t, ns, "status", "rr", rr.Name)
	require.NoError(t, err, out)
	assert.Regexp(t, `scale-web\s+saga-scale-web\s+Completed \(RolledBack\)\s+rolled back`, out)
	assert.Regexp(t, `Rollback:\s+done: rolled back \(scale to replicas 1\)`, out)
	harness.ReplayHistory(t, rr.Status.WorkflowID, "remediation-on-failure-rolled-back.json")
}

// Step 2 fails after the target of step 1 was deleted: step 1's rollback
// fails, and the request says so, naming what could not be undone.
func TestSagaReportsARollbackThatFails(t *testing.T) {
	ctx := context.Background()
	ns := harness.Namespace(t)
	harness.Deployment(t, ns, "web", 1)
	harness.Deployment(t, ns, "api", 1)
	rr := createSaga(t, ns, "undo", "",
		v1alpha1.RemediationStep{Name: "scale-web", Execution: scaleSpec(ns, "web", 2)},
		v1alpha1.RemediationStep{Name: "scale-api", Execution: failsPrecondition(ns, "api", 2, 10*time.Second)},
	)
	first := &v1alpha1.KubernetesExecution{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "undo-scale-web"}}
	first = waitPhase(t, first, v1alpha1.PhaseRollbackReady)
	assert.Contains(t, first.Status.Message, "kept available until the RemediationRequest ends")
	require.NoError(t, harness.Kube().Delete(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}))

	rr = terminal(t, rr)
	assert.Equal(t, v1alpha1.PhaseFailed, rr.Status.Phase)
	assert.Equal(t, v1alpha1.ReasonRollbackFailed, rr.Status.Reason, rr.Status.Message)
	assert.Contains(t, rr.Status.Message, "step scale-api failed: PreconditionFailed")
	assert.Contains(t, rr.Status.Message, "could not roll back: scale-web (")
	assert.NotContains(t, rr.Status.Message, "rolled back, newest first")
	assert.Equal(t, []v1alpha1.StepRollback{v1alpha1.StepRollbackFailed, ""}, stepRollbacks(rr))
	assert.Contains(t, rr.Status.Steps[0].Message, `"web" not found`)
	first = stepExecution(t, ns, "undo-scale-web")
	assert.Equal(t, v1alpha1.ReasonRollbackFailed, first.Status.Reason)

	out, err := kubectlRemedy(t, ns, "status", "rr", rr.Name)
	require.NoError(t, err, out)
	assert.Contains(t, out, "Failed (RollbackFailed)")
	assert.Regexp(t, `scale-web\s+undo-scale-web\s+Failed \(RollbackFailed\)\s+FAILED: .*not found`, out)
	harness.ReplayHistory(t, rr.Status.WorkflowID, "remediation-rollback-failed.json")
}

// A restart has no inverse: as a step it completes on its own instead of
// waiting in RollbackReady, and when a later step fails the request says
// that its change was not undone.
func TestSagaRestartIsNotUndone(t *testing.T) {
	ns := harness.Namespace(t)
	harness.Deployment(t, ns, "web", 1)
	harness.Deployment(t, ns, "api", 1)
	rr := createSaga(t, ns, "bounce", "",
		v1alpha1.RemediationStep{Name: "scale-web", Execution: scaleSpec(ns, "web", 2)},
		v1alpha1.RemediationStep{Name: "restart", Execution: v1alpha1.KubernetesExecutionSpec{Action: "restart", Target: target(ns, "web")}},
		v1alpha1.RemediationStep{Name: "scale-api", Execution: failsPrecondition(ns, "api", 3, time.Second)},
	)
	rr = terminal(t, rr)
	assert.Equal(t, v1alpha1.PhaseFailed, rr.Status.Phase)
	assert.Equal(t, v1alpha1.ReasonRollbackIncomplete, rr.Status.Reason, rr.Status.Message)
	assert.Contains(t, rr.Status.Message, "rolled back, newest first: scale-web")
	assert.Contains(t, rr.Status.Message, "not undone, no inverse: restart (a rolling restart cannot be undone)")
	assert.Equal(t, []v1alpha1.StepRollback{v1alpha1.StepRolledBack, v1alpha1.StepNoRollback, ""}, stepRollbacks(rr))
	assert.Equal(t, int32(1), replicasOf(t, ns, "web"))

	k := stepExecution(t, ns, "bounce-restart")
	assert.Equal(t, v1alpha1.PhaseCompleted, k.Status.Phase)
	assert.Equal(t, v1alpha1.ReasonSucceeded, k.Status.Reason)
	for _, tr := range k.Status.PhaseTransitions {
		assert.NotEqual(t, v1alpha1.PhaseRollbackReady, tr.Phase, "a restart offers no rollback")
	}
	harness.ReplayHistory(t, rr.Status.WorkflowID, "remediation-rollback-incomplete.json")
	harness.ReplayHistory(t, k.Status.WorkflowID, "execution-step-no-inverse.json")
}

// Under rollbackPolicy OnRequiredPostConditionFailure a step that fails
// otherwise keeps the completed steps' changes; once the request has ended,
// neither status nor rollback offers a step's rollback any more.
func TestSagaStepFailedKeepsStepsUnderPostConditionPolicy(t *testing.T) {
	ns := harness.Namespace(t)
	harness.Deployment(t, ns, "web", 1)
	harness.Deployment(t, ns, "api", 1)
	rr := createSaga(t, ns, "keep", v1alpha1.RollbackOnRequiredPostConditionFailure,
		v1alpha1.RemediationStep{Name: "scale-web", Execution: scaleSpec(ns, "web", 2)},
		v1alpha1.RemediationStep{Name: "scale-api", Execution: failsPrecondition(ns, "api", 2, time.Second)},
	)
	rr = terminal(t, rr)
	assert.Equal(t, v1alpha1.PhaseFailed, rr.Status.Phase)
	assert.Equal(t, v1alpha1.ReasonStepFailed, rr.Status.Reason, rr.Status.Message)
	assert.Contains(t, rr.Status.Message, "rollbackPolicy OnRequiredPostConditionFailure: nothing rolled back; kept: scale-web")
	assert.Equal(t, []v1alpha1.StepRollback{v1alpha1.StepKept, ""}, stepRollbacks(rr))
	assert.Equal(t, int32(2), replicasOf(t, ns, "web"))

	out, err := kubectlRemedy(t, ns, "status", "kexec", "keep-scale-web")
	require.NoError(t, err, out)
	assert.NotRegexp(t, `Rollback:\s+available`, out)
	assert.Regexp(t, `Rollback:\s+closed: RemediationRequest keep ended and kept this change`, out)
	out, err = kubectlRemedy(t, ns, "rollback", "keep-scale-web")
	require.Error(t, err, out)
	assert.Contains(t, err.Error(), "a step's rollback is offered until its RemediationRequest keep ends, and that request has ended")
	harness.ReplayHistory(t, rr.Status.WorkflowID, "remediation-step-failed.json")
}
