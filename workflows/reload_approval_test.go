package workflows

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/remedy-dev/remedy/activities/approval"
	"github.com/remedy-dev/remedy/activities/gate"
	"github.com/remedy-dev/remedy/activities/reload"
	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/reloadrule"
)

// gatedEnv is a reload environment whose approval activities record what the
// workflow asked, recorded and declined.
type gatedEnv struct {
	env      *testsuite.TestWorkflowEnvironment
	restarts *[]restartCall
	asked    []approval.ApprovalRequestInput
	recorded []approval.DecisionInput
	declined []reload.DeclineInput
}

func newGatedEnv(t *testing.T, check func(reload.ChangesInput) reload.ApprovalCheck) *gatedEnv {
	env, restarts := newReloadEnv(t, restarted)
	g := &gatedEnv{env: env, restarts: restarts}
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: v1alpha1.ReloadWorkflowID("shop", "Deployment", "web")})
	env.RegisterActivity(&approval.Approvals{})
	env.OnActivity(reloadActs.CheckApproval, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in reload.ChangesInput) (reload.ApprovalCheck, error) {
			return check(in), nil
		})
	env.OnActivity(approvals.CreateApprovalRequest, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in approval.ApprovalRequestInput) error {
			g.asked = append(g.asked, in)
			return nil
		})
	env.OnActivity(approvals.RecordDecision, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in approval.DecisionInput) (gate.Decision, error) {
			g.recorded = append(g.recorded, in)
			return in.Decision, nil
		})
	env.OnActivity(reloadActs.DeclineReload, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in reload.DeclineInput) error {
			g.declined = append(g.declined, in)
			return nil
		})
	return g
}

func needsApproval(reload.ChangesInput) reload.ApprovalCheck {
	return reload.ApprovalCheck{}
}

func gatedInput(timeout time.Duration, pending ...reloadrule.ConfigChange) ReloadInput {
	in := reloadInput(pending...)
	in.Approval, in.Policy = &ReloadApproval{Timeout: timeout}, "reload-web"
	return in
}

// signalLatest sends a decision addressed to the most recent request, as the operator's relay does.
func (g *gatedEnv) signalLatest(at time.Duration, name string, s ApprovalSignal) {
	g.env.RegisterDelayedCallback(func() {
		s.Request = g.asked[len(g.asked)-1].Name
		g.env.SignalWorkflow(name, s)
	}, at)
}

// reloadDecisionCase is one decision on a gated reload's only request.
type reloadDecisionCase struct {
	name         string
	decide       func(g *gatedEnv)
	nsTimeout    *time.Duration // nil: the namespace ConfigMap must not be read
	timeout      time.Duration
	wantDecision v1alpha1.Decision
	wantVia      v1alpha1.DecidedVia
	wantWait     time.Duration
}

func TestReloadApprovalDecisions(t *testing.T) {
	for _, tc := range []reloadDecisionCase{
		{
			name: "approved: one restart with the asked hashes",
			decide: func(g *gatedEnv) {
				g.signalLatest(time.Minute, SignalApprove, ApprovalSignal{Approver: "carol", Via: "kubectl"})
			},
			timeout:      10 * time.Minute,
			wantDecision: v1alpha1.DecisionApproved, wantVia: v1alpha1.DecidedViaKubectl, wantWait: 10 * time.Minute,
		},
		{
			name: "rejected by update: declined, nothing rolls",
			decide: func(g *gatedEnv) {
				g.env.RegisterDelayedCallback(func() {
					g.env.UpdateWorkflow(UpdateDecide, "", &testsuite.TestUpdateCallback{
						OnReject: func(err error) { t.Errorf("decide refused: %v", err) }, OnAccept: func() {}, OnComplete: func(any, error) {},
					}, DecideRequest{Approved: false, Approver: "bob", Reason: "freeze"})
				}, time.Minute)
			},
			timeout:      10 * time.Minute,
			wantDecision: v1alpha1.DecisionRejected, wantVia: v1alpha1.DecidedViaUpdate, wantWait: 10 * time.Minute,
		},
		{
			name:         "expired after the namespace timeout: declined, nothing rolls",
			decide:       func(*gatedEnv) {},
			nsTimeout:    ptrDuration(20 * time.Minute),
			wantDecision: v1alpha1.DecisionExpired, wantVia: v1alpha1.DecidedViaTimer, wantWait: 20 * time.Minute,
		},
		{
			name:         "expired after the 15m default",
			decide:       func(*gatedEnv) {},
			nsTimeout:    ptrDuration(0),
			wantDecision: v1alpha1.DecisionExpired, wantVia: v1alpha1.DecidedViaTimer, wantWait: 15 * time.Minute,
		},
	} {
		t.Run(tc.name, func(t *testing.T) { checkReloadDecision(t, tc) })
	}
}

