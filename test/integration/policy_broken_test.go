package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/devenv"
	"github.com/remedy-dev/remedy/internal/metrics"
	"github.com/remedy-dev/remedy/test/harness"
)

const brokenRego = "package remedy.safety\n\ndeny contains msg if {\n"

func policyConfigMap(ns, name, rego string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{v1alpha1.PolicyLabel: "true"}},
		Data: map[string]string{"policy.rego": rego}}
}

// withoutPolicyWebhook deletes the remedy-policy ValidatingWebhookConfiguration
// until the test ends, as an operator outage (failurePolicy Ignore) would. The
// API server learns of the change from a watch, so it waits, both ways, until
// a dry-run create of a broken policy shows the API server did.
func withoutPolicyWebhook(t *testing.T) {
	t.Helper()
	withoutWebhook(t, &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "remedy-policy"}}, waitPolicyWebhook)
}

func waitPolicyWebhook(t *testing.T, called bool) {
	t.Helper()
	probe := policyConfigMap(devenv.Namespace, "zz-probe", brokenRego)
	require.Eventually(t, func() bool {
		err := harness.Kube().Create(context.Background(), probe.DeepCopy(), ctrlclient.DryRunAll)
		return (err != nil) == called
	}, 30*time.Second, 100*time.Millisecond, "the API server should call the policy webhook: %v", called)
}

func TestBrokenPolicyConfigMapIsRefusedAtAdmission(t *testing.T) {
	ctx := context.Background()
	err := harness.Kube().Create(ctx, policyConfigMap(devenv.Namespace, "zz-refused", brokenRego))
	require.Error(t, err)
	assert.True(t, apierrors.IsInvalid(err), "want 422, got %v", err)
	assert.Contains(t, err.Error(), "labelled remedy.dev/policy=true, so its *.rego keys are part of the safety policy, and with them the policy is broken: rego:")

	good := policyConfigMap(devenv.Namespace, "zz-extra", "package remedy.safety\n\nrequire_dry_run if input.action == \"patch\"\n")
	require.NoError(t, harness.Kube().Create(ctx, good), "a module that compiles with the others")
	t.Cleanup(func() { _ = harness.Kube().Delete(ctx, good) })
	good.Data["policy.rego"] = brokenRego
	err = harness.Kube().Update(ctx, good)
	require.Error(t, err, "an update that breaks it")
	assert.True(t, apierrors.IsInvalid(err), "want 422, got %v", err)

	// Only the policy namespace's ConfigMaps are the policy.
	elsewhere := policyConfigMap(harness.Namespace(t), "not-a-policy", brokenRego)
	require.NoError(t, harness.Kube().Create(ctx, elsewhere))
}

// A broken policy ConfigMap that got in while the webhook was down does not
// stop remediation: the worker keeps the last good policy, with a Warning
// Event on the ConfigMap and remedy_safety_policy_broken set.
func TestBrokenPolicyConfigMapKeepsTheLastGoodPolicy(t *testing.T) {
	ctx := context.Background()
	ns := harness.Namespace(t)
	harness.Deployment(t, ns, "web", 1)
	require.Equal(t, 0.0, testutil.ToFloat64(metrics.SafetyPolicyBroken), "the shipped policy compiles")

	withoutPolicyWebhook(t)
	broken := policyConfigMap(devenv.Namespace, "zz-broken", brokenRego)
	require.NoError(t, harness.Kube().Create(ctx, broken))
	t.Cleanup(func() { _ = harness.Kube().Delete(ctx, broken) })

	note := warningEventWith(t, devenv.Namespace, "ConfigMap", "zz-broken", v1alpha1.ReasonPolicyBroken).Note
	assert.Contains(t, note, "zz-broken is broken: rego:")
	assert.Contains(t, note, "the worker keeps deciding with the last good policy (remedy-safety-policy")
	assert.Equal(t, 1.0, testutil.ToFloat64(metrics.SafetyPolicyBroken))

	fallbacks := testutil.ToFloat64(metrics.SafetyPolicyFallbacks.WithLabelValues("last_good"))
	k := createExecution(t, ns, "scale-despite", v1alpha1.KubernetesExecutionSpec{
		Action: "scale", Target: target(ns, "web"), Parameters: &v1alpha1.ActionParameters{Replicas: ptr.To[int32](2)},
	})
	k = waitPhase(t, k, v1alpha1.PhaseRollbackReady)
	pv := k.Status.ValidationResults.PolicyValidation
	require.NotNil(t, pv)
	assert.True(t, pv.Allowed)
	assert.True(t, strings.HasPrefix(pv.PolicyName, "remedy-safety-policy (last good: "), pv.PolicyName)
	assert.Greater(t, testutil.ToFloat64(metrics.SafetyPolicyFallbacks.WithLabelValues("last_good")), fallbacks)

	require.NoError(t, harness.Kube().Delete(ctx, broken))
	require.Eventually(t, func() bool { return testutil.ToFloat64(metrics.SafetyPolicyBroken) == 0 }, 10*time.Second, 100*time.Millisecond,
		"fixed once the broken ConfigMap is gone")
}
