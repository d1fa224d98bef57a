package workflows

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"

	"github.com/remedy-dev/remedy/activities/gate"
	"github.com/remedy-dev/remedy/api/v1alpha1"
)

// policyRequires is a verdict that requires approval; distinct is its
// require_distinct_approver (by default the same as require_approval).
func policyRequires(distinct bool) gate.PolicyResult {
	return gate.PolicyResult{Validation: v1alpha1.PolicyValidation{PolicyName: "safety", Allowed: true, RequiredApproval: true},
		ApprovalTimeout: "1h", DistinctApprover: distinct}
}

// requestedBy is a scale of shop/web requested by requester with an
// approval spec (its timeout an hour).
func requestedBy(requester string, spec *v1alpha1.ApprovalSpec) ExecutionInput {
	in := scaleInput(0, false)
	in.Spec.Requester = &v1alpha1.Requester{Username: requester}
	if spec != nil {
		spec.Timeout = v1alpha1.DurationOf(time.Hour)
	}
	in.Spec.Approval = spec
	return in
}

// decideUpdate sends a decide update and reports its refusal, or nil once accepted.
func decideUpdate(t *testing.T, env *testsuite.TestWorkflowEnvironment, req DecideRequest, refused *error) func() {
	return func() {
		env.UpdateWorkflow(UpdateDecide, "", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { *refused = err }, OnAccept: func() {},
			OnComplete: func(_ any, err error) { require.NoError(t, err) },
		}, req)
	}
}

// The requester's own approval is dropped with a Warning when the request
// needs another approver; the next approver's counts.
func TestDutiesSelfApprovalBySignalIsIgnored(t *testing.T) {
	s, logs := loggedSuite()
	env, created, recorded := approvalEnvOf(t, s, policyRequires(true))
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(SignalApprove, ApprovalSignal{Approver: "alice", Reason: "mine"}) }, time.Minute)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(SignalApprove, ApprovalSignal{Approver: " alice ", Via: "kubectl", Request: created.Name, Namespace: created.Namespace})
	}, time.Minute+time.Second)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(SignalApprove, ApprovalSignal{Approver: "bob", Reason: "checked"}) }, 2*time.Minute)
	env.ExecuteWorkflow(ExecutionWorkflow, requestedBy("alice", nil))
	st := result(t, env)

	assert.Equal(t, v1alpha1.PhaseCompleted, st.Phase, st.Message)
	assert.Equal(t, gate.Decision{Decision: v1alpha1.DecisionApproved, DecidedBy: "bob", Via: v1alpha1.DecidedViaSignal, Message: "checked", At: recorded.At}, *recorded)
	assert.Equal(t, "alice", created.Context.Requester)
	assert.True(t, created.Context.RequireDistinctApprover, "the request tells the approver")
	waiting := st.PhaseTransitions[1]
	assert.Equal(t, v1alpha1.PhaseWaitingApproval, waiting.Phase)
	assert.Contains(t, waiting.Message, "; an approver other than the requester alice must approve")
	assert.Contains(t, logs.warnings(), "ignoring approval decision: alice requested this change, and approval request shop/scale-web-approval needs an approver other than the requester decision Approved approver alice via temporal-signal")
	assert.Contains(t, logs.warnings(), "approver  alice  via kubectl", "a relayed kubectl self-approval is ignored too")
}

// The decide update refuses a self-approval before it reaches history.
func TestDutiesSelfApprovalByUpdateIsRefused(t *testing.T) {
	env, _, recorded := approvalEnv(t, policyRequires(true))
	var refused, accepted error
	env.RegisterDelayedCallback(decideUpdate(t, env, DecideRequest{Approved: true, Approver: "alice"}, &refused), time.Minute)
	env.RegisterDelayedCallback(decideUpdate(t, env, DecideRequest{Approved: true, Approver: "bob", Reason: "go"}, &accepted), 2*time.Minute)
	env.ExecuteWorkflow(ExecutionWorkflow, requestedBy("alice", nil))
	st := result(t, env)

	require.Error(t, refused)
	assert.EqualError(t, refused, "alice requested this change, and approval request shop/scale-web-approval needs an approver other than the requester")
	require.NoError(t, accepted)
	assert.Equal(t, "bob", recorded.DecidedBy)
	assert.Equal(t, v1alpha1.DecidedViaUpdate, recorded.Via)
	assert.Equal(t, v1alpha1.PhaseCompleted, st.Phase, st.Message)
}

