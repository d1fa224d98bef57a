package workflows

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/remedy-dev/remedy/activities/alerts"
	"github.com/remedy-dev/remedy/activities/fail"
	"github.com/remedy-dev/remedy/activities/gate"
	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/actions"
	"github.com/remedy-dev/remedy/internal/alertrule"
	"github.com/remedy-dev/remedy/internal/metrics"
)

// SignalAlert carries each notification of the alert (AlertSignal): the
// receiver signal-with-starts the workflow with it, so repeats, HA
// duplicates and retries are signals to one run.
const SignalAlert = "alert"

// Alert statuses in AlertSignal, as Alertmanager writes them.
const (
	AlertFiring   = "firing"
	AlertResolved = "resolved"
)

// Search attributes of alert workflows.
var (
	AttrRule  = temporal.NewSearchAttributeKeyKeyword("RemedyRule")
	AttrAlert = temporal.NewSearchAttributeKeyKeyword("RemedyAlert")
)

// AlertInput is the alert and rule a run is for. Nothing in it is trusted:
// the run verifies it against the API server and Alertmanager.
type AlertInput struct {
	Namespace string          `json:"namespace"`
	Rule      string          `json:"rule"`
	Alert     alertrule.Alert `json:"alert"`
}

// AlertSignal is one notification of the alert.
type AlertSignal struct {
	Status string    `json:"status"`
	EndsAt time.Time `json:"endsAt,omitempty"`
}

// AlertResult is what the run did.
type AlertResult struct {
	Phase   string   `json:"phase"`
	Reason  string   `json:"reason,omitempty"`
	Message string   `json:"message,omitempty"`
	Request string   `json:"request,omitempty"`
	DryRun  []string `json:"dryRun,omitempty"`
	// RunbookURL and Summary are the alert's, as Alertmanager holds them
	// (alertrule.RunbookOf): the status query shows them in the Web UI.
	RunbookURL string `json:"runbookURL,omitempty"`
	Summary    string `json:"summary,omitempty"`
}

var (
	alertActs *alerts.Alerts
	guards    *alerts.Guards
)

var awaitRequestOptions = workflow.ActivityOptions{
	StartToCloseTimeout: 24 * time.Hour,
	HeartbeatTimeout:    30 * time.Second,
	RetryPolicy: &temporal.RetryPolicy{
		InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 30 * time.Second,
		NonRetryableErrorTypes: fail.NonRetryable,
	},
}

// alertRun is one run's state.
type alertRun struct {
	in       AlertInput
	id       string
	resolved bool
	permit   *Permit
	// permits are the permit signals received and not yet taken; nonce
	// binds the run's request to the guard's answer (permitNonceChange).
	permits []Permit
	nonce   string
	plan    alerts.AlertPlan
	// decision is what the run does with plan (decideAlert).
	decision alertDecision
	result   AlertResult
	// frozen is set when a freeze made this run ask for approval.
	frozen *alerts.AlertGates
	// until is when a freeze that holds the run ends (for its records).
	until *time.Time
	// silence is the Alertmanager silence the run holds, or held.
	silence string
	// proof is what a run of a rule with holdFor, verify or escalation
	// does around its acts (decideProof); zero otherwise.
	proof proofPlan
	// rung is the step of the ladder the run is on (0: spec.template).
	rung int
	// joined is the run this alert joined; joins are the alerts that joined this run.
	joined string
	joins  []joinedAlert
	// page, when set, is the question of the approval request that pages a person.
	page string
	// decidedBy is who approved the last approval request.
	decidedBy string
}

