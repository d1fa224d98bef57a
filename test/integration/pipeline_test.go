package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/test/harness"
)

// installPolicy adds a safety policy ConfigMap for one test.
func installPolicy(t *testing.T, name, rego string) {
	t.Helper()
	ctx := context.Background()
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "remedy-system", Labels: map[string]string{"remedy.dev/policy": "true"}},
		Data:       map[string]string{"safety.rego": rego},
	}
	require.NoError(t, harness.Kube().Create(ctx, cm))
	t.Cleanup(func() { require.NoError(t, harness.Kube().Delete(ctx, cm)) })
}

func labelNamespace(t *testing.T, ns string, labels map[string]string) {
	t.Helper()
	var n corev1.Namespace
	require.NoError(t, harness.Kube().Get(context.Background(), ctrlclient.ObjectKey{Name: ns}, &n))
	n.Labels = labels
	require.NoError(t, harness.Kube().Update(context.Background(), &n))
}

func scaleSpec(ns, name string, replicas int32) v1alpha1.KubernetesExecutionSpec {
	return v1alpha1.KubernetesExecutionSpec{
		Action: "scale", Target: target(ns, name),
		Parameters:     &v1alpha1.ActionParameters{Replicas: ptr.To(replicas)},
		RollbackWindow: v1alpha1.DurationOf(0),
	}
}

// rollbackReady scales a fresh Deployment web of 1 replica in ns to replicas
// and waits until the run offers its rollback for window.
func rollbackReady(t *testing.T, ns, name string, replicas int32, window time.Duration) *v1alpha1.KubernetesExecution {
	t.Helper()
	harness.Deployment(t, ns, "web", 1)
	spec := scaleSpec(ns, "web", replicas)
	spec.RollbackWindow = v1alpha1.DurationOf(window)
	return waitPhase(t, createExecution(t, ns, name, spec), v1alpha1.PhaseRollbackReady)
}

func replicasOf(t *testing.T, ns, name string) int32 {
	t.Helper()
	var d appsv1.Deployment
	require.NoError(t, harness.Kube().Get(context.Background(), ctrlclient.ObjectKey{Namespace: ns, Name: name}, &d))
	return *d.Spec.Replicas
}

func TestPolicyDenyIsShownVerbatim(t *testing.T) {
	installPolicy(t, "deny-frozen", `package remedy.safety

deny contains msg if {
	input.namespace.labels.freeze == "true"
	msg := sprintf("namespace %s is frozen for %s until the release is out", [input.namespace.name, input.action])
}
`)
	ns := harness.Namespace(t)
	labelNamespace(t, ns, map[string]string{"freeze": "true"})
	harness.Deployment(t, ns, "web", 1)
	k := waitPhase(t, createExecution(t, ns, "frozen", scaleSpec(ns, "web", 4)), v1alpha1.PhaseFailed)
	assert.Equal(t, "PolicyDenied", k.Status.Reason)
	assert.Equal(t, "namespace "+ns+" is frozen for scale until the release is out", k.Status.Message)
	pv := k.Status.ValidationResults.PolicyValidation
	require.NotNil(t, pv)
	assert.Equal(t, "deny-frozen,remedy-safety-policy", pv.PolicyName, "every labelled ConfigMap, the shipped default included")
	assert.Len(t, pv.PolicyHash, 64)
	assert.False(t, pv.Allowed)
	assert.Nil(t, k.Status.ExecutionResults)
	assert.Equal(t, int32(1), replicasOf(t, ns, "web"))
	harness.ReplayHistory(t, k.Status.WorkflowID, "execution-policy-denied.json")
}

func TestPolicyRequiredDryRunCatchesInvalidWrite(t *testing.T) {
	installPolicy(t, "dry-run-patches", `package remedy.safety

require_dry_run if input.action == "patch"
`)
	ns := harness.Namespace(t)
	harness.Deployment(t, ns, "web", 1)
	k := waitPhase(t, createExecution(t, ns, "bad-patch", v1alpha1.KubernetesExecutionSpec{
		Action: "patch", Target: target(ns, "web"),
		Parameters: &v1alpha1.ActionParameters{Patch: &apiextensionsv1.JSON{Raw: []byte(`{"spec":{"replicas":-3}}`)}},
	}), v1alpha1.PhaseFailed)
	assert.Equal(t, "DryRunFailed", k.Status.Reason)
	assert.Contains(t, k.Status.Message, "spec.replicas: Invalid value: -3")
	require.NotNil(t, k.Status.ValidationResults.DryRunResults)
	assert.True(t, k.Status.ValidationResults.DryRunResults.Performed)
	assert.False(t, k.Status.ValidationResults.DryRunResults.Success)
	assert.True(t, k.Status.ValidationResults.PolicyValidation.RequiredDryRun)
	assert.Equal(t, int32(1), replicasOf(t, ns, "web"), "the target is untouched")
	harness.ReplayHistory(t, k.Status.WorkflowID, "execution-dry-run-failed.json")
}