// Where the two levels combine: the policy (on by default for approvals it
// requires) and the spec, which only makes it stricter. A requester may
// always reject their own request.
func TestDutiesEffectiveRule(t *testing.T) {
	for _, tc := range []struct {
		name     string
		pol      gate.PolicyResult
		spec     *v1alpha1.ApprovalSpec
		decision DecideRequest
		distinct bool
	}{
		{name: "policy-required approval needs another approver", pol: policyRequires(true),
			decision: DecideRequest{Approved: true, Approver: "alice"}, distinct: true},
		{name: "spec-required approval does not by default", pol: allowed, spec: &v1alpha1.ApprovalSpec{Required: true},
			decision: DecideRequest{Approved: true, Approver: "alice"}},
		{name: "the spec asks for it", pol: allowed, spec: &v1alpha1.ApprovalSpec{Required: true, RequireDistinctApprover: true},
			decision: DecideRequest{Approved: true, Approver: "alice"}, distinct: true},
		{name: "the spec is stricter than a policy that turned it off", pol: policyRequires(false), spec: &v1alpha1.ApprovalSpec{RequireDistinctApprover: true},
			decision: DecideRequest{Approved: true, Approver: "alice"}, distinct: true},
		{name: "a policy that turned it off", pol: policyRequires(false),
			decision: DecideRequest{Approved: true, Approver: "alice"}},
		{name: "the policy asks it for a spec-required approval", pol: gate.PolicyResult{Validation: allowed.Validation, DistinctApprover: true},
			spec: &v1alpha1.ApprovalSpec{Required: true}, decision: DecideRequest{Approved: true, Approver: "alice"}, distinct: true},
		{name: "the requester may reject their own request", pol: policyRequires(true),
			decision: DecideRequest{Approved: false, Approver: "alice", Reason: "withdrawn"}, distinct: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env, created, recorded := approvalEnv(t, tc.pol)
			var refused error
			env.RegisterDelayedCallback(decideUpdate(t, env, tc.decision, &refused), time.Minute)
			env.ExecuteWorkflow(ExecutionWorkflow, requestedBy("alice", tc.spec))
			st := result(t, env)

			assert.Equal(t, tc.distinct, created.Context.RequireDistinctApprover)
			selfApproval := tc.distinct && tc.decision.Approved
			if selfApproval {
				assert.ErrorContains(t, refused, "needs an approver other than the requester")
				assert.Equal(t, v1alpha1.DecisionExpired, recorded.Decision, "the run kept waiting")
				return
			}
			require.NoError(t, refused)
			assert.Equal(t, "alice", recorded.DecidedBy)
			if tc.decision.Approved {
				assert.Equal(t, v1alpha1.PhaseCompleted, st.Phase, st.Message)
			} else {
				assert.Equal(t, v1alpha1.ReasonApprovalRejected, st.Reason)
			}
		})
	}
}

// No path takes an anonymous decision: a reject signal with an empty or blank
// approver is dropped with a Warning and the run keeps waiting (here until it
// expires), and the update refuses one.
func TestDutiesAnonymousDecisionsAreIgnored(t *testing.T) {
	s, logs := loggedSuite()
	env, _, recorded := approvalEnvOf(t, s, allowed)
	var refused error
	var waiting v1alpha1.Phase
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(SignalReject, ApprovalSignal{}) }, time.Minute)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(SignalReject, map[string]any{}) }, time.Minute+time.Second)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(SignalApprove, ApprovalSignal{Approver: " \t", Via: "kubectl"}) }, time.Minute+2*time.Second)
	env.RegisterDelayedCallback(decideUpdate(t, env, DecideRequest{Approved: false, Approver: "  "}, &refused), time.Minute+3*time.Second)
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(QueryStatus)
		require.NoError(t, err)
		var st v1alpha1.KubernetesExecutionStatus
		require.NoError(t, v.Get(&st))
		waiting = st.Phase
	}, 2*time.Minute)
	env.ExecuteWorkflow(ExecutionWorkflow, approvalInput(time.Hour))
	st := result(t, env)

	assert.Equal(t, v1alpha1.PhaseWaitingApproval, waiting, "still waiting after the anonymous decisions")
	assert.EqualError(t, refused, "approver is required: an anonymous decision is not taken")
	assert.Equal(t, v1alpha1.DecisionExpired, recorded.Decision)
	assert.Equal(t, v1alpha1.ReasonApprovalExpired, st.Reason)
	assert.Contains(t, logs.warnings(), "ignoring approval decision: approver is required: an anonymous decision is not taken decision Rejected approver  via temporal-signal")
	assert.Contains(t, logs.warnings(), "ignoring approval decision: approver is required: an anonymous decision is not taken decision Approved approver  \t via kubectl")
	assert.NotContains(t, st.Message, "unnamed")
}