// AlertWorkflow acts once on one alert for one rule, through every guard:
// verify the rule and the alert, refuse a GitOps-managed target (per rule),
// ask for approval, get a permit from the namespace's guard, then run the
// RemediationRequest in the author's name (or, in shadow mode, only its
// server-side dry-run). It then stays open until the alert resolves, so
// repeats and duplicates fold into it; a resolve it never receives is
// signalled by the receiver's sweep.
func AlertWorkflow(ctx workflow.Context, in AlertInput) (AlertResult, error) {
	r := &alertRun{in: in, id: workflow.GetInfo(ctx).WorkflowExecution.ID}
	if err := workflow.SetQueryHandler(ctx, QueryStatus, func() (AlertResult, error) { return r.result, nil }); err != nil {
		return AlertResult{}, err
	}
	_ = workflow.UpsertTypedSearchAttributes(ctx, AttrKind.ValueSet("Alert"), AttrRule.ValueSet(in.Namespace+"/"+in.Rule), AttrAlert.ValueSet(in.Alert.Fingerprint))
	notes := workflow.GetSignalChannel(ctx, SignalAlert)
	workflow.Go(ctx, func(c workflow.Context) {
		for {
			var s AlertSignal
			notes.Receive(c, &s)
			if s.Status == AlertResolved {
				r.resolved = true
			} else {
				count(c, metrics.AlertsDeduplicated.WithLabelValues(in.Namespace), 1)
			}
		}
	})
	workflow.Go(ctx, r.receivePermits)
	quick := workflow.WithActivityOptions(ctx, quickOptions)
	r.setPhase(ctx, "Verifying", "", "")
	subject := gate.AlertSubject{Namespace: in.Namespace, Rule: in.Rule, Alert: in.Alert}
	if err := workflow.ExecuteActivity(quick, alertActs.VerifyAlert, subject).Get(ctx, &r.plan); err != nil {
		r.refused(ctx, err)
		return r.result, nil
	}
	r.showRunbook(ctx)
	r.record(ctx, alerts.AlertRecordInput{Matched: true}, v1alpha1.AlertQueued, "Matched", r.plan.Runbook.Note)
	if proves(r.plan.Spec) && workflow.GetVersion(ctx, proveChange, workflow.DefaultVersion, 1) >= 1 {
		r.prove(ctx)
		r.awaitResolve(ctx)
		r.forwardResolve(ctx)
		return r.result, nil
	}
	r.act(ctx)
	r.awaitResolve(ctx)
	return r.result, nil
}

// act carries out the run's decision (decideAlert); it records every outcome.
func (r *alertRun) act(ctx workflow.Context) {
	gp, ok := r.admit(ctx)
	if !ok {
		return
	}
	defer r.release(ctx)
	if r.decision.Shadow {
		r.shadow(ctx)
		return
	}
	r.remediate(ctx, gp.silence)
}

// admit decides (decideAlert), asks for approval, waits out the gates and
// gets the guard's permit: true when the run may act.
func (r *alertRun) admit(ctx workflow.Context) (gatePlan, bool) {
	r.decision = decideAlert(r.in.Rule, r.plan)
	r.decision.Guard.Join = r.proof.Join
	d := r.decision
	if d.Refuse != nil {
		r.refuse(ctx, d.Refuse.Reason, d.Refuse.Message, "")
		return gatePlan{}, false
	}
	gp := gatesOf(ctx, d)
	if d.Approve && !r.approved(ctx) {
		return gp, false
	}
	if gp.holds() && !r.awaitGates(ctx, gp) {
		return gp, false
	}
	return gp, r.acquire(ctx)
}