// checkReloadDecision runs a gated reload of one change to tc's decision:
// one request asked at once, the decision recorded, and either exactly one
// restart naming the request or a recorded decline and none.
func checkReloadDecision(t *testing.T, tc reloadDecisionCase) {
	change := reloadrule.ConfigChange{ConfigMap: "app", Hash: "a1"}
	g := newGatedEnv(t, needsApproval)
	if tc.nsTimeout != nil {
		g.env.OnActivity(approvals.NamespaceApprovalTimeout, mock.Anything, "shop").Return(*tc.nsTimeout, nil).Once()
	}
	tc.decide(g)
	start := g.env.Now()
	g.env.ExecuteWorkflow(ReloadWorkflow, gatedInput(tc.timeout, change))
	st := reloadResult(t, g.env)

	require.Len(t, g.asked, 1)
	ask := g.asked[0]
	assert.True(t, strings.HasPrefix(ask.Name, "reload-deployment-web-"), ask.Name)
	assert.Equal(t, v1alpha1.ObjectRef{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "web"}, ask.Subject)
	assert.Empty(t, ask.SubjectUID, "the activity reads the workload's current UID")
	assert.Equal(t, v1alpha1.ReloadWorkflowID("shop", "Deployment", "web"), ask.WorkflowID)
	assert.Contains(t, ask.Context.Reason, "app=a1")
	assert.Equal(t, "restart", ask.Context.Action)
	assert.Equal(t, "ConfigReloadPolicy/reload-web", ask.Context.PolicyEvaluation.PolicyName)
	wait := ask.RequiredBy.Sub(start)
	assert.GreaterOrEqual(t, wait, tc.wantWait, "asked at once: nothing restarted within the window")
	assert.Less(t, wait, tc.wantWait+time.Second)

	require.Len(t, g.recorded, 1)
	assert.Equal(t, ask.Name, g.recorded[0].Name)
	assert.Equal(t, tc.wantDecision, g.recorded[0].Decision.Decision)
	assert.Equal(t, tc.wantVia, g.recorded[0].Decision.Via)
	assert.Empty(t, st.Pending)
	assert.Empty(t, st.ApprovalRequest)

	if tc.wantDecision == v1alpha1.DecisionApproved {
		require.Len(t, *g.restarts, 1, "exactly one restart")
		assert.Equal(t, []reloadrule.ConfigChange{change}, (*g.restarts)[0].in.Changes)
		assert.Equal(t, ask.Name, (*g.restarts)[0].in.ApprovalRequest, "the restart names the approved request for the write gate")
		assert.Empty(t, g.declined)
		assert.Equal(t, 1, st.TotalRestarts)
		return
	}
	assert.Empty(t, *g.restarts, "a declined change never rolls")
	require.Len(t, g.declined, 1)
	assert.Equal(t, reload.DeclineInput{Namespace: "shop", Kind: "Deployment", Name: "web", Scope: "prod",
		Changes: []reloadrule.ConfigChange{change}, Request: ask.Name, Decision: g.recorded[0].Decision, Policy: "reload-web"}, g.declined[0])
	assert.Zero(t, st.TotalRestarts)
}

