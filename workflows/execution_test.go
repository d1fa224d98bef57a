package workflows

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"k8s.io/utils/ptr"

	"github.com/remedy-dev/remedy/activities/execution"
	"github.com/remedy-dev/remedy/activities/gate"
	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/actions"
)

func scaleInput(window time.Duration, dryRun bool) ExecutionInput {
	return ExecutionInput{Namespace: "shop", Name: "scale-web", UID: "u1", Spec: v1alpha1.KubernetesExecutionSpec{
		Action:         "scale",
		Target:         v1alpha1.ObjectRef{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "web"},
		Parameters:     &v1alpha1.ActionParameters{Replicas: ptr.To[int32](5)},
		DryRun:         dryRun,
		RollbackWindow: v1alpha1.DurationOf(window),
	}}
}

var scalePlan = actions.Plan{
	Change: v1alpha1.ResourceChange{Kind: "Deployment", Namespace: "shop", Name: "web", Action: "scaled", Before: "replicas: 3", After: "replicas: 5"},
	Rollback: v1alpha1.RollbackInformation{Available: true, RollbackAction: "scale",
		RollbackParameters: &v1alpha1.ActionParameters{Replicas: ptr.To[int32](3)}},
}

func newEnv(t *testing.T) *testsuite.TestWorkflowEnvironment {
	return newEnvOf(t, &testsuite.WorkflowTestSuite{})
}

func newEnvOf(t *testing.T, s *testsuite.WorkflowTestSuite) *testsuite.TestWorkflowEnvironment {
	env := untrustedEnvOf(t, s)
	trustAll(env)
	return env
}

// trustAll passes the subject and requester checks, which most cases do not exercise.
func trustAll(env *testsuite.TestWorkflowEnvironment) {
	env.OnActivity(subjects.VerifyExecution, mock.Anything, mock.Anything, mock.Anything).Return(nil).Maybe()
	env.OnActivity(validation.CheckRequester, mock.Anything, mock.Anything).Return(nil).Maybe()
	env.OnActivity(validation.MayReadTarget, mock.Anything, mock.Anything).Return(gate.Readable{Allowed: true}, nil).Maybe()
}

func result(t *testing.T, env *testsuite.TestWorkflowEnvironment) v1alpha1.KubernetesExecutionStatus {
	t.Helper()
	require.True(t, env.IsWorkflowCompleted())
	var r ExecutionResult
	err := env.GetWorkflowResult(&r)
	require.NoError(t, FinalResult(err, &r))
	assertClosedAs(t, r.Status.Phase, r.Status.Reason, err)
	return r.Status
}

var allowed = gate.PolicyResult{Validation: v1alpha1.PolicyValidation{PolicyName: "none", Allowed: true}}

// allowAll passes RBAC and policy, which most cases do not exercise.
func allowAll(env *testsuite.TestWorkflowEnvironment) {
	env.OnActivity(validation.CheckRBAC, mock.Anything, mock.Anything).Return(nil).Maybe()
	env.OnActivity(validation.EvaluatePolicy, mock.Anything, mock.Anything).Return(allowed, nil).Maybe()
}

func permanentErr(reason, msg string) error {
	return temporal.NewNonRetryableApplicationError(msg, reason, errors.New(msg))
}

