package workflows

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/remedy-dev/remedy/activities/gate"
	"github.com/remedy-dev/remedy/api/v1alpha1"
)

// A step's dry-run refused by the API server with a text that quotes a
// value fails the request showing that text only to a requester who may
// get the target; the read access is asked on that failure only.
func TestRemediationDryRunFailureFollowsReadAccess(t *testing.T) {
	refusal := `Deployment "web" is invalid: spec.template.spec.containers[0].env[0].value: Invalid value: "` + livePassword + `"`
	for _, reads := range []gate.Readable{{Allowed: true}, {Marker: notReadable}} {
		t.Run(map[bool]string{true: "may get", false: "may not get"}[reads.Allowed], func(t *testing.T) {
			s := newSaga()
			s.replicas["web"] = 1
			// The case's read answer comes before trustAll's, so it is the one given.
			env := untrustedEnvOf(t, &testsuite.WorkflowTestSuite{})
			asked := 0
			env.OnActivity(validation.MayReadTarget, mock.Anything, mock.Anything).Return(reads, nil).Run(func(mock.Arguments) { asked++ })
			trustAll(env)
			s.on(env)
			env.OnActivity(executionActs.DryRun, mock.Anything, mock.Anything).Return(v1alpha1.DryRunResults{},
				temporal.NewNonRetryableApplicationError(refusal, v1alpha1.ReasonDryRunFailed, nil, gate.APIText{Code: 422, Reason: "Invalid"}))
			step := scaleStep("up", "web", 3)
			step.Execution.DryRun = true
			env.ExecuteWorkflow(RemediationWorkflow, RemediationInput{Namespace: "shop", Name: "fix", UID: "rr1",
				Spec: v1alpha1.RemediationRequestSpec{Steps: []v1alpha1.RemediationStep{step}, Requester: &v1alpha1.Requester{Username: "alice"}}})
			require.True(t, env.IsWorkflowCompleted())
			var res RemediationResult
			require.NoError(t, FinalResult(env.GetWorkflowResult(&res), &res))
			st := res.Status
			assert.Equal(t, v1alpha1.ReasonDryRunFailed, st.Reason)
			assert.Equal(t, 1, asked, "read access is asked on the failure")
			if reads.Allowed {
				assert.Contains(t, st.Message, refusal)
				return
			}
			assert.NotContains(t, st.Message, livePassword)
			assert.NotContains(t, st.Steps[0].Message, livePassword)
			assert.Contains(t, st.Message, "422 Invalid")
			assert.Empty(t, s.writes, "nothing written")
		})
	}
}
