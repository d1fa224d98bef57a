package integration

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/test/harness"
)

// neverOffered checks that a run went neither to an approval wait nor to RollbackReady.
func neverOffered(t *testing.T, k *v1alpha1.KubernetesExecution) {
	t.Helper()
	for _, tr := range k.Status.PhaseTransitions {
		assert.NotContains(t, []v1alpha1.Phase{v1alpha1.PhaseWaitingApproval, v1alpha1.PhaseRollbackReady}, tr.Phase)
	}
	require.NotNil(t, k.Status.RollbackInformation)
	assert.False(t, k.Status.RollbackInformation.Available)
}

// A 2->2 scale changes nothing: it completes at once as NoChange, with no
// approval wait although it asks for one, and offers no rollback.
func TestNoOpScaleCompletesAsNoChange(t *testing.T) {
	ns := harness.Namespace(t)
	harness.Deployment(t, ns, "web", 2)
	spec := scaleSpec(ns, "web", 2)
	spec.Approval = &v1alpha1.ApprovalSpec{Required: true}
	spec.RollbackWindow = v1alpha1.DurationOf(time.Hour)
	k := harness.Eventually(t, createExecution(t, ns, "same", spec), runTimeout,
		func(k *v1alpha1.KubernetesExecution) bool { return k.Status.Phase.Terminal() })
	assert.Equal(t, v1alpha1.PhaseCompleted, k.Status.Phase, k.Status.Message)
	assert.Equal(t, v1alpha1.ReasonNoChange, k.Status.Reason)
	assert.Equal(t, "replicas: 2 -> 2: the target is already in the desired state; nothing was written", k.Status.Message)
	assert.Nil(t, k.Status.ApprovalRequestRef)
	neverOffered(t, k)
	var rars v1alpha1.RemediationApprovalRequestList
	require.NoError(t, harness.Kube().List(context.Background(), &rars, ctrlclient.InNamespace(ns)))
	assert.Empty(t, rars.Items, "nothing to approve")

	out, err := kubectlRemedy(t, ns, "status", "kexec", k.Name)
	require.NoError(t, err, out)
	assert.Contains(t, out, "Completed (NoChange)")
	assert.Regexp(t, `Rollback:\s+none: nothing was changed, so there is nothing to roll back`, out)
	harness.ReplayHistory(t, k.Status.WorkflowID, "execution-no-change.json")
}

// A restart has no inverse: with a rollback window of an hour it still
// completes at once instead of sitting in RollbackReady.
func TestRestartOffersNoRollback(t *testing.T) {
	ns := harness.Namespace(t)
	harness.Deployment(t, ns, "web", 1)
	k := harness.Eventually(t, createExecution(t, ns, "bounce", v1alpha1.KubernetesExecutionSpec{
		Action: "restart", Target: target(ns, "web"), RollbackWindow: v1alpha1.DurationOf(time.Hour),
	}), runTimeout, func(k *v1alpha1.KubernetesExecution) bool { return k.Status.Phase.Terminal() })
	assert.Equal(t, v1alpha1.PhaseCompleted, k.Status.Phase, k.Status.Message)
	assert.Equal(t, v1alpha1.ReasonSucceeded, k.Status.Reason)
	neverOffered(t, k)
	assert.Equal(t, "a rolling restart cannot be undone", k.Status.RollbackInformation.Reason)

	// The plugin says why, as the annotation path does, not that a window closed.
	_, err := kubectlRemedy(t, ns, "rollback", k.Name)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no rollback is available: a rolling restart cannot be undone")
	assert.NotContains(t, err.Error(), "window")
}
