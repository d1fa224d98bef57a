package workflows

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/remedy-dev/remedy/activities/alerts"
	"github.com/remedy-dev/remedy/activities/approval"
	"github.com/remedy-dev/remedy/activities/gate"
	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/alertmanager"
	"github.com/remedy-dev/remedy/internal/alertrule"
)

// proveRun is one proving alert run in the test environment: the guard
// grants each request a second after it is asked, and StillFiring answers
// from firing, one answer per call (the last repeats).
type proveRun struct {
	env      *testsuite.TestWorkflowEnvironment
	fp       string
	acquired []alerts.GuardAcquire
	created  []alerts.AlertRequestInput
	records  []v1alpha1.AlertRecord
	checks   []alerts.FiringCheck
	firing   [][]string
	asked    []approval.ApprovalRequestInput
	permit   func(alerts.GuardAcquire) Permit
	told     []told
}

// told is a join note the run signalled to another run.
type told struct {
	to   string
	note JoinNote
}

func webRestart(name string) v1alpha1.RemediationStep {
	return v1alpha1.RemediationStep{Name: name, Execution: v1alpha1.KubernetesExecutionSpec{Action: "restart",
		Target: v1alpha1.ObjectRef{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "web"}}}
}

func newProveRun(t *testing.T, spec v1alpha1.RemediationRuleSpec, ladder ...alerts.LadderStep) *proveRun {
	t.Helper()
	l := map[string]string{"alertname": "KubePodCrashLooping", "namespace": "shop", "pod": "web-1"}
	p := &proveRun{fp: alertmanager.Fingerprint(l), permit: func(r alerts.GuardAcquire) Permit { return Permit{Granted: true, RequestNonce: r.Nonce} }}
	env := (&testsuite.WorkflowTestSuite{}).NewTestWorkflowEnvironment()
	p.env = env
	env.RegisterWorkflowWithOptions(AlertWorkflow, workflow.RegisterOptions{Name: "AlertWorkflow"})
	env.RegisterActivity(&alerts.Alerts{})
	env.RegisterActivity(&alerts.Guards{})
	env.RegisterActivity(&approval.Approvals{})
	env.OnActivity(alertActs.VerifyAlert, mock.Anything, mock.Anything).Return(alerts.AlertPlan{RuleUID: "uid-1", Target: "Deployment/web",
		Steps: []v1alpha1.RemediationStep{webRestart("restart")}, Spec: spec, Ladder: ladder, Workloads: 1, Cooldown: time.Minute, BreakerWindow: time.Hour}, nil)
	env.OnActivity(alertActs.RecordAlert, mock.Anything, mock.Anything).Return(func(_ context.Context, in alerts.AlertRecordInput) error {
		p.records = append(p.records, in.Record)
		return nil
	})
	env.OnActivity(guards.Acquire, mock.Anything, mock.Anything, mock.Anything).Return(func(_ context.Context, _ string, r alerts.GuardAcquire) error {
		p.acquired = append(p.acquired, r)
		return nil
	})
	env.OnActivity(alertActs.CreateAlertRequest, mock.Anything, mock.Anything).Return(func(_ context.Context, in alerts.AlertRequestInput) (alerts.RequestRef, error) {
		p.created = append(p.created, in)
		return alerts.RequestRef{Name: "rr", WorkflowID: "rr/shop/rr"}, nil
	})
	env.OnActivity(alertActs.AwaitRequest, mock.Anything, mock.Anything, mock.Anything).Return(v1alpha1.RemediationRequestStatus{Phase: v1alpha1.PhaseCompleted, Reason: "Succeeded"}, nil)
	env.OnActivity(alertActs.StillFiring, mock.Anything, mock.Anything).Return(func(_ context.Context, in alerts.FiringCheck) ([]string, error) {
		p.checks = append(p.checks, in)
		if len(p.firing) == 0 {
			return nil, nil
		}
		f := p.firing[0]
		if len(p.firing) > 1 {
			p.firing = p.firing[1:]
		}
		return f, nil
	})
	env.OnActivity(approvals.NamespaceApprovalTimeout, mock.Anything, mock.Anything).Return(24*time.Hour, nil)
	env.OnActivity(approvals.CreateApprovalRequest, mock.Anything, mock.Anything).Return(func(_ context.Context, in approval.ApprovalRequestInput) error {
		p.asked = append(p.asked, in)
		return nil
	})
	env.OnActivity(approvals.RecordDecision, mock.Anything, mock.Anything).Return(func(_ context.Context, in approval.DecisionInput) (gate.Decision, error) {
		return in.Decision, nil
	})
	env.OnSignalExternalWorkflow(mock.Anything, mock.Anything, "", mock.Anything, mock.Anything).Return(func(_, id, _, name string, arg any) error {
		if n, ok := arg.(JoinNote); ok && name == SignalJoined {
			p.told = append(p.told, told{id, n})
		}
		return nil
	})
	return p
}

