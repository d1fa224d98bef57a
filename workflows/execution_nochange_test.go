package workflows

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"

	"github.com/remedy-dev/remedy/activities/execution"
	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/actions"
)

// A run whose target is already in the desired state writes nothing: it
// completes at once as NoChange, asks no approval and offers no rollback.
func TestNoChange(t *testing.T) {
	same := scalePlan
	same.Change.Before, same.NoOp = "replicas: 5", true
	same.Rollback.RollbackParameters = &v1alpha1.ActionParameters{Replicas: same.Rollback.RollbackParameters.Replicas}
	approvalRequired := func(in ExecutionInput) ExecutionInput {
		in.Spec.Approval = &v1alpha1.ApprovalSpec{Required: true}
		in.Spec.PreConditions = []v1alpha1.Condition{cond("healthy", true)}
		return in
	}
	noRollback := func(t *testing.T, s v1alpha1.KubernetesExecutionStatus) {
		require.NotNil(t, s.RollbackInformation)
		assert.False(t, s.RollbackInformation.Available)
		assert.Contains(t, s.RollbackInformation.Reason, "nothing to roll back")
		for _, tr := range s.PhaseTransitions {
			assert.NotContains(t, []v1alpha1.Phase{v1alpha1.PhaseWaitingApproval, v1alpha1.PhaseRollbackReady}, tr.Phase)
		}
		require.Len(t, s.ExecutionResults.ResourcesAffected, 1)
		assert.Equal(t, "unchanged", s.ExecutionResults.ResourcesAffected[0].Action)
	}
	runPhaseCases(t, []phaseCase{
		{
			name:      "found in Validating: no approval, preconditions or write",
			in:        approvalRequired(scaleInput(time.Hour, true)),
			setup:     func(env *testsuite.TestWorkflowEnvironment) { passChecks(env, same) },
			wantPhase: v1alpha1.PhaseCompleted, wantReason: v1alpha1.ReasonNoChange,
			check: func(t *testing.T, s v1alpha1.KubernetesExecutionStatus) {
				noRollback(t, s)
				assert.Equal(t, "replicas: 5 -> 5: the target is already in the desired state; nothing was written", s.Message)
				assert.Nil(t, s.ValidationResults.DryRunResults, "a no-op needs no dry-run")
				assert.Empty(t, s.ValidationResults.PreConditionResults)
			},
		},
		{
			name: "found by the write: someone made the change first",
			in:   scaleInput(time.Hour, false),
			setup: func(env *testsuite.TestWorkflowEnvironment) {
				passChecks(env, scalePlan)
				env.OnActivity(executionActs.ExecuteInline, mock.Anything, mock.Anything).Return(execution.ExecuteResult{Plan: same}, nil).Once()
			},
			wantPhase: v1alpha1.PhaseCompleted, wantReason: v1alpha1.ReasonNoChange,
			check: func(t *testing.T, s v1alpha1.KubernetesExecutionStatus) {
				noRollback(t, s)
				assert.NotNil(t, s.ExecutionResults.StartTime)
			},
		},
	})
}

// passChecks passes every check of the Validating phase, planning plan.
func passChecks(env *testsuite.TestWorkflowEnvironment, plan actions.Plan) {
	env.OnActivity(validation.CheckSpec, mock.Anything, mock.Anything, mock.Anything).Return(nil)
	allowAll(env)
	env.OnActivity(executionActs.InspectTarget, mock.Anything, mock.Anything).Return(plan, nil)
}

// A step whose action has no inverse (a restart) completes on its own: it
// never sits in RollbackReady waiting for its request.
func TestRestartStepOffersNoRollback(t *testing.T) {
	s := newSaga()
	s.replicas["a"] = 1
	env := s.env(t)
	env.ExecuteWorkflow(RemediationWorkflow, RemediationInput{Namespace: "shop", Name: "fix", UID: "rr1",
		Spec: v1alpha1.RemediationRequestSpec{Steps: []v1alpha1.RemediationStep{restartStep("bounce", "a"), scaleStep("more", "a", 3)}}})
	require.NoError(t, env.GetWorkflowError())
	var bounce, more []v1alpha1.Phase
	for _, p := range pushesOf(env) {
		switch p.Name {
		case "fix-bounce":
			bounce = append(bounce, p.Status.Phase)
		case "fix-more":
			more = append(more, p.Status.Phase)
		}
	}
	assert.Equal(t, []v1alpha1.Phase{v1alpha1.PhaseValidating, v1alpha1.PhaseExecuting, v1alpha1.PhaseCompleted}, bounce)
	assert.Contains(t, more, v1alpha1.PhaseRollbackReady, "a step with an inverse keeps it available until the request ends")
	assert.Equal(t, []string{"restart a", "scale a 3"}, s.writes)
}