// Long because it is a table: one row per path a run takes through its phases.
func TestExecutionPhases(t *testing.T) {
	runPhaseCases(t, []phaseCase{
		{
			name: "no rollback window completes at once",
			in:   scaleInput(0, true),
			setup: func(env *testsuite.TestWorkflowEnvironment) {
				env.OnActivity(validation.CheckSpec, mock.Anything, mock.Anything, mock.Anything).Return(nil).Once()
				allowAll(env)
				env.OnActivity(executionActs.InspectTarget, mock.Anything, mock.Anything).Return(scalePlan, nil).Once()
				env.OnActivity(executionActs.DryRun, mock.Anything, mock.Anything).Return(v1alpha1.DryRunResults{Performed: true, Success: true, EstimatedImpact: "replicas: 3 -> 5"}, nil).Once()
				env.OnActivity(executionActs.ExecuteInline, mock.Anything, mock.Anything).Return(execution.ExecuteResult{Plan: scalePlan, Retries: 1}, nil).Once()
			},
			wantPhase: v1alpha1.PhaseCompleted, wantReason: v1alpha1.ReasonSucceeded,
			check: func(t *testing.T, s v1alpha1.KubernetesExecutionStatus) {
				assert.Equal(t, "replicas: 3 -> 5", s.ValidationResults.DryRunResults.EstimatedImpact)
				assert.Equal(t, []v1alpha1.ResourceChange{scalePlan.Change}, s.ExecutionResults.ResourcesAffected)
				assert.Equal(t, int32(1), s.ExecutionResults.RetriesAttempted)
				assert.True(t, s.RollbackInformation.Available)
			},
		},
		{
			name: "rollback window closes",
			in:   scaleInput(time.Hour, false),
			setup: func(env *testsuite.TestWorkflowEnvironment) {
				env.OnActivity(validation.CheckSpec, mock.Anything, mock.Anything, mock.Anything).Return(nil)
				allowAll(env)
				env.OnActivity(executionActs.InspectTarget, mock.Anything, mock.Anything).Return(scalePlan, nil)
				env.OnActivity(executionActs.ExecuteInline, mock.Anything, mock.Anything).Return(execution.ExecuteResult{Plan: scalePlan}, nil).Once()
				env.RegisterDelayedCallback(func() {
					v, err := env.QueryWorkflow(QueryStatus)
					require.NoError(t, err)
					var s v1alpha1.KubernetesExecutionStatus
					require.NoError(t, v.Get(&s))
					assert.Equal(t, v1alpha1.PhaseRollbackReady, s.Phase)
				}, 30*time.Minute)
			},
			wantPhase: v1alpha1.PhaseCompleted, wantReason: v1alpha1.ReasonSucceeded,
		},
		{
			name: "rollback signal runs the inverse action",
			in:   scaleInput(time.Hour, false),
			setup: func(env *testsuite.TestWorkflowEnvironment) {
				env.OnActivity(validation.CheckSpec, mock.Anything, mock.Anything, mock.Anything).Return(nil)
				allowAll(env)
				env.OnActivity(executionActs.InspectTarget, mock.Anything, mock.Anything).Return(scalePlan, nil)
				env.OnActivity(executionActs.ExecuteInline, mock.Anything, mock.MatchedBy(func(w gate.Write) bool { return *w.Request.Params.Replicas == 5 })).
					Return(execution.ExecuteResult{Plan: scalePlan}, nil).Once()
				back := actions.Plan{Change: v1alpha1.ResourceChange{Kind: "Deployment", Namespace: "shop", Name: "web", Action: "scaled", Before: "replicas: 5", After: "replicas: 3"}}
				env.OnActivity(executionActs.ExecuteInline, mock.Anything, mock.MatchedBy(func(w gate.Write) bool { return *w.Request.Params.Replicas == 3 })).
					Return(execution.ExecuteResult{Plan: back}, nil).Once()
				env.RegisterDelayedCallback(func() {
					env.SignalWorkflow(SignalRollback, RollbackRequest{Requester: "alice", Reason: "errors up"})
				}, time.Minute)
			},
			wantPhase: v1alpha1.PhaseCompleted, wantReason: v1alpha1.ReasonRolledBack,
			check: func(t *testing.T, s v1alpha1.KubernetesExecutionStatus) {
				require.Len(t, s.ExecutionResults.ResourcesAffected, 2)
				assert.Equal(t, "rolled back", s.ExecutionResults.ResourcesAffected[1].Action)
			},
		},
		{
			name: "invalid parameters",
			in:   scaleInput(0, false),
			setup: func(env *testsuite.TestWorkflowEnvironment) {
				env.OnActivity(validation.CheckSpec, mock.Anything, mock.Anything, mock.Anything).Return(permanentErr(v1alpha1.ReasonInvalidParameters, "scale needs replicas"))
			},
			wantPhase: v1alpha1.PhaseFailed, wantReason: v1alpha1.ReasonInvalidParameters,
			check: func(t *testing.T, s v1alpha1.KubernetesExecutionStatus) {
				assert.Equal(t, ptr.To(false), s.ValidationResults.ParameterValidation)
				assert.Equal(t, "scale needs replicas", s.Message)
			},
		},
		{
			name: "missing target",
			in:   scaleInput(0, false),
			setup: func(env *testsuite.TestWorkflowEnvironment) {
				env.OnActivity(validation.CheckSpec, mock.Anything, mock.Anything, mock.Anything).Return(nil)
				allowAll(env)
				env.OnActivity(executionActs.InspectTarget, mock.Anything, mock.Anything).Return(actions.Plan{}, permanentErr(v1alpha1.ReasonNotFound, `deployments.apps "web" not found`))
			},
			wantPhase: v1alpha1.PhaseFailed, wantReason: v1alpha1.ReasonNotFound,
			check: func(t *testing.T, s v1alpha1.KubernetesExecutionStatus) {
				assert.Equal(t, ptr.To(false), s.ValidationResults.ResourceExists)
				assert.Nil(t, s.ExecutionResults)
			},
		},
		{
			name: "dry-run refused",
			in:   scaleInput(0, true),
			setup: func(env *testsuite.TestWorkflowEnvironment) {
				env.OnActivity(validation.CheckSpec, mock.Anything, mock.Anything, mock.Anything).Return(nil)
				allowAll(env)
				env.OnActivity(executionActs.InspectTarget, mock.Anything, mock.Anything).Return(scalePlan, nil)
				env.OnActivity(executionActs.DryRun, mock.Anything, mock.Anything).Return(v1alpha1.DryRunResults{}, permanentErr(v1alpha1.ReasonDryRunFailed, "admission webhook denied"))
			},
			wantPhase: v1alpha1.PhaseFailed, wantReason: v1alpha1.ReasonDryRunFailed,
			check: func(t *testing.T, s v1alpha1.KubernetesExecutionStatus) {
				assert.False(t, s.ValidationResults.DryRunResults.Success)
				assert.Nil(t, s.ExecutionResults, "a failed dry-run executes nothing")
			},
		},
		{
			name: "forbidden write",
			in:   scaleInput(0, false),
			setup: func(env *testsuite.TestWorkflowEnvironment) {
				env.OnActivity(validation.CheckSpec, mock.Anything, mock.Anything, mock.Anything).Return(nil)
				allowAll(env)
				env.OnActivity(executionActs.InspectTarget, mock.Anything, mock.Anything).Return(scalePlan, nil)
				env.OnActivity(executionActs.ExecuteInline, mock.Anything, mock.Anything).Return(execution.ExecuteResult{}, permanentErr(v1alpha1.ReasonForbidden, "cannot patch"))
			},
			wantPhase: v1alpha1.PhaseFailed, wantReason: v1alpha1.ReasonForbidden,
			check: func(t *testing.T, s v1alpha1.KubernetesExecutionStatus) {
				assert.Nil(t, s.RollbackInformation, "nothing changed, so there is nothing to roll back")
			},
		},
		{
			name: "execution timeout",
			in:   scaleInput(0, false),
			setup: func(env *testsuite.TestWorkflowEnvironment) {
				env.OnActivity(validation.CheckSpec, mock.Anything, mock.Anything, mock.Anything).Return(nil)
				allowAll(env)
				env.OnActivity(executionActs.InspectTarget, mock.Anything, mock.Anything).Return(scalePlan, nil)
				env.OnActivity(executionActs.ExecuteInline, mock.Anything, mock.Anything).Return(execution.ExecuteResult{}, temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_SCHEDULE_TO_CLOSE, nil))
			},
			wantPhase: v1alpha1.PhaseFailed, wantReason: v1alpha1.ReasonExecutionTimeout,
		},
	})
}