// grant answers every request of the run, polling every ten virtual seconds.
func (p *proveRun) grant() {
	answered := 0
	var tick func()
	tick = func() {
		for ; answered < len(p.acquired); answered++ {
			p.env.SignalWorkflow(SignalPermit, p.permit(p.acquired[answered]))
		}
		if !p.env.IsWorkflowCompleted() {
			p.env.RegisterDelayedCallback(tick, 10*time.Second)
		}
	}
	p.env.RegisterDelayedCallback(tick, 10*time.Second)
}

func (p *proveRun) at(d time.Duration, fn func()) { p.env.RegisterDelayedCallback(fn, d) }

func (p *proveRun) resolveAt(d time.Duration) {
	p.at(d, func() { p.env.SignalWorkflow(SignalAlert, AlertSignal{Status: AlertResolved}) })
}

func (p *proveRun) run(t *testing.T) AlertResult {
	t.Helper()
	l := map[string]string{"alertname": "KubePodCrashLooping", "namespace": "shop", "pod": "web-1"}
	p.env.ExecuteWorkflow(AlertWorkflow, AlertInput{Namespace: "shop", Rule: "crash",
		Alert: alertrule.Alert{Labels: l, Fingerprint: p.fp, StartsAt: time.Unix(0, 0)}})
	require.True(t, p.env.IsWorkflowCompleted())
	require.NoError(t, p.env.GetWorkflowError())
	var res AlertResult
	require.NoError(t, p.env.GetWorkflowResult(&res))
	return res
}

func (p *proveRun) phases() []string {
	var out []string
	for _, r := range p.records {
		out = append(out, r.Phase+"/"+r.Reason)
	}
	return out
}

func verifySpec(onFailure v1alpha1.VerifyFailure) *v1alpha1.VerifySpec {
	return &v1alpha1.VerifySpec{Window: v1alpha1.DurationOf(10 * time.Minute), OnFailure: onFailure}
}

// The alert resolves after the run acted: Verified as soon as the resolve
// arrives, without waiting out the window or asking Alertmanager.
func TestProveVerifiedWhenTheAlertResolves(t *testing.T) {
	p := newProveRun(t, v1alpha1.RemediationRuleSpec{Verify: verifySpec("")})
	p.grant()
	p.resolveAt(3 * time.Minute)
	res := p.run(t)
	assert.Equal(t, v1alpha1.AlertVerified, res.Phase)
	assert.Equal(t, []string{"Queued/Matched", "Running/Started", "Done/Succeeded", "Verifying/Verifying", "Verified/Verified"}, p.phases())
	assert.Len(t, p.created, 1)
	assert.Len(t, p.checks, 1, "the window's end asks Alertmanager")
	require.Len(t, p.acquired, 1)
	assert.True(t, p.acquired[0].Join, "a verifying run answers for its workload")
}

// The alert resolved soon after the fix, then fired again within the
// window: the fix did not hold, so the run is Ineffective, not Verified.
func TestProveRelapseInsideTheWindowIsIneffective(t *testing.T) {
	p := newProveRun(t, v1alpha1.RemediationRuleSpec{Verify: verifySpec(v1alpha1.VerifyNone)})
	p.firing = [][]string{{p.fp}}
	p.grant()
	p.resolveAt(3 * time.Minute)
	res := p.run(t)
	assert.Equal(t, v1alpha1.AlertIneffective, res.Phase)
	assert.Len(t, p.checks, 1)
}