func TestReloadApprovalSupersededByNewerData(t *testing.T) {
	g := newGatedEnv(t, needsApproval)
	// While the first request is open the data changes again: it is closed
	// as superseded and the newest hashes are coalesced for a window and asked about.
	signalAt(g.env, time.Minute, reloadrule.ConfigChange{ConfigMap: "app", Hash: "a2"})
	signalAt(g.env, time.Minute+time.Second, reloadrule.ConfigChange{ConfigMap: "flags", Hash: "f1"})
	// The relay of a decision on the first request arrives late: it must not decide the second.
	g.env.RegisterDelayedCallback(func() {
		g.env.SignalWorkflow(SignalApprove, ApprovalSignal{Approver: "carol", Via: "kubectl", Request: g.asked[0].Name})
	}, 2*time.Minute)
	var refused error
	g.env.RegisterDelayedCallback(func() {
		g.env.UpdateWorkflow(UpdateDecide, "", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { refused = err }, OnAccept: func() {},
			OnComplete: func(any, error) { t.Error("a decide update naming a closed request was accepted") },
		}, DecideRequest{Approved: true, Approver: "carol", Request: g.asked[0].Name})
	}, 2*time.Minute+time.Second)
	g.signalLatest(3*time.Minute, SignalApprove, ApprovalSignal{Approver: "alice"})
	g.env.ExecuteWorkflow(ReloadWorkflow, gatedInput(time.Hour, reloadrule.ConfigChange{ConfigMap: "app", Hash: "a1"}))
	st := reloadResult(t, g.env)

	require.Len(t, g.asked, 2)
	assert.Contains(t, g.asked[0].Context.Reason, "app=a1")
	assert.Contains(t, g.asked[1].Context.Reason, "app=a2, flags=f1")
	assert.NotEqual(t, g.asked[0].Name, g.asked[1].Name)
	require.Len(t, g.recorded, 2)
	first := g.recorded[0]
	assert.Equal(t, g.asked[0].Name, first.Name)
	assert.Equal(t, v1alpha1.DecisionExpired, first.Decision.Decision)
	assert.Equal(t, SupersededBy, first.Decision.DecidedBy)
	assert.True(t, strings.HasPrefix(first.Decision.Message, "superseded: "), first.Decision.Message)
	assert.Contains(t, first.Decision.Message, "app=a2")
	assert.Equal(t, g.asked[1].Name, g.recorded[1].Name)
	assert.Equal(t, gate.Decision{Decision: v1alpha1.DecisionApproved, DecidedBy: "alice", Via: v1alpha1.DecidedViaSignal, At: g.recorded[1].Decision.At},
		g.recorded[1].Decision, "the late relay for the first request was ignored")
	require.Error(t, refused)
	assert.ErrorContains(t, refused, "is not open")

	require.Len(t, *g.restarts, 1, "one restart, with the newest hashes")
	assert.Equal(t, []reloadrule.ConfigChange{{ConfigMap: "app", Hash: "a2"}, {ConfigMap: "flags", Hash: "f1"}}, (*g.restarts)[0].in.Changes)
	assert.Empty(t, g.declined, "superseded is not declined")
	assert.Equal(t, 1, st.TotalRestarts)
}

func TestReloadApprovalSkipsDeclinedAndCurrentData(t *testing.T) {
	for _, tc := range []struct {
		name         string
		check        reload.ApprovalCheck
		wantRestarts int
	}{
		{
			name:  "already declined: not asked again, nothing rolls",
			check: reload.ApprovalCheck{Declined: []reloadrule.ConfigChange{{ConfigMap: "app", Hash: "a1"}}},
		},
		{
			name:         "already on the pod template: baseline only, no request",
			check:        reload.ApprovalCheck{Current: true},
			wantRestarts: 1,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newGatedEnv(t, func(reload.ChangesInput) reload.ApprovalCheck { return tc.check })
			g.env.ExecuteWorkflow(ReloadWorkflow, gatedInput(time.Hour, reloadrule.ConfigChange{ConfigMap: "app", Hash: "a1"}))
			st := reloadResult(t, g.env)
			assert.Empty(t, g.asked)
			assert.Empty(t, g.recorded)
			assert.Empty(t, g.declined)
			assert.Len(t, *g.restarts, tc.wantRestarts)
			assert.Empty(t, st.Pending)
		})
	}
}

func TestReloadApprovalAsksOnlyAboutUndeclinedData(t *testing.T) {
	g := newGatedEnv(t, func(in reload.ChangesInput) reload.ApprovalCheck {
		return reload.ApprovalCheck{Declined: []reloadrule.ConfigChange{{ConfigMap: "app", Hash: "a1"}}}
	})
	g.signalLatest(time.Minute, SignalApprove, ApprovalSignal{Approver: "alice"})
	g.env.ExecuteWorkflow(ReloadWorkflow, gatedInput(time.Hour, reloadrule.ConfigChange{ConfigMap: "app", Hash: "a1"}, reloadrule.ConfigChange{ConfigMap: "flags", Hash: "f1"}))
	reloadResult(t, g.env)
	require.Len(t, g.asked, 1)
	assert.NotContains(t, g.asked[0].Context.Reason, "app=")
	require.Len(t, *g.restarts, 1)
	assert.Equal(t, []reloadrule.ConfigChange{{ConfigMap: "flags", Hash: "f1"}}, (*g.restarts)[0].in.Changes)
}

