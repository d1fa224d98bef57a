package workflows

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"

	"github.com/remedy-dev/remedy/activities/drift"
	"github.com/remedy-dev/remedy/api/v1alpha1"
)

// Long because it is a table: one row per way a drift's approval request ends.
func TestDriftApproval(t *testing.T) {
	tests := []struct {
		name string
		// decide runs 2s after the drift signal; nil lets the request expire.
		decide       func(e *driftEnv)
		resolveCheck int
		wantDecision v1alpha1.Decision
		wantMessage  string
		wantWrites   []string
		wantWrite    drift.DriftDecisionInput
		wantClosed   ResolvedDrift
	}{
		{
			name:         "approve writes a once approval and resolves the drift",
			decide:       func(e *driftEnv) { e.SignalWorkflow(SignalApprove, ApprovalSignal{Approver: "alice"}) },
			resolveCheck: 1_000_000,
			wantDecision: v1alpha1.DecisionApproved,
			wantWrites:   []string{"approval"},
			wantWrite: drift.DriftDecisionInput{Parent: drift.DriftObject(driftParent),
				Child: drift.DriftObject(driftSignal("a1").Child), Generation: 3},
			wantClosed: ResolvedDrift{ID: "a1", Reason: drift.DriftApproved},
		},
		{
			name: "reject writes a rejection with the reason; the drift stays until the parent changes",
			decide: func(e *driftEnv) {
				e.SignalWorkflow(SignalReject, ApprovalSignal{Approver: "bob", Reason: "the controller is wrong"})
			},
			resolveCheck: 3,
			wantDecision: v1alpha1.DecisionRejected,
			wantMessage:  "the controller is wrong",
			wantWrites:   []string{"rejection"},
			wantWrite: drift.DriftDecisionInput{Parent: drift.DriftObject(driftParent),
				Child: drift.DriftObject(driftSignal("a1").Child), Generation: 3, Reason: "rejected by bob: the controller is wrong"},
			wantClosed: ResolvedDrift{ID: "a1", Reason: drift.DriftParentChanged},
		},
		{
			name: "the decide update works as the signals do",
			decide: func(e *driftEnv) {
				e.UpdateWorkflow(UpdateDecide, "decide-1", &testsuite.TestUpdateCallback{
					OnAccept: func() {}, OnReject: func(err error) { panic(err) }, OnComplete: func(any, error) {},
				}, DecideRequest{Approved: true, Approver: "carol"})
			},
			resolveCheck: 1_000_000,
			wantDecision: v1alpha1.DecisionApproved,
			wantWrites:   []string{"approval"},
			wantWrite: drift.DriftDecisionInput{Parent: drift.DriftObject(driftParent),
				Child: drift.DriftObject(driftSignal("a1").Child), Generation: 3},
			wantClosed: ResolvedDrift{ID: "a1", Reason: drift.DriftApproved},
		},
		{
			name:         "an expired request writes nothing; the drift stays until the parent changes",
			resolveCheck: 200, // 1000s: after the 10m request expired
			wantDecision: v1alpha1.DecisionExpired,
			wantClosed:   ResolvedDrift{ID: "a1", Reason: drift.DriftParentChanged},
		},
		{
			name:         "a drift that resolves first supersedes its request",
			resolveCheck: 1,
			wantDecision: v1alpha1.DecisionExpired,
			wantMessage:  "superseded: the drift resolved: ParentChanged",
			wantClosed:   ResolvedDrift{ID: "a1", Reason: drift.DriftParentChanged},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := newDriftEnv(t, resolveAt(tt.resolveCheck, drift.DriftParentChanged))
			rars, decisions, writes := env.withApprovals()
			start := env.Now()
			env.signalAt(0, askingSignal("a1"))
			if tt.decide != nil {
				env.RegisterDelayedCallback(func() { tt.decide(env) }, 2*time.Second)
			}
			env.ExecuteWorkflow(DriftWorkflow, DriftInput{Parent: driftParent})
			res := env.result(t)

			require.Len(t, *rars, 1)
			rar := (*rars)[0]
			assert.Equal(t, DriftApprovalRequestName("a1", start), rar.Name)
			assert.Equal(t, fmt.Sprintf("drift-a1-%d", start.Unix()), rar.Name)
			assert.Equal(t, "shop", rar.Namespace)
			assert.Equal(t, v1alpha1.ObjectRef{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "web"}, rar.Subject)
			assert.Equal(t, "uid-web", rar.SubjectUID)
			assert.Equal(t, DriftApprovalAction, rar.Context.Action)
			assert.Equal(t, v1alpha1.ObjectRef{APIVersion: "apps/v1", Kind: "ReplicaSet", Namespace: "shop", Name: "web-a1"}, rar.Context.Target)
			assert.Contains(t, rar.Context.Reason, "wants to update ReplicaSet web-a1 while Deployment web (generation 3) has not changed")

			require.Len(t, *decisions, 1)
			assert.Equal(t, rar.Name, (*decisions)[0].Name)
			assert.Equal(t, tt.wantDecision, (*decisions)[0].Decision.Decision)
			if tt.wantMessage != "" {
				assert.Equal(t, tt.wantMessage, (*decisions)[0].Decision.Message)
			}
			assert.Equal(t, tt.wantWrites, env.writes)
			if len(tt.wantWrites) > 0 {
				want := tt.wantWrite
				want.ApprovalRequest = rar.Name // the gate finds the decision on it
				assert.Equal(t, []drift.DriftDecisionInput{want}, *writes)
			}
			assert.Equal(t, []ResolvedDrift{tt.wantClosed}, res.Closed)
			assert.Equal(t, []string{"a1/Detected", "a1/Resolved"}, env.phases(t))
		})
	}
}

func TestDriftApprovalsAreAskedOneAtATime(t *testing.T) {
	env := newDriftEnv(t, resolveAt(1_000_000, drift.DriftParentChanged))
	rars, _, writes := env.withApprovals()
	start := env.Now()
	env.signalAt(0, askingSignal("a1"))
	env.signalAt(time.Second, askingSignal("b2"))
	// The first approval decides the open request, a1's; the second then decides b2's.
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(SignalApprove, ApprovalSignal{Approver: "alice"}) }, 2*time.Second)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(SignalApprove, ApprovalSignal{Approver: "alice", Request: DriftApprovalRequestName("b2", start.Add(2*time.Second))})
	}, 3*time.Second)
	env.ExecuteWorkflow(DriftWorkflow, DriftInput{Parent: driftParent})
	res := env.result(t)
	require.Len(t, *rars, 2)
	assert.Equal(t, DriftApprovalRequestName("a1", start), (*rars)[0].Name)
	assert.Equal(t, DriftApprovalRequestName("b2", start.Add(2*time.Second)), (*rars)[1].Name, "b2 is asked once a1 is decided")
	require.Len(t, *writes, 2)
	assert.Equal(t, "web-a1", (*writes)[0].Child.Name)
	assert.Equal(t, "web-b2", (*writes)[1].Child.Name)
	assert.Equal(t, []ResolvedDrift{{ID: "a1", Reason: drift.DriftApproved}, {ID: "b2", Reason: drift.DriftApproved}}, res.Closed)
}
