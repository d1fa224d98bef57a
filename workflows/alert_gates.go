package workflows

import (
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/remedy-dev/remedy/activities/alerts"
	"github.com/remedy-dev/remedy/activities/gate"
	"github.com/remedy-dev/remedy/api/v1alpha1"
)

// gateChange is the workflow.GetVersion change ID of freezes, health gates
// and silences: runs of rules without them issue no marker and no command
// of theirs, and runs recorded before them keep their path.
const gateChange = "alert-gates"

// Gate recheck intervals: blockWhileFiring is asked again after
// gateRecheckFirst, doubling up to gateRecheckMax; a freeze sleeps until it
// ends, but looks at the rule again at least every freezeRecheck (a freeze
// lifted from the rule frees the run). Each check is a handful of history
// events and the run does not continue as new: these bound a month-long
// hold to a few thousand events (a gate held for weeks, some twenty thousand).
const (
	gateRecheckFirst = 10 * time.Second
	gateRecheckMax   = 2 * time.Minute
	freezeRecheck    = time.Hour
)

// gatePlan is which of the rule's gates this run observes.
type gatePlan struct {
	freeze, approveFreeze, gate, silence bool
}

// holds says whether a gate may hold the run before it asks for a permit.
func (p gatePlan) holds() bool { return p.freeze || p.approveFreeze || p.gate }

// gatesOf is the decision's gates, or none in a run recorded before gateChange.
func gatesOf(ctx workflow.Context, d alertDecision) gatePlan {
	if !d.Versioned || workflow.GetVersion(ctx, gateChange, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return gatePlan{}
	}
	return d.Gates
}

// checkGates asks which gate holds the run now; a rule gone or replaced refuses it.
func (r *alertRun) checkGates(ctx workflow.Context, in alerts.AlertGateInput) (alerts.AlertGates, bool) {
	in.Subject = gate.AlertSubject{Namespace: r.in.Namespace, Rule: r.in.Rule, Alert: r.in.Alert}
	in.RuleUID = r.plan.RuleUID
	var g alerts.AlertGates
	if err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, quickOptions), alertActs.CheckGates, in).Get(ctx, &g); err != nil {
		r.refuse(ctx, reasonOf(err, v1alpha1.ReasonSubjectMismatch), messageOf(err), "")
		return g, false
	}
	return g, true
}

// awaitGates holds the run, on durable timers, while the freeze calendar
// or a blockWhileFiring alert (or an Alertmanager it cannot read) holds it,
// recording each new reason once. A freeze whose action is RequireApproval
// asks a person instead, once; after their approval it holds no more. A
// resolve under resolvePolicy Cancel ends the wait and the run.
func (r *alertRun) awaitGates(ctx workflow.Context, gp gatePlan) bool {
	in := alerts.AlertGateInput{Freeze: gp.freeze || gp.approveFreeze, Gate: gp.gate}
	recheck, last := gateRecheckFirst, ""
	for {
		g, ok := r.checkGates(ctx, in)
		if !ok {
			return false
		}
		if g.Reason == "" {
			r.until = nil
			return true
		}
		if g.Reason == v1alpha1.ReasonFrozen && gp.approveFreeze {
			r.frozen = &g
			if !r.approved(ctx) {
				return false
			}
			gp.approveFreeze, in.Freeze = false, false
			if !in.Gate {
				return true
			}
			continue
		}
		wait := recheck
		if g.Until != nil {
			// A second past the window's end: the worker's clock, not the timer's, decides.
			wait = min(max(g.Until.Sub(workflow.Now(ctx))+time.Second, time.Second), freezeRecheck)
		} else {
			recheck = min(2*recheck, gateRecheckMax)
		}
		if key := g.Reason + "/" + g.Message; key != last {
			last, r.until = key, g.Until
			r.record(ctx, alerts.AlertRecordInput{}, v1alpha1.AlertQueued, g.Reason, g.Message)
		}
		if resolved, _ := workflow.AwaitWithTimeout(ctx, wait, func() bool { return r.decision.CancelOnResolve && r.resolved }); resolved {
			r.until = nil
			r.record(ctx, alerts.AlertRecordInput{}, v1alpha1.AlertCanceled, v1alpha1.ReasonResolved, "the alert resolved while held ("+g.Reason+"): nothing ran")
			return false
		}
	}
}

// holdSilence creates the alert's silence, or renews the one the run
// holds. A silence that cannot be made never holds the remediation back.
func (r *alertRun) holdSilence(ctx workflow.Context, d time.Duration) {
	in := alerts.SilenceInput{Subject: gate.AlertSubject{Namespace: r.in.Namespace, Rule: r.in.Rule, Alert: r.in.Alert}, ID: r.silence, Duration: d}
	var id string
	if err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, quickOptions), alertActs.HoldSilence, in).Get(ctx, &id); err != nil {
		workflow.GetLogger(ctx).Warn("alert not silenced", "silence", r.silence, "error", err)
		return
	}
	r.silence = id
}

// endSilence expires the run's silence; one that cannot be expired lapses at its end.
func (r *alertRun) endSilence(ctx workflow.Context) {
	if r.silence == "" {
		return
	}
	if err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, quickOptions), alertActs.EndSilence, r.silence).Get(ctx, nil); err != nil {
		workflow.GetLogger(ctx).Warn("silence not expired: it lapses at its end", "silence", r.silence, "error", err)
	}
}