// approved asks a person; a resolve under resolvePolicy Cancel withdraws the question.
func (r *alertRun) approved(ctx workflow.Context) bool {
	step := r.plan.Steps[0].Execution
	ask := ApprovalAsk{
		Namespace: r.in.Namespace, Name: r.requestName(ctx, r.approvalSuffix()),
		Subject:    v1alpha1.ObjectRef{APIVersion: v1alpha1.GroupVersion.String(), Kind: "RemediationRule", Namespace: r.in.Namespace, Name: r.in.Rule},
		SubjectUID: r.plan.RuleUID,
		Context: v1alpha1.ApprovalContext{Reason: fmt.Sprintf("alert %s (%s) matched RemediationRule %s", r.in.Alert.Labels["alertname"], r.in.Alert.Fingerprint, r.in.Rule),
			Action: step.Action, Target: step.Target, Requester: r.plan.Author.Username,
			RunbookURL: r.plan.Runbook.URL, Summary: r.plan.Runbook.Summary},
		Timeout: r.decision.ApprovalTimeout,
		Opened: func(ctx workflow.Context, _ time.Time) {
			if r.frozen != nil {
				r.until = r.frozen.Until
				r.record(ctx, alerts.AlertRecordInput{}, v1alpha1.AlertWaiting, v1alpha1.ReasonFrozen, r.frozen.Message+"; spec.freeze.action RequireApproval: a person decides instead")
				r.until = nil
				return
			}
			r.record(ctx, alerts.AlertRecordInput{}, v1alpha1.AlertWaiting, "ApprovalRequested", "")
		},
		Superseded: func() string {
			if r.resolved && r.decision.CancelOnResolve {
				return "the alert resolved"
			}
			return ""
		},
	}
	if r.frozen != nil {
		ask.Context.Reason += " inside a change freeze (spec.freeze)"
	}
	if r.page != "" {
		ask.Context.Reason = r.page
	}
	var g approvalGate
	d, err := g.awaitDecision(ctx, ask)
	switch {
	case errors.Is(err, errApprovalSuperseded):
		r.record(ctx, alerts.AlertRecordInput{}, v1alpha1.AlertCanceled, v1alpha1.ReasonResolved, "the alert resolved before a decision: approval request withdrawn")
		return false
	case err != nil:
		r.refuse(ctx, "ApprovalFailed", err.Error(), "")
		return false
	case d.Decision != v1alpha1.DecisionApproved:
		r.refuse(ctx, v1alpha1.ReasonRejected, fmt.Sprintf("%s by %s: %s", d.Decision, d.DecidedBy, d.Message), "")
		return false
	}
	r.decidedBy = d.DecidedBy
	return true
}

// acquire asks the namespace's guard for a permit and waits for it; a
// resolve under resolvePolicy Cancel withdraws the request.
func (r *alertRun) acquire(ctx workflow.Context) bool {
	req := r.decision.Guard
	req.AlertID, req.RunID, req.Step = r.id, workflow.GetInfo(ctx).WorkflowExecution.RunID, r.rung
	if r.permit != nil && r.permit.Granted {
		// A rung of the ladder continues the permit the run holds (GuardState.proceed).
		req.Continues, r.permit = r.nonce, nil
	}
	if workflow.GetVersion(ctx, permitNonceChange, workflow.DefaultVersion, 1) >= 1 {
		r.nonce = newPermitNonce(ctx)
		req.Nonce = r.nonce
	}
	if err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, quickOptions), guards.Acquire, r.in.Namespace, req).Get(ctx, nil); err != nil {
		r.refuse(ctx, "GuardUnavailable", messageOf(err), "")
		return false
	}
	r.setPhase(ctx, v1alpha1.AlertQueued, "AwaitingPermit", "waiting for the namespace's guard: target busy or cooling down, or the namespace budget is spent")
	_ = workflow.Await(ctx, func() bool { return r.permit != nil || r.take(ctx) || (r.decision.CancelOnResolve && r.resolved) })
	if r.permit == nil {
		r.release(ctx)
		r.record(ctx, alerts.AlertRecordInput{}, v1alpha1.AlertCanceled, v1alpha1.ReasonResolved, "the alert resolved while queued")
		return false
	}
	if r.permit.Joined != "" {
		r.joined = r.permit.Joined
		r.record(ctx, alerts.AlertRecordInput{}, v1alpha1.AlertJoined, v1alpha1.ReasonJoined, fmt.Sprintf(
			"joined the open run %s for %s: it acts and verifies for this alert too, and this run does nothing", r.joined, r.plan.Target))
		return false
	}
	if !r.permit.Granted {
		r.refuse(ctx, r.permit.Reason, r.permit.Message, r.permit.Reason)
		return false
	}
	return true
}

