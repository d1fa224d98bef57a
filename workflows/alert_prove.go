package workflows

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/remedy-dev/remedy/activities/alerts"
	"github.com/remedy-dev/remedy/activities/fail"
	"github.com/remedy-dev/remedy/api/v1alpha1"
)

// proveChange is the workflow.GetVersion change ID of runs that hold
// (spec.holdFor), verify (spec.verify), escalate (spec.escalation) and
// join: runs of rules without those fields issue no marker and keep their
// path, and runs recorded before the change keep theirs.
const proveChange = "alert-prove"

// firingOptions retry a check of Alertmanager for half an hour: a run
// never guesses that an alert resolved, or that it still fires.
var firingOptions = workflow.ActivityOptions{
	StartToCloseTimeout:    30 * time.Second,
	ScheduleToCloseTimeout: 30 * time.Minute,
	RetryPolicy: &temporal.RetryPolicy{
		InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: time.Minute,
		NonRetryableErrorTypes: fail.NonRetryable,
	},
}

// proves says whether a rule's runs take the proving path (alertRun.prove).
func proves(spec v1alpha1.RemediationRuleSpec) bool {
	return spec.HoldFor != nil || spec.Verify != nil || len(spec.Escalation) > 0
}

// proofPlan is what a proving run does around its acts, decided from the
// plan alone (decideProof), so it is table-tested without the SDK.
type proofPlan struct {
	// Hold is spec.holdFor: the run acts only if the alert still fires after it.
	Hold time.Duration
	// Verify waits Window after each rung, then asks whether the run's alerts resolved.
	Verify    bool
	Window    time.Duration
	OnFailure v1alpha1.VerifyFailure
	// Join: other alerts of the rule for the same workload join this run.
	Join bool
	// Rungs is the ladder: spec.template, then each step of spec.escalation.
	Rungs []alerts.LadderStep
}

// decideProof decides a proving run's plan from the verified plan.
func decideProof(plan alerts.AlertPlan) proofPlan {
	spec := plan.Spec
	p := proofPlan{Hold: spec.HoldFor.Or(0), Rungs: append([]alerts.LadderStep{{Name: "template", Steps: plan.Steps, Rollback: plan.Rollback}}, plan.Ladder...)}
	if spec.Verify != nil {
		p.Verify, p.Join = true, true
		p.Window = spec.Verify.Window.Or(0)
		if p.Window <= 0 {
			p.Window, _ = time.ParseDuration(v1alpha1.DefaultVerifyWindow)
		}
		p.OnFailure = spec.Verify.OnFailure
		if p.OnFailure == "" {
			p.OnFailure = v1alpha1.VerifyNone
			if len(plan.Ladder) > 0 {
				p.OnFailure = v1alpha1.VerifyEscalate
			}
		}
	}
	return p
}

// proofVerdict is what a verification concluded and what comes next.
type proofVerdict struct {
	Phase, Reason, Message string
	// Next is the rung to run next (0: none); Page asks a person now.
	Next int
	Page bool
}

// judge concludes the verification of rung from the alerts still firing
// at its end (unknown: Alertmanager could not be read). It reads no clock
// and calls nothing.
func judge(p proofPlan, rung int, firing []string, unknown bool) proofVerdict {
	step := p.Rungs[rung].Name
	switch {
	case unknown:
		return proofVerdict{Phase: v1alpha1.AlertIneffective, Reason: v1alpha1.ReasonIneffective, Message: fmt.Sprintf(
			"step %s: Alertmanager could not be read at the end of spec.verify.window, so the fix is not verified; nothing more is done", step)}
	case len(firing) == 0:
		return proofVerdict{Phase: v1alpha1.AlertVerified, Reason: v1alpha1.ReasonVerified, Message: fmt.Sprintf("step %s: every alert the run answers for resolved", step)}
	}
	still := fmt.Sprintf("step %s: still firing after %s: %s", step, p.Window, strings.Join(firing, ", "))
	switch p.OnFailure {
	case v1alpha1.VerifyPage:
		return proofVerdict{Phase: v1alpha1.AlertIneffective, Reason: v1alpha1.ReasonIneffective, Message: still + "; paging a person", Page: true}
	case v1alpha1.VerifyEscalate:
		if next := rung + 1; next < len(p.Rungs) {
			return proofVerdict{Phase: v1alpha1.AlertIneffective, Reason: v1alpha1.ReasonEscalated, Message: still + "; escalating to step " + p.Rungs[next].Name, Next: next}
		}
		return proofVerdict{Phase: v1alpha1.AlertIneffective, Reason: v1alpha1.ReasonLadderExhausted, Message: still + "; every step of spec.escalation ran"}
	}
	return proofVerdict{Phase: v1alpha1.AlertIneffective, Reason: v1alpha1.ReasonIneffective, Message: still}
}

