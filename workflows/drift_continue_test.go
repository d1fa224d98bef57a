package workflows

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/workflow"

	"github.com/remedy-dev/remedy/activities/drift"
	"github.com/remedy-dev/remedy/api/v1alpha1"
)

func TestDriftContinuesAsNewCarryingOpenDrifts(t *testing.T) {
	env := newDriftEnv(t, resolveAt(1_000_000, drift.DriftParentChanged))
	// The same drift reported over and over: each signal counts, none opens a new drift.
	for i := 0; i < maxDriftSignalsPerRun+5; i++ {
		env.signalAt(time.Duration(i)*100*time.Millisecond, driftSignal("a1"))
	}
	env.ExecuteWorkflow(DriftWorkflow, DriftInput{Parent: driftParent, Open: []OpenDrift{{Signal: driftSignal("old")}}, Resolved: 7})

	require.True(t, env.IsWorkflowCompleted())
	var can *workflow.ContinueAsNewError
	require.ErrorAs(t, env.GetWorkflowError(), &can)
	var next DriftInput
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &next))
	assert.Equal(t, driftParent, next.Parent)
	require.Len(t, next.Open, 2)
	assert.Equal(t, "old", next.Open[0].Signal.ID)
	assert.Equal(t, "a1", next.Open[1].Signal.ID)
	assert.Equal(t, json.RawMessage(`{"spec":{"replicas":2}}`), next.Open[1].Signal.NewObject)
	assert.Equal(t, 7, next.Resolved)
	assert.Equal(t, []string{"a1/Detected"}, env.phases(t),
		"the carried drift was reported by an earlier run")
}

func TestDriftContinuedRunAsksForCarriedDrifts(t *testing.T) {
	env := newDriftEnv(t, resolveAt(1_000_000, drift.DriftParentChanged))
	rars, _, writes := env.withApprovals()
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(SignalApprove, ApprovalSignal{Approver: "alice"}) }, 2*time.Second)
	env.ExecuteWorkflow(DriftWorkflow, DriftInput{Parent: driftParent, Open: []OpenDrift{{Signal: askingSignal("a1")}}})
	res := env.result(t)
	require.Len(t, *rars, 1)
	require.Len(t, *writes, 1)
	assert.Equal(t, []ResolvedDrift{{ID: "a1", Reason: drift.DriftApproved}}, res.Closed)
	assert.Equal(t, []string{"a1/Resolved"}, env.phases(t), "Detected was posted by the earlier run")
}

func TestDriftContinuesAsNewWhileAnApprovalIsOpenAndTheNextRunResumesIt(t *testing.T) {
	env := newDriftEnv(t, resolveAt(1_000_000, drift.DriftParentChanged))
	rars, decisions, _ := env.withApprovals()
	start := env.Now()
	env.signalAt(0, askingSignal("a1"))
	env.signalAt(time.Second, askingSignal("b2"))
	// Polling every 5s through a long wait: Temporal suggests continuing as new.
	env.RegisterDelayedCallback(func() { env.SetContinueAsNewSuggested(true) }, time.Minute)
	env.ExecuteWorkflow(DriftWorkflow, DriftInput{Parent: driftParent})

	require.True(t, env.IsWorkflowCompleted())
	var can *workflow.ContinueAsNewError
	require.ErrorAs(t, env.GetWorkflowError(), &can)
	var next DriftInput
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &next))
	name := DriftApprovalRequestName("a1", start)
	require.Len(t, *rars, 1)
	assert.Empty(t, *decisions, "the open request is neither decided nor closed")
	require.Len(t, next.Open, 2)
	assert.Equal(t, name, next.Open[0].ApprovalRequest)
	assert.Equal(t, (*rars)[0].RequiredBy, next.Open[0].ApprovalRequiredBy)
	assert.Empty(t, next.Open[1].ApprovalRequest, "b2 waits for its turn in the next run")

	// The next run waits on the same request, and a decision sent to it lands.
	env2 := newDriftEnv(t, resolveAt(1_000_000, drift.DriftParentChanged))
	rars2, decisions2, writes2 := env2.withApprovals()
	env2.RegisterDelayedCallback(func() {
		env2.SignalWorkflow(SignalApprove, ApprovalSignal{Approver: "alice", Request: name, Namespace: "shop"})
	}, 2*time.Second)
	env2.RegisterDelayedCallback(func() { env2.SignalWorkflow(SignalApprove, ApprovalSignal{Approver: "alice"}) }, 3*time.Second)
	env2.ExecuteWorkflow(DriftWorkflow, next)
	res := env2.result(t)
	require.Len(t, *rars2, 1, "only b2's request is created")
	assert.Equal(t, "web-b2", (*rars2)[0].Context.Target.Name)
	require.Len(t, *decisions2, 2)
	assert.Equal(t, name, (*decisions2)[0].Name)
	assert.Equal(t, v1alpha1.DecisionApproved, (*decisions2)[0].Decision.Decision)
	require.Len(t, *writes2, 2)
	assert.Equal(t, []ResolvedDrift{{ID: "a1", Reason: drift.DriftApproved}, {ID: "b2", Reason: drift.DriftApproved}}, res.Closed)
}

func TestDriftResumedRequestExpiresOnItsOriginalTime(t *testing.T) {
	env := newDriftEnv(t, resolveAt(50, drift.DriftParentChanged)) // after the expiry
	rars, decisions, _ := env.withApprovals()
	start := env.Now()
	open := OpenDrift{Signal: askingSignal("a1"), ApprovalRequest: "drift-a1-1", ApprovalRequiredBy: start.Add(3 * time.Minute)}
	env.ExecuteWorkflow(DriftWorkflow, DriftInput{Parent: driftParent, Open: []OpenDrift{open}})
	require.True(t, env.IsWorkflowCompleted())
	assert.Empty(t, *rars)
	require.Len(t, *decisions, 1)
	assert.Equal(t, "drift-a1-1", (*decisions)[0].Name)
	assert.Equal(t, v1alpha1.DecisionExpired, (*decisions)[0].Decision.Decision)
	assert.True(t, start.Add(3*time.Minute).Equal((*decisions)[0].Decision.At), "expired at the carried requiredBy")
}