func (r *alertRun) release(ctx workflow.Context) {
	err := workflow.SignalExternalWorkflow(ctx, v1alpha1.AlertGuardWorkflowID(r.in.Namespace), "", SignalRelease, ReleaseRequest{AlertID: r.id, Nonce: r.nonce}).Get(ctx, nil)
	if err != nil {
		workflow.GetLogger(ctx).Warn("permit not released", "error", err)
	}
}

// shadow records each step's server-side dry-run diff and writes nothing.
// The diff goes into the rule's status, so it shows the target's values only
// where the rule's author may get the target (runs recorded before
// shadowReadableChange show them as they did).
func (r *alertRun) shadow(ctx workflow.Context) {
	quick := workflow.WithActivityOptions(ctx, quickOptions)
	redacts := workflow.GetVersion(ctx, shadowReadableChange, workflow.DefaultVersion, 1) >= 1
	var diffs []string
	for _, s := range r.plan.Steps {
		req := actions.Request{Action: s.Execution.Action, Target: s.Execution.Target, Requester: &r.plan.Author}
		if s.Execution.Parameters != nil {
			req.Params = *s.Execution.Parameters
		}
		var res v1alpha1.DryRunResults
		err := workflow.ExecuteActivity(quick, executionActs.DryRun, req).Get(ctx, &res)
		reads := gate.Readable{Allowed: true}
		if redacts {
			reads = gate.Readable{}
			check := gate.RequesterCheck{Namespace: r.in.Namespace, Requester: &r.plan.Author, Action: req.Action, Target: req.Target}
			if err := workflow.ExecuteActivity(quick, validation.MayReadTarget, check).Get(ctx, &reads); err != nil {
				reads = gate.Readable{}
			}
			res.EstimatedImpact = reads.Value(res.EstimatedImpact)
		}
		line := s.Name + ": " + res.EstimatedImpact
		if err != nil {
			line = s.Name + ": dry-run failed: " + reads.Failure(err)
		}
		diffs = append(diffs, line)
	}
	r.result.DryRun = diffs
	r.record(ctx, alerts.AlertRecordInput{Started: true}, v1alpha1.AlertShadow, "DryRun", "shadow mode: nothing was written")
}

// shadowReadableChange is the workflow.GetVersion change ID of shadow diffs
// shown only as the rule's author may read the target.
const shadowReadableChange = "shadow-values-readable"

// remediate runs the RemediationRequest and waits for it; a resolve under
// resolvePolicy Cancel cancels the request's workflow (steps not started never run).
func (r *alertRun) remediate(ctx workflow.Context, silence bool) {
	var ref alerts.RequestRef
	err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, stepCreateOptions), alertActs.CreateAlertRequest,
		alerts.AlertRequestInput{Subject: gate.AlertSubject{Namespace: r.in.Namespace, Rule: r.in.Rule, Alert: r.in.Alert}, Plan: r.plan, Step: r.rung}).Get(ctx, &ref)
	if err != nil {
		r.refuse(ctx, reasonOf(err, v1alpha1.ReasonInvalidParameters), messageOf(err), "")
		return
	}
	r.result.Request = ref.Name
	silenceFor := r.decision.SilenceFor
	if silence {
		r.holdSilence(ctx, silenceFor)
	}
	r.record(ctx, alerts.AlertRecordInput{Started: true}, v1alpha1.AlertRunning, "Started", "RemediationRequest "+ref.Name)
	actx, cancel := workflow.WithCancel(ctx)
	defer cancel()
	fut := workflow.ExecuteActivity(workflow.WithActivityOptions(actx, awaitRequestOptions), alertActs.AwaitRequest, r.in.Namespace, ref)
	var st v1alpha1.RemediationRequestStatus
	done := false
	ended := func() bool { return fut.IsReady() || (r.decision.CancelOnResolve && r.resolved) }
	// The silence is renewed each time half of it has passed, while the run runs.
	for r.silence != "" {
		if ok, _ := workflow.AwaitWithTimeout(ctx, silenceFor/2, ended); ok {
			break
		}
		r.holdSilence(ctx, silenceFor)
	}
	_ = workflow.Await(ctx, ended)
	if ctx.Err() != nil {
		// This run was canceled: its request must not run on without the
		// guard's permit, which this run releases on its way out.
		dctx, _ := workflow.NewDisconnectedContext(ctx)
		r.endSilence(dctx)
		_ = workflow.RequestCancelExternalWorkflow(dctx, ref.WorkflowID, "").Get(dctx, nil)
		r.record(dctx, alerts.AlertRecordInput{}, v1alpha1.AlertCanceled, v1alpha1.ReasonCanceled, "the alert's run was canceled: RemediationRequest "+ref.Name+" canceled")
		return
	}
	r.endSilence(ctx)
	if fut.IsReady() {
		done = true
		err = fut.Get(ctx, &st)
	}
	if !done {
		_ = workflow.RequestCancelExternalWorkflow(ctx, ref.WorkflowID, "").Get(ctx, nil)
		r.record(ctx, alerts.AlertRecordInput{}, v1alpha1.AlertCanceled, v1alpha1.ReasonResolved, "the alert resolved: RemediationRequest "+ref.Name+" canceled")
		return
	}
	if err != nil {
		r.record(ctx, alerts.AlertRecordInput{}, v1alpha1.AlertDone, reasonOf(err, "Failed"), messageOf(err))
		return
	}
	r.record(ctx, alerts.AlertRecordInput{}, v1alpha1.AlertDone, st.Reason, string(st.Phase)+": "+st.Message)
}