func TestReloadApprovalStatusNamesTheOpenRequest(t *testing.T) {
	g := newGatedEnv(t, needsApproval)
	var during ReloadStatus
	g.env.RegisterDelayedCallback(func() {
		v, err := g.env.QueryWorkflow(QueryStatus)
		require.NoError(t, err)
		require.NoError(t, v.Get(&during))
	}, time.Minute)
	g.signalLatest(2*time.Minute, SignalReject, ApprovalSignal{Approver: "bob"})
	g.env.ExecuteWorkflow(ReloadWorkflow, gatedInput(time.Hour, reloadrule.ConfigChange{ConfigMap: "app", Hash: "a1"}))
	reloadResult(t, g.env)
	require.Len(t, g.asked, 1)
	assert.Equal(t, g.asked[0].Name, during.ApprovalRequest)
	assert.Equal(t, []reloadrule.ConfigChange{{ConfigMap: "app", Hash: "a1"}}, during.Pending)
}

func TestReloadApprovalRequestName(t *testing.T) {
	at := time.UnixMilli(1714000000123)
	assert.Equal(t, "reload-statefulset-db-1714000000123", ReloadApprovalRequestName("StatefulSet", "db", at))
	long := strings.Repeat("w", 253)
	n := ReloadApprovalRequestName("Deployment", long, at)
	assert.LessOrEqual(t, len(n), 253)
	assert.NotEqual(t, n, ReloadApprovalRequestName("Deployment", long[:252]+"x", at))
	assert.NotEqual(t, ReloadApprovalRequestName("Deployment", "web", at), ReloadApprovalRequestName("DaemonSet", "web", at))
}

// A workload selected by a policy that requires approval and by one that
// does not is asked about, whatever the run's input says: the run learns
// the rule from the live policies (VerifyReload), not from its start.
func TestReloadOverlappingPoliciesCombineStrictly(t *testing.T) {
	verifyAs(t, func(reload.ChangesInput) (reload.ReloadVerdict, error) {
		return reload.ReloadVerdict{Policies: []string{"fast", "gated"},
			Approval: reloadrule.ApprovalRule{Required: true, Timeout: 7 * time.Minute, Policies: []string{"gated"}}}, nil
	})
	g := newGatedEnv(t, needsApproval)
	g.signalLatest(time.Minute, SignalApprove, ApprovalSignal{Approver: "carol", Via: "kubectl"})
	start := g.env.Now()
	in := reloadInput(reloadrule.ConfigChange{ConfigMap: "app", Hash: "a1"})
	in.Policy = "fast"
	g.env.ExecuteWorkflow(ReloadWorkflow, in)
	st := reloadResult(t, g.env)

	require.Len(t, g.asked, 1, "asked although the run was started for the policy without approval")
	assert.Equal(t, "ConfigReloadPolicy/gated", g.asked[0].Context.PolicyEvaluation.PolicyName)
	wait := g.asked[0].RequiredBy.Sub(start)
	assert.GreaterOrEqual(t, wait, 7*time.Minute, "the requiring policy's timeout")
	assert.Less(t, wait, 7*time.Minute+2*time.Second)
	require.Len(t, *g.restarts, 1)
	assert.GreaterOrEqual(t, (*g.restarts)[0].at.Sub(start), time.Minute, "restarted only once approved")
	assert.Equal(t, g.asked[0].Name, (*g.restarts)[0].in.ApprovalRequest)
	assert.Equal(t, 1, st.TotalRestarts)
}

// A start for a workload no policy selects ends at VerifyReload: nothing is
// asked, nothing restarted, and the run says why.
func TestReloadUnverifiedStartWritesNothing(t *testing.T) {
	verifyAs(t, func(reload.ChangesInput) (reload.ReloadVerdict, error) {
		return reload.ReloadVerdict{}, temporal.NewNonRetryableApplicationError("no ConfigReloadPolicy in shop selects Deployment web",
			v1alpha1.ReasonSubjectMismatch, nil)
	})
	g := newGatedEnv(t, needsApproval)
	g.env.ExecuteWorkflow(ReloadWorkflow, gatedInput(time.Minute, reloadrule.ConfigChange{ConfigMap: "app", Hash: "a1"}))

	require.True(t, g.env.IsWorkflowCompleted())
	var app *temporal.ApplicationError
	require.ErrorAs(t, g.env.GetWorkflowError(), &app)
	assert.Equal(t, v1alpha1.ReasonSubjectMismatch, app.Type())
	assert.Empty(t, g.asked)
	assert.Empty(t, *g.restarts)
	assert.Empty(t, g.declined)
}
