package workflows

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/remedy-dev/remedy/activities/execution"
	"github.com/remedy-dev/remedy/activities/gate"
	"github.com/remedy-dev/remedy/api/v1alpha1"
)

// While preconditions poll, .status shows the checks that passed and the
// condition being evaluated: validationResults is not {} until they end.
func TestPreconditionsShowProgress(t *testing.T) {
	env := newEnv(t)
	allowAll(env)
	env.OnActivity(validation.CheckSpec, mock.Anything, mock.Anything, mock.Anything).Return(nil)
	env.OnActivity(executionActs.InspectTarget, mock.Anything, mock.Anything).Return(scalePlan, nil)
	env.OnActivity(executionActs.ExecuteInline, mock.Anything, mock.Anything).Return(execution.ExecuteResult{Plan: scalePlan}, nil)
	held := func(name string) v1alpha1.ConditionResult {
		return v1alpha1.ConditionResult{Name: name, Required: true, Passed: true, Attempts: 3, EvaluatedAt: &metav1.Time{Time: time.Unix(1, 0)}}
	}
	for _, name := range []string{"ready", "quiet"} {
		env.OnActivity(validation.EvaluateCondition, mock.Anything, mock.MatchedBy(func(r gate.ConditionRequest) bool { return r.Condition.Name == name })).
			Return(held(name), nil).Once()
	}
	in := scaleInput(0, false)
	in.Spec.PreConditions = []v1alpha1.Condition{
		{Name: "ready", Rego: "package x\npass := true", Required: true, Timeout: v1alpha1.DurationOf(time.Minute)},
		{Name: "quiet", Rego: "package x\npass := true", Required: true},
	}
	env.ExecuteWorkflow(ExecutionWorkflow, in)
	final := result(t, env)
	assert.Equal(t, v1alpha1.PhaseCompleted, final.Phase)

	var progress [][]v1alpha1.ConditionResult
	for _, p := range pushesOf(env) {
		vr := p.Status.ValidationResults
		if p.Status.Phase != v1alpha1.PhaseValidating || len(vr.PreConditionResults) == 0 {
			continue
		}
		require.NotNil(t, vr.ParameterValidation, "the checks done before are written with the first condition")
		assert.True(t, *vr.RBACValidation)
		assert.True(t, *vr.ResourceExists)
		require.NotNil(t, vr.PolicyValidation)
		progress = append(progress, vr.PreConditionResults)
	}
	require.Len(t, progress, 2, "one write before each condition")
	assert.Equal(t, []v1alpha1.ConditionResult{{Name: "ready", Required: true, Message: "evaluating, for up to 1m0s"}}, progress[0])
	assert.Equal(t, []v1alpha1.ConditionResult{held("ready"), {Name: "quiet", Required: true, Message: "evaluating, for up to 30s"}}, progress[1])
	assert.Equal(t, []v1alpha1.ConditionResult{held("ready"), held("quiet")}, final.ValidationResults.PreConditionResults)
}