// Still firing when the window ends: Ineffective; Escalate runs the next
// step through the guard (a continued permit, counted by the breaker), and
// that one is verified.
func TestProveIneffectiveEscalatesToTheNextStep(t *testing.T) {
	p := newProveRun(t, v1alpha1.RemediationRuleSpec{Verify: verifySpec(v1alpha1.VerifyEscalate)},
		alerts.LadderStep{Name: "again", Steps: []v1alpha1.RemediationStep{webRestart("again")}})
	p.firing = [][]string{{p.fp}, nil}
	p.grant()
	p.resolveAt(time.Hour)
	res := p.run(t)
	assert.Equal(t, v1alpha1.AlertVerified, res.Phase)
	assert.Equal(t, []string{"Queued/Matched", "Running/Started", "Done/Succeeded", "Verifying/Verifying", "Ineffective/Escalated",
		"Running/Started", "Done/Succeeded", "Verifying/Verifying", "Verified/Verified"}, p.phases())
	require.Len(t, p.created, 2)
	assert.Equal(t, 0, p.created[0].Step)
	assert.Equal(t, 1, p.created[1].Step)
	assert.Equal(t, "again", p.created[1].Plan.Steps[0].Name)
	require.Len(t, p.acquired, 2)
	assert.Empty(t, p.acquired[0].Continues)
	assert.Equal(t, p.acquired[0].Nonce, p.acquired[1].Continues, "the next step continues the run's permit")
	assert.Len(t, p.checks, 2)
}

// onFailure None: Ineffective, and nothing more.
func TestProveIneffectiveStops(t *testing.T) {
	p := newProveRun(t, v1alpha1.RemediationRuleSpec{Verify: verifySpec(v1alpha1.VerifyNone)})
	p.firing = [][]string{{p.fp}}
	p.grant()
	p.resolveAt(time.Hour)
	res := p.run(t)
	assert.Equal(t, v1alpha1.AlertIneffective, res.Phase)
	assert.Len(t, p.created, 1)
	assert.Empty(t, p.asked)
}

// The circuit breaker stops the ladder: the guard refuses the next step.
func TestProveLadderStopsAtTheBreaker(t *testing.T) {
	p := newProveRun(t, v1alpha1.RemediationRuleSpec{Verify: verifySpec(v1alpha1.VerifyEscalate)},
		alerts.LadderStep{Name: "again", Steps: []v1alpha1.RemediationStep{webRestart("again")}})
	p.firing = [][]string{{p.fp}}
	p.permit = func(r alerts.GuardAcquire) Permit {
		if r.Continues != "" {
			return Permit{Reason: v1alpha1.ReasonCircuitOpen, RequestNonce: r.Nonce}
		}
		return Permit{Granted: true, RequestNonce: r.Nonce}
	}
	p.grant()
	p.resolveAt(time.Hour)
	res := p.run(t)
	assert.Equal(t, v1alpha1.AlertRefused, res.Phase)
	assert.Equal(t, v1alpha1.ReasonCircuitOpen, res.Reason)
	assert.Len(t, p.created, 1)
}

// Every automatic step ran and the alert still fires: LadderExhausted, and
// the page rung asks a person by an approval request naming the alert; the
// alert resolving withdraws it.
func TestProveLadderExhaustedPages(t *testing.T) {
	p := newProveRun(t, v1alpha1.RemediationRuleSpec{Verify: verifySpec(v1alpha1.VerifyEscalate)},
		alerts.LadderStep{Name: "again", Steps: []v1alpha1.RemediationStep{webRestart("again")}},
		alerts.LadderStep{Name: "oncall", Page: true})
	p.firing = [][]string{{p.fp}}
	p.grant()
	p.resolveAt(3 * time.Hour)
	res := p.run(t)
	assert.Equal(t, v1alpha1.AlertCanceled, res.Phase)
	assert.Equal(t, []string{"Queued/Matched", "Running/Started", "Done/Succeeded", "Verifying/Verifying", "Ineffective/Escalated",
		"Running/Started", "Done/Succeeded", "Verifying/Verifying", "Ineffective/Escalated", "Ineffective/LadderExhausted",
		"WaitingApproval/ApprovalRequested", "Canceled/Resolved"}, p.phases())
	require.Len(t, p.asked, 1)
	assert.Contains(t, p.asked[0].Name, "-page")
	assert.Contains(t, p.asked[0].Context.Reason, "still fires")
	assert.Len(t, p.created, 2)
}

