package workflows

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"

	"github.com/remedy-dev/remedy/activities/execution"
	"github.com/remedy-dev/remedy/activities/gate"
	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/actions"
)

// The read-only checks of a new run are local activities; only the step that
// changes the target goes through the task queue. A check that fails
// transiently is retried and still reports its result.
func TestChecksRunAsLocalActivities(t *testing.T) {
	env := newEnv(t)
	env.OnActivity(validation.CheckSpec, mock.Anything, mock.Anything, mock.Anything).Return(nil).Once()
	allowAll(env)
	env.OnActivity(executionActs.InspectTarget, mock.Anything, mock.Anything).Return(actions.Plan{}, errors.New("etcdserver: leader changed")).Once()
	env.OnActivity(executionActs.InspectTarget, mock.Anything, mock.Anything).Return(scalePlan, nil).Once()
	env.OnActivity(executionActs.DryRun, mock.Anything, mock.Anything).Return(v1alpha1.DryRunResults{Performed: true, Success: true}, nil).Once()
	env.OnActivity(executionActs.ExecuteInline, mock.Anything, mock.Anything).Return(execution.ExecuteResult{Plan: scalePlan}, nil).Once()

	// Local activities start on goroutines of their own.
	var mu sync.Mutex
	local, remote := map[string]int{}, map[string]int{}
	env.SetOnLocalActivityStartedListener(func(info *activity.Info, _ context.Context, _ []any) {
		mu.Lock()
		defer mu.Unlock()
		local[info.ActivityType.Name]++
	})
	env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
		mu.Lock()
		defer mu.Unlock()
		remote[info.ActivityType.Name]++
	})
	env.ExecuteWorkflow(ExecutionWorkflow, scaleInput(0, true))
	s := result(t, env)
	require.Equal(t, v1alpha1.PhaseCompleted, s.Phase, s.Message)
	assert.Equal(t, boolPtr(true), s.ValidationResults.ResourceExists, "the retried check reports its result")
	assert.Equal(t, boolPtr(true), s.ValidationResults.RBACValidation)
	assert.Equal(t, boolPtr(true), s.ValidationResults.ParameterValidation)
	assert.Equal(t, &allowed.Validation, s.ValidationResults.PolicyValidation)

	for _, name := range []string{"VerifyExecution", "CheckSpec", "CheckRequester", "CheckRBAC", "EvaluatePolicy", "DryRun"} {
		assert.Equal(t, 1, local[name], "%s runs once as a local activity", name)
	}
	assert.Equal(t, 2, local["InspectTarget"], "the failed read is retried locally")
	assert.Equal(t, []string{"ExecuteInline"}, slices.Sorted(maps.Keys(remote)), "only the write goes through the task queue")
}

// Checks start in two groups, but the first failure in the documented order
// (docs/concepts.md, Validating) still decides the run, and nothing reads the target or the policy before the
// subject and the requester hold.
func TestParallelChecksKeepTheSeedsOrder(t *testing.T) {
	forbidden := permanentErr(v1alpha1.ReasonForbidden, "no")
	for _, tt := range []struct {
		name                     string
		subject, spec, requester error
		rbac, target             error
		reason                   string
		readTarget               bool
	}{
		{name: "forged subject", subject: permanentErr(v1alpha1.ReasonSubjectMismatch, "gone"), spec: permanentErr(v1alpha1.ReasonInvalidParameters, "bad"),
			reason: v1alpha1.ReasonSubjectMismatch},
		{name: "bad spec before a refused requester", spec: permanentErr(v1alpha1.ReasonInvalidParameters, "bad"), requester: forbidden,
			reason: v1alpha1.ReasonInvalidParameters},
		{name: "refused requester", requester: forbidden, reason: v1alpha1.ReasonForbidden},
		{name: "RBAC before a missing target", rbac: forbidden, target: permanentErr(v1alpha1.ReasonNotFound, "gone"),
			reason: v1alpha1.ReasonForbidden, readTarget: true},
		{name: "missing target", target: permanentErr(v1alpha1.ReasonNotFound, "gone"), reason: v1alpha1.ReasonNotFound, readTarget: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			env := untrustedEnvOf(t, &testsuite.WorkflowTestSuite{})
			started := &startedChecks{n: map[string]int{}}
			env.SetOnLocalActivityStartedListener(func(info *activity.Info, _ context.Context, _ []any) { started.add(info.ActivityType.Name) })
			together := started.together
			first := []string{"VerifyExecution", "CheckSpec", "CheckRequester"}
			second := []string{"CheckRBAC", "InspectTarget", "EvaluatePolicy"}
			env.OnActivity(subjects.VerifyExecution, mock.Anything, mock.Anything, mock.Anything).Return(
				func(context.Context, gate.SubjectRef, v1alpha1.KubernetesExecutionSpec) error {
					together(first...)
					return tt.subject
				}).Maybe()
			env.OnActivity(validation.CheckSpec, mock.Anything, mock.Anything, mock.Anything).Return(
				func(context.Context, v1alpha1.KubernetesExecutionSpec, actions.Request) error {
					together(first...)
					return tt.spec
				}).Maybe()
			env.OnActivity(validation.CheckRequester, mock.Anything, mock.Anything).Return(
				func(context.Context, gate.RequesterCheck) error { together(first...); return tt.requester }).Maybe()
			env.OnActivity(validation.CheckRBAC, mock.Anything, mock.Anything).Return(
				func(context.Context, actions.Request) error { together(second...); return tt.rbac }).Maybe()
			env.OnActivity(executionActs.InspectTarget, mock.Anything, mock.Anything).Return(
				func(context.Context, actions.Request) (actions.Plan, error) {
					together(second...)
					return scalePlan, tt.target
				}).Maybe()
			env.OnActivity(validation.EvaluatePolicy, mock.Anything, mock.Anything).Return(
				func(context.Context, actions.Request) (gate.PolicyResult, error) {
					together(second...)
					return allowed, nil
				}).Maybe()
			env.ExecuteWorkflow(ExecutionWorkflow, scaleInput(0, false))
			s := result(t, env)
			require.Equal(t, v1alpha1.PhaseFailed, s.Phase)
			assert.Equal(t, tt.reason, s.Reason, s.Message)
			for _, name := range first {
				assert.Equal(t, 1, started.count(name), "%s starts in the first group", name)
			}
			for _, name := range second {
				assert.Equal(t, tt.readTarget, started.count(name) == 1, "%s starts only once the subject and requester hold", name)
			}
		})
	}
}

