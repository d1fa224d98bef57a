package workflows

import (
	"fmt"
	"time"

	"github.com/remedy-dev/remedy/activities/alerts"
	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/alertrule"
)

// alertDecision is what an alert run does with its verified plan, decided
// from the plan alone (decideAlert): the workflow only carries it out, so
// the decision is table-tested without the SDK.
type alertDecision struct {
	// Refuse is set when the rule refuses the target outright (a GitOps
	// controller manages it): the run records it and does nothing else.
	Refuse *alertRefusal
	// Approve asks a person first: the rule's approval, or gitOps Approve
	// for a managed target.
	Approve         bool
	ApprovalTimeout time.Duration
	// Gates are the freeze, blockWhileFiring and silence the run observes.
	// A freeze that asks a person asks no one when Approve already does.
	Gates gatePlan
	// Versioned says whether the run asks gateChange's version: whenever
	// the rule has any gate, before Approve takes the freeze's question
	// away, so runs recorded before the change keep their markers.
	Versioned bool
	// SilenceFor is how long each silence the run holds lasts.
	SilenceFor time.Duration
	// Guard is the permit request, without the run's identity (AlertID,
	// RunID, Nonce): the per-target guard, maxConcurrent (storm mode) and
	// the namespace budget's slots.
	Guard alerts.GuardAcquire
	// CancelOnResolve: a resolve withdraws the approval question, the
	// hold, the queued request, and cancels a running request.
	CancelOnResolve bool
	// Shadow runs each step's server-side dry-run and writes nothing.
	Shadow bool
}

// alertRefusal is a refusal decided before anything runs.
type alertRefusal struct {
	Reason, Message string
}

// decideAlert decides what the run for rule does with plan. It reads no
// clock and calls nothing, so it is the same on replay.
func decideAlert(rule string, plan alerts.AlertPlan) alertDecision {
	spec := plan.Spec
	d := alertDecision{
		Approve:         spec.Approval != nil && spec.Approval.Required,
		CancelOnResolve: spec.ResolvePolicy != v1alpha1.ResolveFinish,
		Shadow:          spec.DryRun,
		Guard:           guardRequest(rule, plan),
	}
	if spec.Approval != nil {
		d.ApprovalTimeout = spec.Approval.Timeout.Or(0)
	}
	if plan.GitOps != "" {
		switch spec.GitOps {
		case v1alpha1.GitOpsAct:
		case v1alpha1.GitOpsApprove:
			d.Approve = true
		default:
			d.Refuse = &alertRefusal{Reason: v1alpha1.ReasonGitOpsManaged, Message: fmt.Sprintf("%s is managed by %s: a change would be reverted by the GitOps controller; fix it in Git, or set the rule's gitOps to Approve or Act", plan.Target, plan.GitOps)}
			return d
		}
	}
	if spec.Freeze != nil {
		d.Gates.approveFreeze = spec.Freeze.Action == v1alpha1.FreezeRequireApproval
		d.Gates.freeze = !d.Gates.approveFreeze
	}
	d.Gates.gate = len(spec.BlockWhileFiring) > 0
	d.Gates.silence = spec.Silence != nil && spec.Silence.Enabled && !spec.DryRun
	d.Versioned = d.Gates != gatePlan{}
	// A person who approved the run approved it whatever the calendar says.
	d.Gates.approveFreeze = d.Gates.approveFreeze && !d.Approve
	if d.Gates.silence {
		d.SilenceFor = spec.Silence.Duration.Or(alertrule.DefaultSilence)
	}
	return d
}

// guardRequest is the permit request the rule's guards ask of the
// namespace's guard: the budget's slots are a share of the namespace's
// workloads, at least one.
func guardRequest(rule string, plan alerts.AlertPlan) alerts.GuardAcquire {
	spec := plan.Spec
	req := alerts.GuardAcquire{Rule: rule, Target: plan.Target, MaxConcurrent: int(spec.MaxConcurrent),
		Cooldown: plan.Cooldown, BreakerWindow: plan.BreakerWindow, Slots: plan.Workloads}
	if spec.CircuitBreaker != nil {
		req.BreakerRuns = int(spec.CircuitBreaker.MaxRuns)
	}
	if spec.Budget != nil && spec.Budget.MaxPercent > 0 {
		req.Slots = max(1, plan.Workloads*int(spec.Budget.MaxPercent)/100)
	}
	return req
}