// holdFor: the alert resolves while held, so nothing is done.
func TestProveHoldResolvedDoesNothing(t *testing.T) {
	p := newProveRun(t, v1alpha1.RemediationRuleSpec{HoldFor: v1alpha1.DurationOf(5 * time.Minute)})
	p.grant()
	p.resolveAt(2 * time.Minute)
	res := p.run(t)
	assert.Equal(t, v1alpha1.ReasonResolvedWhileHeld, res.Reason)
	assert.Equal(t, []string{"Queued/Matched", "Held/Held", "Canceled/ResolvedWhileHeld"}, p.phases())
	assert.Empty(t, p.acquired)
	assert.Empty(t, p.created)
}

// holdFor: Alertmanager still holds the alert as firing at its end, so the run acts.
func TestProveHoldStillFiringActs(t *testing.T) {
	p := newProveRun(t, v1alpha1.RemediationRuleSpec{HoldFor: v1alpha1.DurationOf(5 * time.Minute)})
	p.firing = [][]string{{p.fp}}
	p.grant()
	p.resolveAt(time.Hour)
	res := p.run(t)
	assert.Equal(t, v1alpha1.AlertDone, res.Phase)
	require.Len(t, p.checks, 1)
	require.Len(t, p.created, 1)
	assert.Equal(t, []string{"Queued/Matched", "Held/Held", "Running/Started", "Done/Succeeded"}, p.phases())
}

// An alert for a workload that already has an open run joins it: it records
// Joined naming that run, acts on nothing, and tells that run when it resolves.
func TestProveJoinsTheOpenRun(t *testing.T) {
	p := newProveRun(t, v1alpha1.RemediationRuleSpec{Verify: verifySpec("")})
	holder := v1alpha1.AlertWorkflowID("shop", "crash", "0123abcd")
	p.permit = func(r alerts.GuardAcquire) Permit { return Permit{Joined: holder, RequestNonce: r.Nonce} }
	p.grant()
	p.resolveAt(time.Hour)
	res := p.run(t)
	assert.Equal(t, v1alpha1.AlertJoined, res.Phase)
	assert.Contains(t, res.Message, holder)
	assert.Empty(t, p.created)
	assert.Equal(t, []told{{holder, JoinNote{AlertID: "default-test-workflow-id", Resolved: true}}}, p.told)
}

// The open run counts what joined it: its own alert resolved, but it is
// Verified only once the joined alert resolved too (or, at the window's
// end, Alertmanager says which still fire).
func TestProveJoinedAlertsCountInVerification(t *testing.T) {
	for _, tc := range []struct {
		name       string
		joinedDone bool
		want       string
	}{
		{"joined alert resolved", true, v1alpha1.AlertVerified},
		{"joined alert still fires", false, v1alpha1.AlertIneffective},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newProveRun(t, v1alpha1.RemediationRuleSpec{Verify: verifySpec(v1alpha1.VerifyNone)})
			joiner := v1alpha1.AlertWorkflowID("shop", "crash", "feedbeef")
			p.firing = [][]string{{"feedbeef"}}
			if tc.joinedDone {
				p.firing = [][]string{nil}
			}
			p.grant()
			p.at(30*time.Second, func() { p.env.SignalWorkflow(SignalJoined, JoinNote{AlertID: joiner}) })
			p.at(40*time.Second, func() { p.env.SignalWorkflow(SignalJoined, JoinNote{AlertID: "alert/shop/other-rule/x"}) })
			p.resolveAt(2 * time.Minute)
			if tc.joinedDone {
				p.at(4*time.Minute, func() { p.env.SignalWorkflow(SignalJoined, JoinNote{AlertID: joiner, Resolved: true}) })
			}
			res := p.run(t)
			assert.Equal(t, tc.want, res.Phase)
			require.Len(t, p.checks, 1)
			assert.Equal(t, []string{"feedbeef"}, p.checks[0].Joined, "only alerts of this rule join")
		})
	}
}
