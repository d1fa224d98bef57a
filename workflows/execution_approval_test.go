package workflows

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"

	"github.com/remedy-dev/remedy/activities/approval"
	"github.com/remedy-dev/remedy/activities/execution"
	"github.com/remedy-dev/remedy/activities/gate"
	"github.com/remedy-dev/remedy/api/v1alpha1"
)

func approvalInput(timeout time.Duration) ExecutionInput {
	in := scaleInput(0, false)
	in.Spec.Approval = &v1alpha1.ApprovalSpec{Required: true}
	if timeout > 0 {
		in.Spec.Approval.Timeout = v1alpha1.DurationOf(timeout)
	}
	return in
}

// approvalEnv mocks validation and execution and records the approval
// request the workflow creates and the decision it records.
func approvalEnv(t *testing.T, pol gate.PolicyResult) (*testsuite.TestWorkflowEnvironment, *approval.ApprovalRequestInput, *gate.Decision) {
	return approvalEnvOf(t, &testsuite.WorkflowTestSuite{}, pol)
}

func approvalEnvOf(t *testing.T, s *testsuite.WorkflowTestSuite, pol gate.PolicyResult) (
	*testsuite.TestWorkflowEnvironment, *approval.ApprovalRequestInput, *gate.Decision,
) {
	env := newEnvOf(t, s)
	env.RegisterActivity(&approval.Approvals{})
	env.OnActivity(validation.CheckSpec, mock.Anything, mock.Anything, mock.Anything).Return(nil)
	env.OnActivity(validation.CheckRBAC, mock.Anything, mock.Anything).Return(nil)
	env.OnActivity(executionActs.InspectTarget, mock.Anything, mock.Anything).Return(scalePlan, nil)
	env.OnActivity(validation.EvaluatePolicy, mock.Anything, mock.Anything).Return(pol, nil)
	env.OnActivity(executionActs.ExecuteInline, mock.Anything, mock.Anything).Return(execution.ExecuteResult{Plan: scalePlan}, nil).Maybe()
	created, recorded := &approval.ApprovalRequestInput{}, &gate.Decision{}
	env.OnActivity(approvals.CreateApprovalRequest, mock.Anything, mock.Anything).Return(func(_ context.Context, in approval.ApprovalRequestInput) error {
		*created = in
		return nil
	}).Once()
	env.OnActivity(approvals.RecordDecision, mock.Anything, mock.Anything).Return(func(_ context.Context, in approval.DecisionInput) (gate.Decision, error) {
		*recorded = in.Decision
		return in.Decision, nil
	}).Maybe()
	return env, created, recorded
}

func TestApprovalTimeoutHierarchy(t *testing.T) {
	requireApproval := func(timeout string) gate.PolicyResult {
		return gate.PolicyResult{Validation: v1alpha1.PolicyValidation{PolicyName: "safety", Allowed: true, RequiredApproval: true}, ApprovalTimeout: timeout}
	}
	for _, tc := range []struct {
		name      string
		in        ExecutionInput
		pol       gate.PolicyResult
		namespace *time.Duration // nil: the ConfigMap must not be read
		want      time.Duration
	}{
		{name: "spec wins over policy", in: approvalInput(5 * time.Minute), pol: requireApproval("10m"), want: 5 * time.Minute},
		{name: "policy when spec has none", in: scaleInput(0, false), pol: requireApproval("10m"), want: 10 * time.Minute},
		{name: "namespace ConfigMap next", in: approvalInput(0), pol: allowed, namespace: ptrDuration(20 * time.Minute), want: 20 * time.Minute},
		{name: "15m default last", in: approvalInput(0), pol: allowed, namespace: ptrDuration(0), want: 15 * time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env, created, recorded := approvalEnv(t, tc.pol)
			if tc.namespace != nil {
				env.OnActivity(approvals.NamespaceApprovalTimeout, mock.Anything, "shop").Return(*tc.namespace, nil).Once()
			}
			start := env.Now()
			env.ExecuteWorkflow(ExecutionWorkflow, tc.in)
			s := result(t, env)

			wait := created.RequiredBy.Sub(start)
			assert.GreaterOrEqual(t, wait, tc.want)
			assert.Less(t, wait, tc.want+time.Second, "requiredBy is rounded up to the second only")
			assert.Equal(t, v1alpha1.PhaseFailed, s.Phase)
			assert.Equal(t, v1alpha1.ReasonApprovalExpired, s.Reason)
			assert.Equal(t, v1alpha1.DecisionExpired, recorded.Decision)
			assert.Equal(t, v1alpha1.DecidedViaTimer, recorded.Via)
			assert.True(t, recorded.At.Equal(created.RequiredBy), "expired at %s, required by %s", recorded.At, created.RequiredBy)
			assert.Equal(t, &v1alpha1.LocalRef{Name: "scale-web-approval"}, s.ApprovalRequestRef)
		})
	}
}