// awaitResolve keeps the run open until the alert resolves, so repeats
// and duplicates fold into it. A resolve Alertmanager never delivered is
// signalled by the receiver's sweep (alertActs.Sweep).
func (r *alertRun) awaitResolve(ctx workflow.Context) {
	_ = workflow.Await(ctx, func() bool { return r.resolved })
}

func (r *alertRun) refuse(ctx workflow.Context, reason, msg, guard string) {
	in := alerts.AlertRecordInput{Guard: guard}
	if r.permit != nil && r.permit.StormUntil != nil {
		in.StormUntil = r.permit.StormUntil
	}
	r.record(ctx, in, v1alpha1.AlertRefused, reason, msg)
}

// record sets the run's phase and writes it into the rule's status.
func (r *alertRun) record(ctx workflow.Context, in alerts.AlertRecordInput, phase, reason, msg string) {
	r.setPhase(ctx, phase, reason, msg)
	in.Namespace, in.Rule, in.RuleUID = r.in.Namespace, r.in.Rule, r.plan.RuleUID
	in.Record = v1alpha1.AlertRecord{Fingerprint: r.in.Alert.Fingerprint, AlertName: r.in.Alert.Labels["alertname"], Phase: phase, Reason: reason,
		Message: capMessage(msg), Target: r.plan.Target, Request: r.result.Request, WorkflowID: r.id, GeneratorURL: r.in.Alert.GeneratorURL,
		Labels: r.in.Alert.Labels, DryRun: r.result.DryRun, Silence: r.silence, RunbookURL: r.plan.Runbook.URL, Summary: r.plan.Runbook.Summary}
	if r.until != nil {
		in.Record.Until = &metav1.Time{Time: *r.until}
	}
	if err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, quickOptions), alertActs.RecordAlert, in).Get(ctx, nil); err != nil {
		workflow.GetLogger(ctx).Warn("alert not recorded on the rule", "error", err)
	}
}

func (r *alertRun) setPhase(ctx workflow.Context, phase, reason, msg string) {
	r.result.Phase, r.result.Reason, r.result.Message = phase, reason, capMessage(msg)
	_ = workflow.UpsertTypedSearchAttributes(ctx, AttrPhase.ValueSet(phase))
}

// requestName names an object this run creates: unique per run, stable across its retries.
func (r *alertRun) requestName(ctx workflow.Context, suffix string) string {
	run := workflow.GetInfo(ctx).WorkflowExecution.RunID
	fp := r.in.Alert.Fingerprint
	return fmt.Sprintf("%s-%s-%s-%s", truncateName(r.in.Rule, 30), fp[:min(8, len(fp))], run[:min(8, len(run))], suffix)
}

func truncateName(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