// joinedAlert is an alert that joined this run, and whether it resolved.
type joinedAlert struct {
	Fingerprint string
	AlertID     string
	Resolved    bool
}

// prove is the run of a rule with holdFor, verify or escalation: hold,
// then each rung of the ladder through the same approval, gates and guard
// as act, each verified; the permit is held from the first rung to the
// end of the last verification, so alerts for the same workload join.
func (r *alertRun) prove(ctx workflow.Context) {
	r.proof = decideProof(r.plan)
	if r.proof.Join {
		workflow.Go(ctx, r.receiveJoins)
	}
	if r.proof.Hold > 0 && !r.hold(ctx) {
		return
	}
	defer func() {
		if r.permit != nil && r.permit.Granted {
			r.release(ctx)
		}
	}()
	for i := 0; i < len(r.proof.Rungs); i++ {
		rung := r.proof.Rungs[i]
		r.rung = i
		if rung.Page {
			r.record(ctx, alerts.AlertRecordInput{}, v1alpha1.AlertIneffective, v1alpha1.ReasonLadderExhausted, "every automatic step of spec.escalation ran: paging a person (step "+rung.Name+")")
			r.pageFor(ctx, v1alpha1.ReasonLadderExhausted, fmt.Sprintf("every automatic step of RemediationRule %s ran and alert %s (%s) still fires on %s: a person must look",
				r.in.Rule, r.in.Alert.Labels["alertname"], r.in.Alert.Fingerprint, r.plan.Target))
			return
		}
		r.plan.Steps, r.plan.Rollback = rung.Steps, rung.Rollback
		gp, ok := r.admit(ctx)
		if !ok {
			return
		}
		if r.decision.Shadow {
			r.shadow(ctx)
			return
		}
		r.remediate(ctx, gp.silence)
		if r.result.Phase != v1alpha1.AlertDone || !r.proof.Verify {
			return
		}
		v := r.verify(ctx)
		if v.Page {
			r.record(ctx, alerts.AlertRecordInput{}, v.Phase, v.Reason, v.Message)
			r.pageFor(ctx, v1alpha1.ReasonIneffective, fmt.Sprintf("RemediationRule %s acted on %s and alert %s (%s) still fires: a person must look",
				r.in.Rule, r.plan.Target, r.in.Alert.Labels["alertname"], r.in.Alert.Fingerprint))
			return
		}
		r.record(ctx, alerts.AlertRecordInput{}, v.Phase, v.Reason, v.Message)
		if v.Next == 0 {
			return
		}
		i = v.Next - 1
	}
}

// hold waits spec.holdFor, then acts only if Alertmanager still holds the
// alert as firing; a resolve during the hold ends it at once.
func (r *alertRun) hold(ctx workflow.Context) bool {
	r.record(ctx, alerts.AlertRecordInput{}, v1alpha1.AlertHeld, v1alpha1.ReasonHeld, fmt.Sprintf("spec.holdFor %s: acting only if the alert still fires then", r.proof.Hold))
	if ok, _ := workflow.AwaitWithTimeout(ctx, r.proof.Hold, func() bool { return r.resolved }); !ok {
		firing, err := r.stillFiring(ctx, nil)
		if err != nil {
			r.refuse(ctx, v1alpha1.ReasonHeld, "Alertmanager could not be read at the end of spec.holdFor, so nothing was done: "+messageOf(err), "")
			return false
		}
		if len(firing) > 0 {
			return true
		}
	}
	r.record(ctx, alerts.AlertRecordInput{}, v1alpha1.AlertCanceled, v1alpha1.ReasonResolvedWhileHeld, "the alert resolved during spec.holdFor: nothing was done")
	return false
}