func ptrDuration(d time.Duration) *time.Duration { return &d }

func phasesOf(s v1alpha1.KubernetesExecutionStatus) []v1alpha1.Phase {
	var out []v1alpha1.Phase
	for _, tr := range s.PhaseTransitions {
		out = append(out, tr.Phase)
	}
	return out
}

// Long because it is a table: one row per way an approval is decided, refused or expires.
func TestApprovalDecisions(t *testing.T) {
	signal := func(name string, s ApprovalSignal) func(env *testsuite.TestWorkflowEnvironment) {
		return func(env *testsuite.TestWorkflowEnvironment) { env.SignalWorkflow(name, s) }
	}
	for _, tc := range []struct {
		name       string
		decide     []func(env *testsuite.TestWorkflowEnvironment)
		kubectl    *gate.Decision // already on the RAR when the workflow records
		wantPhase  v1alpha1.Phase
		wantReason string
		want       gate.Decision
	}{
		{
			name:      "approve signal executes",
			decide:    []func(*testsuite.TestWorkflowEnvironment){signal(SignalApprove, ApprovalSignal{Approver: "alice", Reason: "ok"})},
			wantPhase: v1alpha1.PhaseCompleted, wantReason: v1alpha1.ReasonSucceeded,
			want: gate.Decision{Decision: v1alpha1.DecisionApproved, DecidedBy: "alice", Via: v1alpha1.DecidedViaSignal, Message: "ok"},
		},
		{
			name:      "reject signal fails with the rejector and reason",
			decide:    []func(*testsuite.TestWorkflowEnvironment){signal(SignalReject, ApprovalSignal{Approver: "bob", Reason: "not now"})},
			wantPhase: v1alpha1.PhaseFailed, wantReason: v1alpha1.ReasonApprovalRejected,
			want: gate.Decision{Decision: v1alpha1.DecisionRejected, DecidedBy: "bob", Via: v1alpha1.DecidedViaSignal, Message: "not now"},
		},
		{
			name: "first decision wins",
			decide: []func(*testsuite.TestWorkflowEnvironment){
				signal(SignalApprove, ApprovalSignal{Approver: "alice"}),
				signal(SignalReject, ApprovalSignal{Approver: "mallory", Reason: "too late"}),
			},
			wantPhase: v1alpha1.PhaseCompleted, wantReason: v1alpha1.ReasonSucceeded,
			want: gate.Decision{Decision: v1alpha1.DecisionApproved, DecidedBy: "alice", Via: v1alpha1.DecidedViaSignal},
		},
		{
			name:      "relayed kubectl decision keeps its channel",
			decide:    []func(*testsuite.TestWorkflowEnvironment){signal(SignalApprove, ApprovalSignal{Approver: "carol", Via: "kubectl"})},
			wantPhase: v1alpha1.PhaseCompleted, wantReason: v1alpha1.ReasonSucceeded,
			want: gate.Decision{Decision: v1alpha1.DecisionApproved, DecidedBy: "carol", Via: v1alpha1.DecidedViaKubectl},
		},
		{
			name:       "a decision already on the request wins over the signal",
			decide:     []func(*testsuite.TestWorkflowEnvironment){signal(SignalApprove, ApprovalSignal{Approver: "alice"})},
			kubectl:    &gate.Decision{Decision: v1alpha1.DecisionRejected, DecidedBy: "dave", Via: v1alpha1.DecidedViaKubectl, Message: "no"},
			wantPhase:  v1alpha1.PhaseFailed,
			wantReason: v1alpha1.ReasonApprovalRejected,
			want:       gate.Decision{Decision: v1alpha1.DecisionApproved, DecidedBy: "alice", Via: v1alpha1.DecidedViaSignal},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newEnv(t)
			env.RegisterActivity(&approval.Approvals{})
			env.OnActivity(validation.CheckSpec, mock.Anything, mock.Anything, mock.Anything).Return(nil)
			allowAll(env)
			env.OnActivity(executionActs.InspectTarget, mock.Anything, mock.Anything).Return(scalePlan, nil)
			env.OnActivity(executionActs.ExecuteInline, mock.Anything, mock.Anything).Return(execution.ExecuteResult{Plan: scalePlan}, nil).Maybe()
			env.OnActivity(approvals.CreateApprovalRequest, mock.Anything, mock.Anything).Return(nil).Once()
			var recorded gate.Decision
			env.OnActivity(approvals.RecordDecision, mock.Anything, mock.Anything).Return(func(_ context.Context, in approval.DecisionInput) (gate.Decision, error) {
				recorded = in.Decision
				if tc.kubectl != nil {
					return *tc.kubectl, nil
				}
				return in.Decision, nil
			}).Once()
			for i, d := range tc.decide {
				env.RegisterDelayedCallback(func() { d(env) }, time.Minute+time.Duration(i)*time.Second)
			}
			env.ExecuteWorkflow(ExecutionWorkflow, approvalInput(time.Hour))
			s := result(t, env)
			assert.Equal(t, tc.wantPhase, s.Phase, s.Message)
			assert.Equal(t, tc.wantReason, s.Reason)
			recorded.At = time.Time{}
			assert.Equal(t, tc.want, recorded)
			assert.Equal(t, v1alpha1.PhaseWaitingApproval, phasesOf(s)[1], "WaitingApproval follows Validating")
			if tc.wantReason == v1alpha1.ReasonApprovalRejected {
				d := tc.want
				if tc.kubectl != nil {
					d = *tc.kubectl
				}
				assert.Equal(t, "rejected by "+d.DecidedBy+" via "+string(d.Via)+": "+d.Message, s.Message)
			}
		})
	}
}

