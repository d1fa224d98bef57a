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
	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/actions"
)

func withConditions(in ExecutionInput, pre, post []v1alpha1.Condition) ExecutionInput {
	in.Spec.PreConditions, in.Spec.PostConditions = pre, post
	return in
}

func cond(name string, required bool) v1alpha1.Condition {
	return v1alpha1.Condition{Name: name, Rego: "package c\npass := true", Required: required, Timeout: v1alpha1.DurationOf(time.Second)}
}

func onCondition(env *testsuite.TestWorkflowEnvironment, name string, required, passed bool) {
	env.OnActivity(validation.EvaluateCondition, mock.Anything, mock.MatchedBy(func(r gate.ConditionRequest) bool { return r.Condition.Name == name })).
		Return(v1alpha1.ConditionResult{Name: name, Required: required, Passed: passed, Message: "pass is false: 1 of 3 ready"}, nil).Once()
}

// Long because it is a table: one row per branch of the validation and verification pipeline.
func TestPipelineBranches(t *testing.T) {
	runPhaseCases(t, []phaseCase{
		{
			name: "RBAC refused before the target is read",
			in:   scaleInput(0, false),
			setup: func(env *testsuite.TestWorkflowEnvironment) {
				env.OnActivity(validation.CheckSpec, mock.Anything, mock.Anything, mock.Anything).Return(nil)
				env.OnActivity(validation.CheckRBAC, mock.Anything, mock.Anything).Return(permanentErr(v1alpha1.ReasonForbidden, "may not patch"))
			},
			wantPhase: v1alpha1.PhaseFailed, wantReason: v1alpha1.ReasonForbidden,
			check: func(t *testing.T, s v1alpha1.KubernetesExecutionStatus) {
				assert.Equal(t, boolPtr(false), s.ValidationResults.RBACValidation)
				assert.Nil(t, s.ValidationResults.ResourceExists)
			},
		},
		{
			name: "policy deny is shown verbatim",
			in:   scaleInput(0, false),
			setup: func(env *testsuite.TestWorkflowEnvironment) {
				env.OnActivity(validation.CheckSpec, mock.Anything, mock.Anything, mock.Anything).Return(nil)
				env.OnActivity(validation.CheckRBAC, mock.Anything, mock.Anything).Return(nil)
				env.OnActivity(executionActs.InspectTarget, mock.Anything, mock.Anything).Return(scalePlan, nil)
				env.OnActivity(validation.EvaluatePolicy, mock.Anything, mock.Anything).Return(gate.PolicyResult{Validation: v1alpha1.PolicyValidation{
					PolicyName: "safety", Messages: []string{"no scaling in prod", "second reason"}}}, nil)
			},
			wantPhase: v1alpha1.PhaseFailed, wantReason: v1alpha1.ReasonPolicyDenied,
			check: func(t *testing.T, s v1alpha1.KubernetesExecutionStatus) {
				assert.Equal(t, "no scaling in prod; second reason", s.Message)
				assert.False(t, s.ValidationResults.PolicyValidation.Allowed)
			},
		},
		{
			name: "policy requires a dry-run",
			in:   scaleInput(0, false),
			setup: func(env *testsuite.TestWorkflowEnvironment) {
				env.OnActivity(validation.CheckSpec, mock.Anything, mock.Anything, mock.Anything).Return(nil)
				env.OnActivity(validation.CheckRBAC, mock.Anything, mock.Anything).Return(nil)
				env.OnActivity(executionActs.InspectTarget, mock.Anything, mock.Anything).Return(scalePlan, nil)
				env.OnActivity(validation.EvaluatePolicy, mock.Anything, mock.Anything).Return(gate.PolicyResult{Validation: v1alpha1.PolicyValidation{
					PolicyName: "safety", Allowed: true, RequiredDryRun: true}}, nil)
				env.OnActivity(executionActs.DryRun, mock.Anything, mock.Anything).Return(v1alpha1.DryRunResults{Performed: true, Success: true}, nil).Once()
				env.OnActivity(executionActs.ExecuteInline, mock.Anything, mock.Anything).Return(execution.ExecuteResult{Plan: scalePlan}, nil)
			},
			wantPhase: v1alpha1.PhaseCompleted, wantReason: v1alpha1.ReasonSucceeded,
		},
		{
			name: "required precondition fails, nothing executes",
			in:   withConditions(scaleInput(0, false), []v1alpha1.Condition{cond("healthy", true)}, nil),
			setup: func(env *testsuite.TestWorkflowEnvironment) {
				env.OnActivity(validation.CheckSpec, mock.Anything, mock.Anything, mock.Anything).Return(nil)
				allowAll(env)
				env.OnActivity(executionActs.InspectTarget, mock.Anything, mock.Anything).Return(scalePlan, nil)
				onCondition(env, "healthy", true, false)
			},
			wantPhase: v1alpha1.PhaseFailed, wantReason: v1alpha1.ReasonPreconditionFailed,
			check: func(t *testing.T, s v1alpha1.KubernetesExecutionStatus) {
				assert.Contains(t, s.Message, "required precondition healthy did not hold: pass is false")
				assert.Nil(t, s.ExecutionResults)
				require.Len(t, s.ValidationResults.PreConditionResults, 1)
			},
		},
		{
			name: "optional conditions fail as warnings",
			in:   withConditions(scaleInput(0, false), []v1alpha1.Condition{cond("soft-pre", false)}, []v1alpha1.Condition{cond("soft-post", false)}),
			setup: func(env *testsuite.TestWorkflowEnvironment) {
				env.OnActivity(validation.CheckSpec, mock.Anything, mock.Anything, mock.Anything).Return(nil)
				allowAll(env)
				env.OnActivity(executionActs.InspectTarget, mock.Anything, mock.Anything).Return(scalePlan, nil)
				onCondition(env, "soft-pre", false, false)
				onCondition(env, "soft-post", false, false)
				env.OnActivity(executionActs.ExecuteInline, mock.Anything, mock.Anything).Return(execution.ExecuteResult{Plan: scalePlan}, nil)
			},
			wantPhase: v1alpha1.PhaseCompleted, wantReason: v1alpha1.ReasonSucceeded,
			check: func(t *testing.T, s v1alpha1.KubernetesExecutionStatus) {
				assert.Contains(t, s.Message, "warnings: optional condition soft-pre did not hold")
				assert.Contains(t, s.Message, "optional condition soft-post did not hold")
			},
		},
		{
			name: "required postcondition fails: RollbackReady, then Failed",
			in:   withConditions(scaleInput(time.Hour, false), nil, []v1alpha1.Condition{cond("available", true)}),
			setup: func(env *testsuite.TestWorkflowEnvironment) {
				env.OnActivity(validation.CheckSpec, mock.Anything, mock.Anything, mock.Anything).Return(nil)
				allowAll(env)
				env.OnActivity(executionActs.InspectTarget, mock.Anything, mock.Anything).Return(scalePlan, nil)
				onCondition(env, "available", true, false)
				env.OnActivity(executionActs.ExecuteInline, mock.Anything, mock.Anything).Return(execution.ExecuteResult{Plan: scalePlan}, nil)
				env.RegisterDelayedCallback(func() {
					v, err := env.QueryWorkflow(QueryStatus)
					require.NoError(t, err)
					var s v1alpha1.KubernetesExecutionStatus
					require.NoError(t, v.Get(&s))
					assert.Equal(t, v1alpha1.PhaseRollbackReady, s.Phase)
					assert.Equal(t, v1alpha1.ReasonPostConditionFailed, s.Reason)
				}, time.Minute)
			},
			wantPhase: v1alpha1.PhaseFailed, wantReason: v1alpha1.ReasonPostConditionFailed,
			check: func(t *testing.T, s v1alpha1.KubernetesExecutionStatus) {
				assert.True(t, s.RollbackInformation.Available)
			},
		},
		{
			name: "rollback refused by policy",
			in:   scaleInput(time.Hour, false),
			setup: func(env *testsuite.TestWorkflowEnvironment) {
				env.OnActivity(validation.CheckSpec, mock.Anything, mock.Anything, mock.Anything).Return(nil)
				env.OnActivity(validation.CheckRBAC, mock.Anything, mock.Anything).Return(nil)
				env.OnActivity(executionActs.InspectTarget, mock.Anything, mock.Anything).Return(scalePlan, nil)
				env.OnActivity(validation.EvaluatePolicy, mock.Anything, mock.MatchedBy(func(r actions.Request) bool { return *r.Params.Replicas == 5 })).Return(allowed, nil)
				env.OnActivity(validation.EvaluatePolicy, mock.Anything, mock.MatchedBy(func(r actions.Request) bool { return *r.Params.Replicas == 3 })).
					Return(gate.PolicyResult{Validation: v1alpha1.PolicyValidation{Messages: []string{"freeze"}}}, nil)
				env.OnActivity(executionActs.ExecuteInline, mock.Anything, mock.Anything).Return(execution.ExecuteResult{Plan: scalePlan}, nil).Once()
				env.RegisterDelayedCallback(func() { env.SignalWorkflow(SignalRollback, RollbackRequest{Requester: "bob"}) }, time.Minute)
			},
			wantPhase: v1alpha1.PhaseFailed, wantReason: v1alpha1.ReasonRollbackFailed,
			check: func(t *testing.T, s v1alpha1.KubernetesExecutionStatus) {
				assert.Equal(t, "rollback refused: PolicyDenied: freeze", s.Message)
			},
		},
		{
			name: "job executor",
			in: func() ExecutionInput {
				in := scaleInput(0, false)
				in.Spec.Executor = v1alpha1.ExecutorJob
				return in
			}(),
			setup: func(env *testsuite.TestWorkflowEnvironment) {
				env.OnActivity(validation.CheckSpec, mock.Anything, mock.Anything, mock.Anything).Return(nil)
				allowAll(env)
				env.OnActivity(executionActs.InspectTarget, mock.Anything, mock.Anything).Return(scalePlan, nil)
				env.OnActivity(jobs.RunJob, mock.Anything, mock.MatchedBy(func(in execution.JobInput) bool {
					return in.ExecutionName == "scale-web" && in.MaxRetries == 2 && in.Timeout == defaultExecutionTimeout
				})).Return(execution.ExecuteResult{Plan: scalePlan, JobName: "remedy-scale-abc"}, nil).Once()
			},
			wantPhase: v1alpha1.PhaseCompleted, wantReason: v1alpha1.ReasonSucceeded,
			check: func(t *testing.T, s v1alpha1.KubernetesExecutionStatus) {
				assert.Equal(t, "remedy-scale-abc", s.ExecutionResults.JobName)
			},
		},
	})
}
