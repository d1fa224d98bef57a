package workflows

import (
	"bytes"
	"context"
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
	"github.com/remedy-dev/remedy/internal/seal"
)

// A person's rollback through the codec server runs only if that person may
// run the inverse action themselves; a refused one leaves the window open,
// and the body's requester name counts for nothing.
func TestPersonRollbackIsAuthorizedForThePerson(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := untrustedEnvOf(t, &s)
	keys, err := seal.NewKeyring("k1", map[string][]byte{"k1": bytes.Repeat([]byte{7}, seal.KeySize)})
	require.NoError(t, err)
	env.SetDataConverter(sealingConverter{DataConverter: seal.DataConverter(keys), keys: keys})
	env.OnActivity(subjects.VerifyExecution, mock.Anything, mock.Anything, mock.Anything).Return(nil).Maybe()
	env.OnActivity(validation.MayReadTarget, mock.Anything, mock.Anything).Return(gate.Readable{Allowed: true}, nil).Maybe()
	var asked []string
	env.OnActivity(validation.CheckRequester, mock.Anything, mock.Anything).Return(func(_ context.Context, in gate.RequesterCheck) error {
		if in.Requester == nil {
			return nil
		}
		asked = append(asked, in.Requester.Username+" "+in.Action)
		if in.Requester.Username == "mallory" {
			return permanentErr(v1alpha1.ReasonForbidden, "mallory may not execute scale")
		}
		return nil
	})
	env.OnActivity(validation.CheckSpec, mock.Anything, mock.Anything, mock.Anything).Return(nil)
	allowAll(env)
	env.OnActivity(executionActs.InspectTarget, mock.Anything, mock.Anything).Return(scalePlan, nil)
	env.OnActivity(executionActs.ExecuteInline, mock.Anything, mock.MatchedBy(func(w gate.Write) bool { return *w.Request.Params.Replicas == 5 })).
		Return(execution.ExecuteResult{Plan: scalePlan}, nil).Once()
	back := actions.Plan{Change: v1alpha1.ResourceChange{Kind: "Deployment", Namespace: "shop", Name: "web", Action: "scaled", Before: "replicas: 5", After: "replicas: 3"}}
	env.OnActivity(executionActs.ExecuteInline, mock.Anything, mock.MatchedBy(func(w gate.Write) bool { return *w.Request.Params.Replicas == 3 })).
		Return(execution.ExecuteResult{Plan: back}, nil).Once()
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(SignalRollback, personSays{who: seal.Person{Username: "mallory"}, body: RollbackRequest{Requester: "alice"}})
	}, time.Minute)
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(QueryStatus)
		require.NoError(t, err)
		var st v1alpha1.KubernetesExecutionStatus
		require.NoError(t, v.Get(&st))
		assert.Equal(t, v1alpha1.PhaseRollbackReady, st.Phase, "a refused person's rollback leaves the window open")
		env.SignalWorkflow(SignalRollback, personSays{who: seal.Person{Username: "alice", Groups: []string{"oncall"}}, body: RollbackRequest{Requester: "root"}})
	}, 2*time.Minute)
	env.ExecuteWorkflow(ExecutionWorkflow, scaleInput(time.Hour, false))
	require.True(t, env.IsWorkflowCompleted())
	var res ExecutionResult
	require.NoError(t, env.GetWorkflowResult(&res))
	assert.Equal(t, v1alpha1.PhaseCompleted, res.Status.Phase)
	assert.Equal(t, v1alpha1.ReasonRolledBack, res.Status.Reason)
	assert.Equal(t, []string{"mallory scale", "alice scale"}, asked, "each person asked for the inverse action, as themselves")
	env.AssertExpectations(t)
}
