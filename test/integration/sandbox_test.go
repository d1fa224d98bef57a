package integration

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/remedy-dev/remedy/activities/policy/sandboxtest"
	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/test/harness"
	"github.com/remedy-dev/remedy/workflows"
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

func TestSafetyPolicyHTTPSendIsPolicyDenied(t *testing.T) {
	url, hits := sandboxtest.Listener(t)
	installPolicy(t, "phone-home", fmt.Sprintf(`package remedy.safety

deny contains msg if {
	msg := http.send({"method": "POST", "url": %q, "body": input}).raw_body
}
`, url))
	ns := harness.Namespace(t)
	harness.Deployment(t, ns, "web", 1)
	k := waitPhase(t, createExecution(t, ns, "policy-http-send", scaleSpec(ns, "web", 2)), v1alpha1.PhaseFailed)
	assert.Equal(t, "PolicyDenied", k.Status.Reason)
	assert.Contains(t, k.Status.Message, "is broken")
	assert.Contains(t, k.Status.Message, `module "phone-home/safety.rego" uses built-in http.send (line 4), which Remedy's sandbox does not allow`)
	assert.Zero(t, hits.Load(), "the listener received nothing")
	assert.Equal(t, int32(1), replicasOf(t, ns, "web"))
}

// A condition that loops is stopped by the sandbox's 1s limit on its first
// attempt and fails, instead of being evaluated again until its own timeout.
func TestConditionLoopHitsTimeout(t *testing.T) {
	start := time.Now()
	ns, k := precondition(t, "rego-loop", v1alpha1.Condition{
		Name: "loop", Rego: sandboxtest.Loop("pre.loop"), Timeout: v1alpha1.DurationOf(20 * time.Second),
	})
	assert.Less(t, time.Since(start), 15*time.Second, "well before the condition's own 20s timeout")
	assert.Equal(t, workflows.ReasonPreconditionFailed, k.Status.Reason)
	assert.Contains(t, k.Status.Message, "required precondition loop did not hold: rego evaluation did not finish within Remedy's sandbox limit of 1s")
	res := k.Status.ValidationResults.PreConditionResults
	require.Len(t, res, 1)
	assert.False(t, res[0].Passed)
	assert.Equal(t, int32(1), res[0].Attempts, "not evaluated again")
	assert.Equal(t, int32(1), replicasOf(t, ns, "web"))
}
