package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/devenv"
	"github.com/remedy-dev/remedy/internal/policy/sandboxtest"
	"github.com/remedy-dev/remedy/test/harness"
)

// precondition runs a scale of a fresh Deployment web guarded by one required
// precondition, until it is Failed.
func precondition(t *testing.T, run string, c v1alpha1.Condition) (string, *v1alpha1.KubernetesExecution) {
	t.Helper()
	ns := harness.Namespace(t)
	harness.Deployment(t, ns, "web", 1)
	spec := scaleSpec(ns, "web", 2)
	c.Required = true
	spec.PreConditions = []v1alpha1.Condition{c}
	return ns, waitPhase(t, createExecution(t, ns, run, spec), v1alpha1.PhaseFailed)
}

// A safety policy that would phone home is refused at admission with the
// sandbox's message; one that gets in while the webhook is down is never
// run: the worker keeps the last good policy and says why on the ConfigMap.
func TestSafetyPolicyHTTPSendIsRefusedAndNeverRuns(t *testing.T) {
	ctx := context.Background()
	url, hits := sandboxtest.Listener(t)
	const sandboxRefusal = `module "phone-home/policy.rego" uses built-in http.send (line 4), which Remedy's sandbox does not allow`
	cm := policyConfigMap(devenv.Namespace, "phone-home", fmt.Sprintf(`package remedy.safety

deny contains msg if {
	msg := http.send({"method": "POST", "url": %q, "body": input}).raw_body
}
`, url))
	err := harness.Kube().Create(ctx, cm.DeepCopy())
	require.Error(t, err)
	assert.True(t, apierrors.IsInvalid(err), "want 422, got %v", err)
	assert.Contains(t, err.Error(), sandboxRefusal)

	withoutPolicyWebhook(t)
	require.NoError(t, harness.Kube().Create(ctx, cm))
	t.Cleanup(func() { require.NoError(t, harness.Kube().Delete(ctx, cm)) })
	note := warningEventWith(t, devenv.Namespace, "ConfigMap", "phone-home", v1alpha1.ReasonPolicyBroken).Note
	assert.Contains(t, note, sandboxRefusal)
	ns := harness.Namespace(t)
	harness.Deployment(t, ns, "web", 1)
	k := waitPhase(t, createExecution(t, ns, "policy-http-send", scaleSpec(ns, "web", 2)), v1alpha1.PhaseCompleted)
	assert.Contains(t, k.Status.ValidationResults.PolicyValidation.PolicyName, "(last good: ")
	assert.Zero(t, hits.Load(), "the listener received nothing")
}

// A condition that loops is stopped by the sandbox's 1s limit on its first
// attempt and fails, instead of being evaluated again until its own timeout.
func TestConditionLoopHitsTimeout(t *testing.T) {
	start := time.Now()
	ns, k := precondition(t, "rego-loop", v1alpha1.Condition{
		Name: "loop", Rego: sandboxtest.Loop("pre.loop"), Timeout: v1alpha1.DurationOf(20 * time.Second),
	})
	assert.Less(t, time.Since(start), 15*time.Second, "well before the condition's own 20s timeout")
	assert.Equal(t, v1alpha1.ReasonPreconditionFailed, k.Status.Reason)
	assert.Contains(t, k.Status.Message, "required precondition loop did not hold: rego evaluation did not finish within Remedy's sandbox limit of 1s")
	res := k.Status.ValidationResults.PreConditionResults
	require.Len(t, res, 1)
	assert.False(t, res[0].Passed)
	assert.Equal(t, int32(1), res[0].Attempts, "not evaluated again")
	assert.Equal(t, int32(1), replicasOf(t, ns, "web"))
}