// startedChecks counts the local activities started, by name; checks run
// on goroutines of their own.
type startedChecks struct {
	mu sync.Mutex
	n  map[string]int
}

func (s *startedChecks) add(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n[name]++
}

func (s *startedChecks) count(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n[name]
}

// together returns once every check of group has started (or after a
// second, when they never start together): a check that answers only then
// cannot end the run before the rest are seen starting.
func (s *startedChecks) together(group ...string) {
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		n := 0
		for _, name := range group {
			n += s.count(name)
		}
		if n == len(group) {
			return
		}
	}
}

// Each check started ahead of its turn runs once, with the arguments of its
// own call: the requester's grant for the action and, after a rollback is
// asked for, for the inverse action, which is its own check and not the
// forward one's result.
func TestEveryCheckGetsItsOwnArguments(t *testing.T) {
	in := scaleInput(time.Minute, true)
	plan := scalePlan
	plan.Rollback.RollbackAction = "restore-replicas"
	env := newEnv(t)
	allowAll(env)
	env.OnActivity(validation.CheckSpec, mock.Anything, mock.Anything, mock.Anything).Return(nil).Twice()
	env.OnActivity(executionActs.InspectTarget, mock.Anything, mock.Anything).Return(plan, nil).Once()
	env.OnActivity(executionActs.DryRun, mock.Anything, mock.Anything).Return(v1alpha1.DryRunResults{Performed: true, Success: true}, nil).Once()
	env.OnActivity(executionActs.ExecuteInline, mock.Anything, mock.Anything).Return(execution.ExecuteResult{Plan: plan}, nil).Twice()
	var mu sync.Mutex
	args := map[string][][]any{}
	env.SetOnLocalActivityStartedListener(func(info *activity.Info, _ context.Context, a []any) {
		mu.Lock()
		defer mu.Unlock()
		args[info.ActivityType.Name] = append(args[info.ActivityType.Name], a)
	})
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(SignalRollback, RollbackRequest{Requester: "bob"}) }, time.Second)
	env.ExecuteWorkflow(ExecutionWorkflow, in)
	s := result(t, env)
	require.Equal(t, v1alpha1.ReasonRolledBack, s.Reason, s.Message)

	forward := func(t *testing.T, a any) {
		t.Helper()
		req, ok := a.(actions.Request)
		require.True(t, ok, "%T is no actions.Request", a)
		assert.Equal(t, actions.Request{Action: "scale", Target: in.Spec.Target, Params: *in.Spec.Parameters, Token: req.Token}, req)
	}
	grant := func(action string) gate.RequesterCheck {
		return gate.RequesterCheck{Namespace: "shop", Action: action, Target: in.Spec.Target}
	}
	assert.Equal(t, [][]any{{gate.SubjectRef{Namespace: "shop", Name: "scale-web", UID: "u1"}, in.Spec}}, args["VerifyExecution"])
	require.Len(t, args["CheckSpec"], 1, "the rollback's spec check is an activity")
	assert.Equal(t, in.Spec, args["CheckSpec"][0][0])
	forward(t, args["CheckSpec"][0][1])
	assert.Equal(t, [][]any{{grant("scale")}, {grant("restore-replicas")}}, args["CheckRequester"],
		"the rollback asks for the inverse action's grant")
	assert.Equal(t, [][]any{{grant("scale")}}, args["MayReadTarget"])
	for _, name := range []string{"CheckRBAC", "InspectTarget", "EvaluatePolicy", "DryRun"} {
		require.Len(t, args[name], 1, "%s runs once as a local activity", name)
		require.Len(t, args[name][0], 1, name)
		forward(t, args[name][0][0])
	}
}