func TestDecideUpdate(t *testing.T) {
	env, _, recorded := approvalEnv(t, allowed)
	var rejections []error
	var accepted string
	update := func(req DecideRequest, wantAccepted bool) func() {
		return func() {
			env.UpdateWorkflow(UpdateDecide, "", &testsuite.TestUpdateCallback{
				OnReject: func(err error) {
					if wantAccepted {
						t.Errorf("decide %+v refused: %v", req, err)
					}
					rejections = append(rejections, err)
				},
				OnAccept: func() {},
				OnComplete: func(v any, err error) {
					require.True(t, wantAccepted, "update %+v must be refused", req)
					require.NoError(t, err)
					accepted = v.(string)
				},
			}, req)
		}
	}
	env.RegisterDelayedCallback(update(DecideRequest{Approved: true}, false), time.Minute)
	env.RegisterDelayedCallback(update(DecideRequest{Approved: true, Approver: "alice", Reason: "go"}, true), 2*time.Minute)
	// The run now waits in RollbackReady; a second decision is refused.
	env.RegisterDelayedCallback(update(DecideRequest{Approved: false, Approver: "bob"}, false), 3*time.Minute)
	in := approvalInput(time.Hour)
	in.Spec.RollbackWindow = v1alpha1.DurationOf(time.Hour)
	env.ExecuteWorkflow(ExecutionWorkflow, in)
	s := result(t, env)

	require.Len(t, rejections, 2)
	assert.ErrorContains(t, rejections[0], "approver is required")
	assert.ErrorContains(t, rejections[1], "already taken")
	assert.Equal(t, string(v1alpha1.DecisionApproved), accepted)
	assert.Equal(t, gate.Decision{Decision: v1alpha1.DecisionApproved, DecidedBy: "alice", Via: v1alpha1.DecidedViaUpdate, Message: "go",
		At: recorded.At}, *recorded)
	assert.Equal(t, v1alpha1.PhaseCompleted, s.Phase)
	assert.Contains(t, phasesOf(s), v1alpha1.PhaseRollbackReady)
}

func TestCancelWhileWaitingForApproval(t *testing.T) {
	env, _, _ := approvalEnv(t, allowed)
	env.RegisterDelayedCallback(env.CancelWorkflow, time.Minute)
	env.ExecuteWorkflow(ExecutionWorkflow, approvalInput(time.Hour))
	s := result(t, env)
	assert.Equal(t, v1alpha1.PhaseFailed, s.Phase)
	assert.Equal(t, v1alpha1.ReasonCanceled, s.Reason)
}

// A request in another namespace that names this workflow (and the open
// request's name) decides nothing: signals are ignored, updates refused.
func TestApprovalDecisionsFromAnotherNamespaceAreIgnored(t *testing.T) {
	env, created, recorded := approvalEnv(t, allowed)
	var refused error
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(SignalApprove, ApprovalSignal{Approver: "mallory", Via: "kubectl", Request: created.Name, Namespace: "tenant-a"})
	}, time.Minute)
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(UpdateDecide, "", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { refused = err }, OnAccept: func() {},
			OnComplete: func(any, error) { t.Error("a decide update from another namespace was accepted") },
		}, DecideRequest{Approved: true, Approver: "mallory", Request: created.Name, Namespace: "tenant-a"})
	}, time.Minute+time.Second)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(SignalReject, ApprovalSignal{Approver: "bob", Via: "kubectl", Request: created.Name, Namespace: created.Namespace})
	}, 2*time.Minute)
	env.ExecuteWorkflow(ExecutionWorkflow, approvalInput(time.Hour))
	s := result(t, env)

	require.Error(t, refused)
	assert.ErrorContains(t, refused, "approval request tenant-a/"+created.Name+" is not open (the open one is shop/"+created.Name+")")
	assert.Equal(t, v1alpha1.PhaseFailed, s.Phase)
	assert.Equal(t, v1alpha1.ReasonApprovalRejected, s.Reason)
	assert.Equal(t, "bob", recorded.DecidedBy, "the decision from the request's own namespace is the first that counts")
}
