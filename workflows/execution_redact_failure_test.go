package workflows

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/temporal"

	"github.com/remedy-dev/remedy/activities/execution"
	"github.com/remedy-dev/remedy/activities/gate"
	"github.com/remedy-dev/remedy/api/v1alpha1"
)

// The API server's refusal of a dry-run or a write may quote the value the
// write carried or the object holds ("Invalid value: ..."): a requester who
// may not get the target, and whoever reads the execution, see its code and
// reason, not its text. One who may get it sees the text.
func TestFailedDryRunAndWriteMessagesFollowTheRequestersReadAccess(t *testing.T) {
	refusal := `ConfigMap "settings" is invalid: data.password: Invalid value: "` + livePassword + `": must not be reused`
	apiError := func(reason string) error {
		return temporal.NewNonRetryableApplicationError(refusal, reason, nil, gate.APIText{Code: 422, Reason: "Invalid"})
	}
	for _, failing := range []string{"dry-run", "write"} {
		for _, reads := range []gate.Readable{{Allowed: true}, {Marker: notReadable}} {
			t.Run(failing+"/"+map[bool]string{true: "may get", false: "may not get"}[reads.Allowed], func(t *testing.T) {
				env := readsEnv(t)
				env.OnActivity(validation.CheckSpec, mock.Anything, mock.Anything, mock.Anything).Return(nil)
				allowAll(env)
				env.OnActivity(validation.MayReadTarget, mock.Anything, mock.Anything).Return(reads, nil)
				env.OnActivity(executionActs.InspectTarget, mock.Anything, mock.Anything).Return(passwordPlan, nil)
				if failing == "dry-run" {
					env.OnActivity(executionActs.DryRun, mock.Anything, mock.Anything).Return(v1alpha1.DryRunResults{}, apiError(v1alpha1.ReasonDryRunFailed))
				} else {
					env.OnActivity(executionActs.DryRun, mock.Anything, mock.Anything).Return(v1alpha1.DryRunResults{Performed: true, Success: true}, nil)
					env.OnActivity(executionActs.ExecuteInline, mock.Anything, mock.Anything).Return(execution.ExecuteResult{}, apiError(v1alpha1.ReasonExecutionFailed))
				}
				env.ExecuteWorkflow(ExecutionWorkflow, patchInput(time.Hour))
				s := result(t, env)

				assert.Equal(t, v1alpha1.PhaseFailed, s.Phase)
				all := published(t, env, s)
				if reads.Allowed {
					assert.Contains(t, s.Message, refusal)
					return
				}
				assert.NotContains(t, all, livePassword)
				assert.Contains(t, s.Message, "422 Invalid")
				assert.Contains(t, s.Message, notReadable)
				if failing == "dry-run" {
					assert.Equal(t, v1alpha1.ReasonDryRunFailed, s.Reason)
					assert.Equal(t, []string{s.Message}, s.ValidationResults.DryRunResults.Warnings)
				}
			})
		}
	}
}