// verify waits the whole window, then Alertmanager says which of the run's
// alert and the alerts that joined it still fire. It never ends early on a
// resolve: a fix that did not hold shows within the window, as the alert
// firing again or a replacement Pod's alert joining the run.
func (r *alertRun) verify(ctx workflow.Context) proofVerdict {
	r.record(ctx, alerts.AlertRecordInput{}, v1alpha1.AlertVerifying, v1alpha1.AlertVerifying, fmt.Sprintf(
		"step %s done: waiting %s (spec.verify.window), then asking Alertmanager whether the alert resolved", r.proof.Rungs[r.rung].Name, r.proof.Window))
	_ = workflow.Sleep(ctx, r.proof.Window)
	joined := make([]string, 0, len(r.joins))
	for _, j := range r.joins {
		joined = append(joined, j.Fingerprint)
	}
	firing, err := r.stillFiring(ctx, joined)
	if err != nil {
		return judge(r.proof, r.rung, nil, true)
	}
	return judge(r.proof, r.rung, firing, false)
}

// stillFiring asks Alertmanager which of the run's alert and joined are still firing.
func (r *alertRun) stillFiring(ctx workflow.Context, joined []string) ([]string, error) {
	var firing []string
	err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, firingOptions), alertActs.StillFiring,
		alerts.FiringCheck{Namespace: r.in.Namespace, Rule: r.in.Rule, Fingerprint: r.in.Alert.Fingerprint, Joined: joined}).Get(ctx, &firing)
	return firing, err
}

// pageFor asks a person through the approval path (approved): the request
// names the alert, the target and the last step; whatever they decide, the
// run does nothing more, and records reason with their answer.
func (r *alertRun) pageFor(ctx workflow.Context, reason, question string) {
	r.page = question
	if !r.approved(ctx) {
		return
	}
	r.record(ctx, alerts.AlertRecordInput{}, v1alpha1.AlertIneffective, reason, "a person was paged and took over (acknowledged by "+r.decidedBy+")")
}

// approvalSuffix names the run's approval request: one per rung, and the page.
func (r *alertRun) approvalSuffix() string {
	switch {
	case r.page != "":
		return "page"
	case r.rung > 0:
		return fmt.Sprintf("approval-s%d", r.rung+1)
	}
	return "approval"
}

// receiveJoins keeps the alerts that joined this run and their resolves.
// Only alerts of the same rule count: a note naming anything else is dropped.
func (r *alertRun) receiveJoins(ctx workflow.Context) {
	ch := workflow.GetSignalChannel(ctx, SignalJoined)
	for {
		var n JoinNote
		ch.Receive(ctx, &n)
		fp := alerts.JoinedFingerprint(r.in.Namespace, r.in.Rule, n.AlertID)
		if fp == "" || fp == r.in.Alert.Fingerprint {
			workflow.GetLogger(ctx).Warn("join note dropped: not an alert of this rule", "alert", n.AlertID)
			continue
		}
		i := slices.IndexFunc(r.joins, func(j joinedAlert) bool { return j.Fingerprint == fp })
		if i < 0 {
			r.joins = append(r.joins, joinedAlert{Fingerprint: fp, AlertID: n.AlertID})
			i = len(r.joins) - 1
		}
		r.joins[i].Resolved = r.joins[i].Resolved || n.Resolved
	}
}

// forwardResolve tells the run this alert joined that it resolved.
func (r *alertRun) forwardResolve(ctx workflow.Context) {
	if r.joined == "" {
		return
	}
	if err := workflow.SignalExternalWorkflow(ctx, r.joined, "", SignalJoined, JoinNote{AlertID: r.id, Resolved: true}).Get(ctx, nil); err != nil {
		workflow.GetLogger(ctx).Warn("joined run not told of the resolve", "run", r.joined, "error", err)
	}
}
