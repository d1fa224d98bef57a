package workflows

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/remedy-dev/remedy/activities/alerts"
	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/alertrule"
)

// The alert run's decision from its plan alone: GitOps, approval, freeze,
// health gate, silence, the guard's request (slots, breaker, storm mode's
// maxConcurrent), resolvePolicy and shadow mode.
//
// The table is long because each row is one rule shape the run must get right.
func TestDecideAlert(t *testing.T) {
	const target = "shop/Deployment/web"
	guard := alerts.GuardAcquire{Rule: "restart-web", Target: target, Cooldown: time.Minute, BreakerWindow: time.Hour, Slots: 10}
	// base is a rule with nothing set: act at once, on a permit.
	base := alertDecision{Guard: guard, CancelOnResolve: true}
	managed := func(p *alerts.AlertPlan) { p.GitOps = "Argo CD" }
	approval := &v1alpha1.ApprovalSpec{Required: true}
	refused := &alertRefusal{Reason: v1alpha1.ReasonGitOpsManaged,
		Message: target + " is managed by Argo CD: a change would be reverted by the GitOps controller; fix it in Git, or set the rule's gitOps to Approve or Act"}
	freeze := func(a v1alpha1.FreezeAction) *v1alpha1.FreezeSpec { return &v1alpha1.FreezeSpec{Action: a} }

	for _, tt := range []struct {
		name string
		plan func(*alerts.AlertPlan)
		want func(*alertDecision)
	}{
		{name: "nothing set: act on a permit", plan: func(*alerts.AlertPlan) {}, want: func(*alertDecision) {}},
		{name: "approval required", plan: func(p *alerts.AlertPlan) { p.Spec.Approval = approval },
			want: func(d *alertDecision) { d.Approve = true }},
		{name: "approval with a timeout",
			plan: func(p *alerts.AlertPlan) {
				p.Spec.Approval = &v1alpha1.ApprovalSpec{Required: true, Timeout: v1alpha1.DurationOf(time.Hour)}
			},
			want: func(d *alertDecision) { d.Approve, d.ApprovalTimeout = true, time.Hour }},
		{name: "approval not required keeps its timeout only",
			plan: func(p *alerts.AlertPlan) {
				p.Spec.Approval = &v1alpha1.ApprovalSpec{Timeout: v1alpha1.DurationOf(time.Hour)}
			},
			want: func(d *alertDecision) { d.ApprovalTimeout = time.Hour }},
		{name: "managed target, gitOps unset: refused", plan: managed,
			want: func(d *alertDecision) { d.Refuse = refused }},
		{name: "managed target, gitOps Refuse: refused",
			plan: func(p *alerts.AlertPlan) { managed(p); p.Spec.GitOps = v1alpha1.GitOpsRefuse },
			want: func(d *alertDecision) { d.Refuse = refused }},
		{name: "managed target refused before any gate is looked at",
			plan: func(p *alerts.AlertPlan) {
				managed(p)
				p.Spec.Freeze, p.Spec.BlockWhileFiring = freeze(v1alpha1.FreezeWait), []string{"Deploying"}
			},
			want: func(d *alertDecision) { d.Refuse = refused }},
		{name: "managed target, gitOps Approve: a person decides",
			plan: func(p *alerts.AlertPlan) { managed(p); p.Spec.GitOps = v1alpha1.GitOpsApprove },
			want: func(d *alertDecision) { d.Approve = true }},
		{name: "managed target, gitOps Act: acts",
			plan: func(p *alerts.AlertPlan) { managed(p); p.Spec.GitOps = v1alpha1.GitOpsAct },
			want: func(*alertDecision) {}},
		{name: "managed target, gitOps Act, approval required: a person decides",
			plan: func(p *alerts.AlertPlan) {
				managed(p)
				p.Spec.GitOps, p.Spec.Approval = v1alpha1.GitOpsAct, approval
			},
			want: func(d *alertDecision) { d.Approve = true }},
		{name: "unmanaged target, gitOps Refuse: acts",
			plan: func(p *alerts.AlertPlan) { p.Spec.GitOps = v1alpha1.GitOpsRefuse },
			want: func(*alertDecision) {}},
		{name: "freeze Wait holds",
			plan: func(p *alerts.AlertPlan) { p.Spec.Freeze = freeze(v1alpha1.FreezeWait) },
			want: func(d *alertDecision) { d.Gates.freeze, d.Versioned = true, true }},
		{name: "freeze without an action holds",
			plan: func(p *alerts.AlertPlan) { p.Spec.Freeze = freeze("") },
			want: func(d *alertDecision) { d.Gates.freeze, d.Versioned = true, true }},
		{name: "freeze RequireApproval asks a person",
			plan: func(p *alerts.AlertPlan) { p.Spec.Freeze = freeze(v1alpha1.FreezeRequireApproval) },
			want: func(d *alertDecision) { d.Gates.approveFreeze, d.Versioned = true, true }},
		{name: "freeze RequireApproval asks no one twice when approval is required",
			plan: func(p *alerts.AlertPlan) {
				p.Spec.Freeze, p.Spec.Approval = freeze(v1alpha1.FreezeRequireApproval), approval
			},
			want: func(d *alertDecision) { d.Approve, d.Versioned = true, true }},
		{name: "freeze RequireApproval under gitOps Approve asks once",
			plan: func(p *alerts.AlertPlan) {
				managed(p)
				p.Spec.GitOps, p.Spec.Freeze = v1alpha1.GitOpsApprove, freeze(v1alpha1.FreezeRequireApproval)
			},
			want: func(d *alertDecision) { d.Approve, d.Versioned = true, true }},
		{name: "freeze Wait still holds an approved run",
			plan: func(p *alerts.AlertPlan) { p.Spec.Freeze, p.Spec.Approval = freeze(v1alpha1.FreezeWait), approval },
			want: func(d *alertDecision) { d.Approve, d.Gates.freeze, d.Versioned = true, true, true }},
		{name: "blockWhileFiring gates",
			plan: func(p *alerts.AlertPlan) { p.Spec.BlockWhileFiring = []string{"alertname=Deploying"} },
			want: func(d *alertDecision) { d.Gates.gate, d.Versioned = true, true }},
		{name: "silence for the default duration",
			plan: func(p *alerts.AlertPlan) { p.Spec.Silence = &v1alpha1.SilenceSpec{Enabled: true} },
			want: func(d *alertDecision) {
				d.Gates.silence, d.Versioned, d.SilenceFor = true, true, alertrule.DefaultSilence
			}},
		{name: "silence for its own duration",
			plan: func(p *alerts.AlertPlan) {
				p.Spec.Silence = &v1alpha1.SilenceSpec{Enabled: true, Duration: v1alpha1.DurationOf(time.Hour)}
			},
			want: func(d *alertDecision) { d.Gates.silence, d.Versioned, d.SilenceFor = true, true, time.Hour }},
		{name: "silence disabled is no gate",
			plan: func(p *alerts.AlertPlan) {
				p.Spec.Silence = &v1alpha1.SilenceSpec{Duration: v1alpha1.DurationOf(time.Hour)}
			},
			want: func(*alertDecision) {}},
		{name: "shadow mode silences nothing",
			plan: func(p *alerts.AlertPlan) {
				p.Spec.DryRun, p.Spec.Silence = true, &v1alpha1.SilenceSpec{Enabled: true}
			},
			want: func(d *alertDecision) { d.Shadow = true }},
		{name: "shadow mode still observes a freeze",
			plan: func(p *alerts.AlertPlan) { p.Spec.DryRun, p.Spec.Freeze = true, freeze(v1alpha1.FreezeWait) },
			want: func(d *alertDecision) { d.Shadow, d.Gates.freeze, d.Versioned = true, true, true }},
		{name: "resolvePolicy Finish lets a resolve change nothing",
			plan: func(p *alerts.AlertPlan) { p.Spec.ResolvePolicy = v1alpha1.ResolveFinish },
			want: func(d *alertDecision) { d.CancelOnResolve = false }},
		{name: "resolvePolicy Cancel",
			plan: func(p *alerts.AlertPlan) { p.Spec.ResolvePolicy = v1alpha1.ResolveCancel },
			want: func(*alertDecision) {}},
		{name: "maxConcurrent reaches the guard (storm mode)",
			plan: func(p *alerts.AlertPlan) { p.Spec.MaxConcurrent = 3 },
			want: func(d *alertDecision) { d.Guard.MaxConcurrent = 3 }},
		{name: "circuit breaker's runs reach the guard",
			plan: func(p *alerts.AlertPlan) { p.Spec.CircuitBreaker = &v1alpha1.CircuitBreakerSpec{MaxRuns: 2} },
			want: func(d *alertDecision) { d.Guard.BreakerRuns = 2 }},
		{name: "budget: a share of the namespace's workloads",
			plan: func(p *alerts.AlertPlan) { p.Spec.Budget = &v1alpha1.BudgetSpec{MaxPercent: 50} },
			want: func(d *alertDecision) { d.Guard.Slots = 5 }},
		{name: "budget: at least one slot",
			plan: func(p *alerts.AlertPlan) { p.Spec.Budget = &v1alpha1.BudgetSpec{MaxPercent: 5} },
			want: func(d *alertDecision) { d.Guard.Slots = 1 }},
		{name: "budget without a percent: every workload",
			plan: func(p *alerts.AlertPlan) { p.Spec.Budget = &v1alpha1.BudgetSpec{} },
			want: func(*alertDecision) {}},
		{name: "a refused run still knows its guard request",
			plan: func(p *alerts.AlertPlan) { managed(p); p.Spec.MaxConcurrent = 2 },
			want: func(d *alertDecision) { d.Refuse, d.Guard.MaxConcurrent = refused, 2 }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			plan := alerts.AlertPlan{Target: target, Workloads: 10, Cooldown: time.Minute, BreakerWindow: time.Hour}
			tt.plan(&plan)
			want := base
			tt.want(&want)
			assert.Equal(t, want, decideAlert("restart-web", plan))
		})
	}
}

// The gates hold the run only for a freeze or a health gate; a silence
// alone never holds it back.
func TestGatePlanHolds(t *testing.T) {
	assert.False(t, gatePlan{}.holds())
	assert.False(t, gatePlan{silence: true}.holds())
	assert.True(t, gatePlan{freeze: true}.holds())
	assert.True(t, gatePlan{approveFreeze: true}.holds())
	assert.True(t, gatePlan{gate: true}.holds())
}