// phaseCase runs ExecutionWorkflow with mocked activities and checks where it ends.
type phaseCase struct {
	name       string
	in         ExecutionInput
	setup      func(env *testsuite.TestWorkflowEnvironment)
	wantPhase  v1alpha1.Phase
	wantReason string
	check      func(t *testing.T, s v1alpha1.KubernetesExecutionStatus)
}

func runPhaseCases(t *testing.T, cases []phaseCase) {
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env := newEnv(t)
			tc.setup(env)
			env.ExecuteWorkflow(ExecutionWorkflow, tc.in)
			s := result(t, env)
			assert.Equal(t, tc.wantPhase, s.Phase, s.Message)
			assert.Equal(t, tc.wantReason, s.Reason)
			if tc.check != nil {
				tc.check(t, s)
			}
		})
	}
}

// assertClosedAs checks that a run's workflow closed as its final phase
// says: canceled when Canceled, completed unless Failed, else failed with
// the reason as the error type (what the Web UI shows).
func assertClosedAs(t *testing.T, phase v1alpha1.Phase, reason string, err error) {
	t.Helper()
	if reason == v1alpha1.ReasonCanceled {
		var canceled *temporal.CanceledError
		require.ErrorAs(t, err, &canceled, "a canceled run closes its workflow canceled")
		return
	}
	if phase != v1alpha1.PhaseFailed {
		require.NoError(t, err, "a run that did not fail completes its workflow")
		return
	}
	var app *temporal.ApplicationError
	require.ErrorAs(t, err, &app, "a failed run closes its workflow failed")
	assert.Equal(t, reason, app.Type(), "the error type is the reason")
	assert.True(t, app.NonRetryable())
}
