package workflows

import (
	"context"
	"encoding/json"
	"sync"
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

// pushLog holds the status pushes of each test environment, in order.
var pushLog sync.Map // *testsuite.TestWorkflowEnvironment -> *[]status.ExecutionStatusPush

func recordPushes(env *testsuite.TestWorkflowEnvironment) {
	log := &[]status.ExecutionStatusPush{}
	pushLog.Store(env, log)
	env.OnActivity(statuses.PushExecutionStatus, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in status.ExecutionStatusPush) error {
			// The test environment passes the workflow's own status, whose
			// pointers and slices change after the push: keep what was pushed.
			in.Status = *in.Status.DeepCopy()
			*log = append(*log, in)
			return nil
		}).Maybe()
}

func pushesOf(env *testsuite.TestWorkflowEnvironment) []status.ExecutionStatusPush {
	v, _ := pushLog.Load(env)
	return *v.(*[]status.ExecutionStatusPush)
}

// Each phase change writes .status once, in order, with the next sequence;
// the last write is the final phase object.
func TestExecutionPushesEachPhaseChange(t *testing.T) {
	for _, tc := range []struct {
		name   string
		window time.Duration
		phases []v1alpha1.Phase
	}{
		{"no rollback window", 0, []v1alpha1.Phase{v1alpha1.PhaseValidating, v1alpha1.PhaseExecuting, v1alpha1.PhaseCompleted}},
		{"rollback window closes", time.Minute, []v1alpha1.Phase{v1alpha1.PhaseValidating, v1alpha1.PhaseExecuting, v1alpha1.PhaseRollbackReady, v1alpha1.PhaseCompleted}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newEnv(t)
			allowAll(env)
			env.OnActivity(validation.CheckSpec, mock.Anything, mock.Anything, mock.Anything).Return(nil)
			env.OnActivity(executionActs.InspectTarget, mock.Anything, mock.Anything).Return(scalePlan, nil)
			env.OnActivity(executionActs.ExecuteInline, mock.Anything, mock.Anything).Return(execution.ExecuteResult{Plan: scalePlan}, nil)
			env.ExecuteWorkflow(ExecutionWorkflow, scaleInput(tc.window, false))
			final := result(t, env)

			pushes := pushesOf(env)
			require.Len(t, pushes, len(tc.phases), "one write per phase change")
			for i, p := range pushes {
				assert.Equal(t, int64(i+1), p.Status.Sequence)
				assert.Equal(t, tc.phases[i], p.Status.Phase)
				assert.Len(t, p.Status.PhaseTransitions, i+1)
				assert.Equal(t, "shop", p.Namespace)
				assert.Equal(t, "u1", p.UID)
				assert.Equal(t, "scale", p.Action)
				assert.Equal(t, "default-test-workflow-id", p.Status.WorkflowID)
			}
			last, err := json.Marshal(pushes[len(pushes)-1].Status)
			require.NoError(t, err)
			want, err := json.Marshal(final)
			require.NoError(t, err)
			assert.JSONEq(t, string(want), string(last), "the last write is the final phase object")
		})
	}
}

// A write that keeps failing does not stop the run: the next phase change writes again.
func TestExecutionRunsOnWhenPushFails(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflow(ExecutionWorkflow)
	env.RegisterActivity(&execution.Execution{})
	env.RegisterActivity(&gate.Validation{})
	env.RegisterActivity(&gate.Subjects{})
	env.RegisterActivity(&status.Statuses{})
	trustAll(env)
	allowAll(env)
	env.OnActivity(validation.CheckSpec, mock.Anything, mock.Anything, mock.Anything).Return(nil)
	env.OnActivity(executionActs.InspectTarget, mock.Anything, mock.Anything).Return(scalePlan, nil)
	env.OnActivity(executionActs.ExecuteInline, mock.Anything, mock.Anything).Return(execution.ExecuteResult{Plan: scalePlan}, nil)
	failing := 0
	env.OnActivity(statuses.PushExecutionStatus, mock.Anything, mock.Anything).Return(
		func(context.Context, status.ExecutionStatusPush) error { failing++; return assert.AnError })
	env.ExecuteWorkflow(ExecutionWorkflow, scaleInput(0, false))
	st := result(t, env)
	assert.Equal(t, v1alpha1.PhaseCompleted, st.Phase)
	assert.Equal(t, int64(3), st.Sequence)
	assert.Greater(t, failing, 3, "each write was retried")
}