func TestRequiredPreconditionBlocksExecution(t *testing.T) {
	ns := harness.Namespace(t)
	harness.Deployment(t, ns, "web", 1)
	spec := scaleSpec(ns, "web", 3)
	spec.PreConditions = []v1alpha1.Condition{{
		Name:     "enough-available",
		Rego:     "package pre\n\npass if input.target.status.availableReplicas >= 1\n\nmessage := sprintf(\"%v pods available\", [object.get(input.target.status, \"availableReplicas\", 0)])\n",
		Required: true,
		Timeout:  v1alpha1.DurationOf(2 * time.Second),
	}}
	k := waitPhase(t, createExecution(t, ns, "pre-blocked", spec), v1alpha1.PhaseFailed)
	assert.Equal(t, v1alpha1.ReasonPreconditionFailed, k.Status.Reason)
	assert.True(t, strings.HasPrefix(k.Status.Message, "required precondition enough-available did not hold: pass is undefined: input.target.status.availableReplicas is not in the input (input.target.status has "), k.Status.Message)
	assert.True(t, strings.HasSuffix(k.Status.Message, "): 0 pods available"), k.Status.Message)
	res := k.Status.ValidationResults.PreConditionResults
	require.Len(t, res, 1)
	assert.False(t, res[0].Passed)
	assert.GreaterOrEqual(t, res[0].Attempts, int32(2), "retried until its timeout")
	assert.Nil(t, k.Status.ExecutionResults)
	assert.Equal(t, int32(1), replicasOf(t, ns, "web"))
	harness.ReplayHistory(t, k.Status.WorkflowID, "execution-precondition-failed.json")
}

func TestPostconditions(t *testing.T) {
	ns := harness.Namespace(t)
	harness.Deployment(t, ns, "web", 1)
	spec := scaleSpec(ns, "web", 2)
	spec.RollbackWindow = v1alpha1.DurationOf(time.Second)
	spec.PostConditions = []v1alpha1.Condition{
		{Name: "scaled", Rego: "package post.scaled\n\npass if input.target.spec.replicas == 2\n", Required: true, Timeout: v1alpha1.DurationOf(2 * time.Second)},
		{Name: "nice-to-have", Rego: "package post.nice\n\npass if count(input.related) > 100\n", Required: false, Timeout: v1alpha1.DurationOf(time.Second)},
	}
	k := waitPhase(t, createExecution(t, ns, "post-ok", spec), v1alpha1.PhaseCompleted)
	assert.Contains(t, k.Status.Message, "warnings: optional condition nice-to-have did not hold")
	require.Len(t, k.Status.ValidationResults.PostConditionResults, 2)
	assert.True(t, k.Status.ValidationResults.PostConditionResults[0].Passed)

	spec.PostConditions = []v1alpha1.Condition{
		{Name: "impossible", Rego: "package post.impossible\n\npass if input.target.spec.replicas == 99\n", Required: true, Timeout: v1alpha1.DurationOf(2 * time.Second)},
	}
	spec.Parameters.Replicas = ptr.To[int32](3)
	k = waitPhase(t, createExecution(t, ns, "post-fails", spec), v1alpha1.PhaseRollbackReady)
	assert.Equal(t, v1alpha1.ReasonPostConditionFailed, k.Status.Reason)
	assert.Equal(t, "required postcondition impossible failed; the change stays in place unless rolled back to replicas: 2 within 1s: kubectl remedy rollback post-fails -n "+ns, k.Status.Message)
	require.NotNil(t, k.Status.RollbackInformation)
	assert.Equal(t, int32(2), *k.Status.RollbackInformation.RollbackParameters.Replicas)
	k = waitPhase(t, k, v1alpha1.PhaseFailed)
	assert.Equal(t, v1alpha1.ReasonPostConditionFailed, k.Status.Reason)
	assert.Equal(t, "required postcondition impossible failed; the change was kept (rollback window closed)", k.Status.Message)
	assert.Equal(t, int32(3), replicasOf(t, ns, "web"), "as the message says")
	assert.True(t, k.Status.RollbackInformation.Available, "rollback information is kept")
	harness.ReplayHistory(t, k.Status.WorkflowID, "execution-postcondition-failed.json")
}

// kubectl annotate kexec <name> remedy.dev/rollback="<reason>" rolls back
// through the same validation as the original action.
func TestRollbackAnnotation(t *testing.T) {
	ctx := context.Background()
	ns := harness.Namespace(t)
	k := rollbackReady(t, ns, "undo-me", 4, time.Hour)
	patch := []byte(`{"metadata":{"annotations":{"remedy.dev/rollback":"error rate doubled"}}}`)
	require.NoError(t, harness.Kube().Patch(ctx, k, ctrlclient.RawPatch("application/merge-patch+json", patch)))
	k = waitPhase(t, k, v1alpha1.PhaseCompleted)
	assert.Equal(t, v1alpha1.ReasonRolledBack, k.Status.Reason)
	assert.Equal(t, int32(1), replicasOf(t, ns, "web"))
	assertEvents(t, ns, "undo-me", "RollbackRequested")
}
