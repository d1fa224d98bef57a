package workflows

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"

	"github.com/remedy-dev/remedy/activities/execution"
	"github.com/remedy-dev/remedy/activities/gate"
	"github.com/remedy-dev/remedy/activities/status"
	"github.com/remedy-dev/remedy/api/v1alpha1"
)

// untrustedEnv registers the activities without trustAll, so each case says
// how the subject and requester checks answer.
func untrustedEnv(t *testing.T) *testsuite.TestWorkflowEnvironment {
	return untrustedEnvOf(t, &testsuite.WorkflowTestSuite{})
}

// untrustedEnvOf is untrustedEnv in a suite the caller configured (a logger, say).
func untrustedEnvOf(t *testing.T, s *testsuite.WorkflowTestSuite) *testsuite.TestWorkflowEnvironment {
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflow(ExecutionWorkflow)
	env.RegisterActivity(&execution.Execution{})
	env.RegisterActivity(&gate.Validation{})
	env.RegisterActivity(&execution.Jobs{})
	env.RegisterActivity(&gate.Subjects{})
	env.RegisterActivity(&status.Statuses{})
	recordPushes(env)
	t.Cleanup(func() { env.AssertExpectations(t) })
	return env
}

func TestTrustChecks(t *testing.T) {
	alice := &v1alpha1.Requester{Username: "alice", Groups: []string{"oncall"}}
	in := scaleInput(time.Minute, false)
	in.Spec.Requester = alice

	t.Run("a forged start does nothing", func(t *testing.T) {
		env := untrustedEnv(t)
		env.OnActivity(subjects.VerifyExecution, mock.Anything, gate.SubjectRef{Namespace: "shop", Name: "scale-web", UID: "u1"}, in.Spec).
			Return(permanentErr(v1alpha1.ReasonSubjectMismatch, "KubernetesExecution shop/scale-web does not exist")).Once()
		env.ExecuteWorkflow(ExecutionWorkflow, in)
		s := result(t, env)
		assert.Equal(t, v1alpha1.PhaseFailed, s.Phase)
		assert.Equal(t, v1alpha1.ReasonSubjectMismatch, s.Reason)
		assert.Nil(t, s.ValidationResults.ParameterValidation, "nothing after the subject check ran")
	})

	t.Run("a requester without the grant is refused before the target is read", func(t *testing.T) {
		env := untrustedEnv(t)
		env.OnActivity(subjects.VerifyExecution, mock.Anything, mock.Anything, mock.Anything).Return(nil).Once()
		env.OnActivity(validation.CheckSpec, mock.Anything, mock.Anything, mock.Anything).Return(nil).Once()
		env.OnActivity(validation.CheckRequester, mock.Anything, gate.RequesterCheck{Namespace: "shop", Requester: alice, Action: "scale", Target: in.Spec.Target}).
			Return(permanentErr(v1alpha1.ReasonForbidden, `user "alice" cannot execute resource "actions"`)).Once()
		env.ExecuteWorkflow(ExecutionWorkflow, in)
		s := result(t, env)
		assert.Equal(t, v1alpha1.PhaseFailed, s.Phase)
		assert.Equal(t, v1alpha1.ReasonForbidden, s.Reason)
		assert.Equal(t, "alice", s.Requester)
		assert.Equal(t, boolPtr(false), s.ValidationResults.RequesterValidation)
		assert.Nil(t, s.ValidationResults.ResourceExists)
	})

	t.Run("a rollback needs the requester's grant for the inverse action", func(t *testing.T) {
		env := untrustedEnv(t)
		env.OnActivity(subjects.VerifyExecution, mock.Anything, mock.Anything, mock.Anything).Return(nil).Once()
		env.OnActivity(validation.CheckSpec, mock.Anything, mock.Anything, mock.Anything).Return(nil).Twice()
		env.OnActivity(validation.CheckRequester, mock.Anything, mock.Anything).Return(nil).Once()
		env.OnActivity(validation.CheckRBAC, mock.Anything, mock.Anything).Return(nil).Once()
		env.OnActivity(executionActs.InspectTarget, mock.Anything, mock.Anything).Return(scalePlan, nil).Once()
		env.OnActivity(validation.EvaluatePolicy, mock.Anything, mock.Anything).Return(allowed, nil).Once()
		env.OnActivity(executionActs.ExecuteInline, mock.Anything, mock.Anything).Return(execution.ExecuteResult{Plan: scalePlan}, nil).Once()
		env.OnActivity(validation.CheckRequester, mock.Anything, mock.Anything).
			Return(permanentErr(v1alpha1.ReasonForbidden, "grant revoked")).Once()
		env.RegisterDelayedCallback(func() { env.SignalWorkflow(SignalRollback, RollbackRequest{Requester: "bob"}) }, time.Second)
		env.ExecuteWorkflow(ExecutionWorkflow, in)
		s := result(t, env)
		require.Equal(t, v1alpha1.PhaseFailed, s.Phase, s.Message)
		assert.Equal(t, v1alpha1.ReasonRollbackFailed, s.Reason)
		assert.Contains(t, s.Message, "Forbidden: grant revoked")
	})
}
