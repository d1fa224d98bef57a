package workflows

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/remedy-dev/remedy/activities"
	"github.com/remedy-dev/remedy/api/v1alpha1"
)

// Reasons of the approval gate.
const (
	ReasonApprovalRequested = "ApprovalRequested"
	ReasonApprovalRejected  = "ApprovalRejected"
	ReasonApprovalExpired   = "ApprovalExpired"
)

// Values of the ApprovalStatus search attribute.
const (
	ApprovalPending  = "Pending"
	ApprovalCanceled = "Canceled"
)

// versionApproval gates the approval gate; runs started before it fail
// Unsupported when the policy asks for approval, as they did.
const versionApproval = "approval-gate"

// defaultApprovalTimeout is the last level of the timeout hierarchy.
const defaultApprovalTimeout = 15 * time.Minute

// ApprovalSignal is the payload of the approve and reject signals.
type ApprovalSignal struct {
	Approver string `json:"approver"`
	Reason   string `json:"reason,omitempty"`
	// Via is set by the operator when it relays a kubectl decision.
	Via string `json:"via,omitempty"`
}

// DecideRequest is the payload of the decide update.
type DecideRequest struct {
	Approved bool   `json:"approved"`
	Approver string `json:"approver"`
	Reason   string `json:"reason,omitempty"`
}

var approvals *activities.Approvals

// ApprovalRequestName is the deterministic name of an execution's RAR.
func ApprovalRequestName(execution string) string { return execution + "-approval" }

// approvalTimeout applies the first three levels of the hierarchy that need
// no I/O: spec, then policy; 0 means "ask the namespace".
func approvalTimeout(spec v1alpha1.KubernetesExecutionSpec, policyTimeout string) time.Duration {
	if spec.Approval != nil && spec.Approval.Timeout != nil && spec.Approval.Timeout.Duration > 0 {
		return spec.Approval.Timeout.Duration
	}
	if d, err := time.ParseDuration(policyTimeout); err == nil && d > 0 {
		return d
	}
	return 0
}

// gate is the state the approval handlers share with the waiting run.
type gate struct {
	requiredBy time.Time
	decision   *activities.Decision
	closed     bool
}

// offer takes the first decision; later ones are logged and ignored.
func (g *gate) offer(ctx workflow.Context, d activities.Decision) {
	if g.decision != nil || g.closed {
		workflow.GetLogger(ctx).Info("ignoring late approval decision", "decision", d.Decision, "approver", d.DecidedBy, "via", d.Via)
		return
	}
	g.decision = &d
}

// validate refuses an update that could not be the first, timely decision,
// before it is written to history.
func (g *gate) validate(ctx workflow.Context, req DecideRequest) error {
	switch {
	case req.Approver == "":
		return errors.New("approver is required")
	case g.decision != nil || g.closed:
		return errors.New("a decision was already taken")
	case !workflow.Now(ctx).Before(g.requiredBy):
		return fmt.Errorf("the approval request expired at %s", g.requiredBy.UTC().Format(time.RFC3339))
	}
	return nil
}

// awaitApproval runs the approval gate: it creates the RAR, sets
// WaitingApproval and waits for a signal, the decide update or the timer.
// It returns true when the run may execute.
func (r *executionRun) awaitApproval(ctx workflow.Context, pol activities.PolicyResult) bool {
	spec := r.in.Spec
	quick := workflow.WithActivityOptions(ctx, quickOptions)
	timeout := approvalTimeout(spec, pol.ApprovalTimeout)
	if timeout == 0 {
		if err := workflow.ExecuteActivity(quick, approvals.NamespaceApprovalTimeout, r.in.Namespace).Get(ctx, &timeout); err != nil {
			r.fail(ctx, err, activities.ReasonInvalidParameters)
			return false
		}
	}
	if timeout <= 0 {
		timeout = defaultApprovalTimeout
	}
	// RAR times are stored in whole seconds: round up so the timer and the record agree.
	g := &gate{requiredBy: workflow.Now(ctx).Add(timeout + time.Second - 1).Truncate(time.Second)}
	name := ApprovalRequestName(r.in.Name)
	id := workflow.GetInfo(ctx).WorkflowExecution.ID
	reason := "spec.approval.required is set"
	if pol.Validation.RequiredApproval {
		reason = "policy " + pol.Validation.PolicyName + " requires approval"
	}
	in := activities.ApprovalRequestInput{
		Namespace: r.in.Namespace, Name: name, SubjectUID: r.in.UID, WorkflowID: id, RequiredBy: g.requiredBy,
		Subject: v1alpha1.ObjectRef{APIVersion: v1alpha1.GroupVersion.String(), Kind: "KubernetesExecution", Namespace: r.in.Namespace, Name: r.in.Name},
		Context: v1alpha1.ApprovalContext{Reason: reason, Action: spec.Action, Target: spec.Target, PolicyEvaluation: &v1alpha1.PolicyEvaluation{
			PolicyName: pol.Validation.PolicyName, Decision: policyDecision(pol.Validation), PolicyHash: pol.Validation.PolicyHash,
		}},
	}
	if spec.RemediationRequestRef != nil {
		in.RemediationRequest = spec.RemediationRequestRef.Name
	}
	if err := workflow.ExecuteActivity(quick, approvals.CreateApprovalRequest, in).Get(ctx, nil); err != nil {
		r.fail(ctx, err, activities.ReasonInvalidParameters)
		return false
	}
	r.status.ApprovalRequestRef = &v1alpha1.LocalRef{Name: name}
	r.upsertApproval(ctx, ApprovalPending)
	r.setPhase(ctx, v1alpha1.PhaseWaitingApproval, ReasonApprovalRequested,
		fmt.Sprintf("%s; approve or reject RemediationApprovalRequest %s before %s", reason, name, g.requiredBy.UTC().Format(time.RFC3339)))

	r.listen(ctx, g)
	ok, err := workflow.AwaitWithTimeout(ctx, g.requiredBy.Sub(workflow.Now(ctx)), func() bool { return g.decision != nil })
	if err != nil {
		g.closed = true
		r.upsertApproval(ctx, ApprovalCanceled)
		r.fail(ctx, err, ReasonCanceled)
		return false
	}
	if !ok {
		g.decision = &activities.Decision{Decision: v1alpha1.DecisionExpired, DecidedBy: "timer", Via: v1alpha1.DecidedViaTimer,
			At: workflow.Now(ctx), Message: "no decision before " + g.requiredBy.UTC().Format(time.RFC3339)}
	}
	g.closed = true
	var d activities.Decision
	err = workflow.ExecuteActivity(quick, approvals.RecordDecision, activities.DecisionInput{
		Namespace: r.in.Namespace, Name: name, WorkflowID: id, Decision: *g.decision,
	}).Get(ctx, &d)
	if err != nil {
		r.fail(ctx, err, activities.ReasonInvalidParameters)
		return false
	}
	r.upsertApproval(ctx, string(d.Decision))
	switch d.Decision {
	case v1alpha1.DecisionApproved:
		return true
	case v1alpha1.DecisionRejected:
		r.setPhase(ctx, v1alpha1.PhaseFailed, ReasonApprovalRejected, fmt.Sprintf("rejected by %s via %s: %s", d.DecidedBy, d.Via, d.Message))
	default:
		r.setPhase(ctx, v1alpha1.PhaseFailed, ReasonApprovalExpired, d.Message)
	}
	return false
}

// listen installs the decide update and drains both signals for the whole
// run, so a late decision is logged rather than left unhandled.
func (r *executionRun) listen(ctx workflow.Context, g *gate) {
	err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateDecide, func(ctx workflow.Context, req DecideRequest) (string, error) {
		d := activities.Decision{Decision: v1alpha1.DecisionRejected, DecidedBy: req.Approver, Via: v1alpha1.DecidedViaUpdate, At: workflow.Now(ctx), Message: req.Reason}
		if req.Approved {
			d.Decision = v1alpha1.DecisionApproved
		}
		g.offer(ctx, d)
		return string(d.Decision), nil
	}, workflow.UpdateHandlerOptions{Validator: g.validate})
	if err != nil {
		workflow.GetLogger(ctx).Error("register decide update", "error", err)
	}
	// A slice, not a map: coroutines must start in the same order on replay.
	for _, s := range []struct {
		name     string
		decision v1alpha1.Decision
	}{{SignalApprove, v1alpha1.DecisionApproved}, {SignalReject, v1alpha1.DecisionRejected}} {
		ch, decision := workflow.GetSignalChannel(ctx, s.name), s.decision
		workflow.Go(ctx, func(ctx workflow.Context) {
			for {
				var s ApprovalSignal
				ch.Receive(ctx, &s)
				via := v1alpha1.DecidedViaSignal
				if s.Via == string(v1alpha1.DecidedViaKubectl) {
					via = v1alpha1.DecidedViaKubectl
				}
				g.offer(ctx, activities.Decision{Decision: decision, DecidedBy: orUnknown(s.Approver), Via: via, At: workflow.Now(ctx), Message: s.Reason})
			}
		})
	}
}

func (r *executionRun) upsertApproval(ctx workflow.Context, value string) {
	if err := workflow.UpsertTypedSearchAttributes(ctx, AttrApprovalStatus.ValueSet(value)); err != nil {
		workflow.GetLogger(ctx).Warn("upsert ApprovalStatus", "error", err)
	}
}

func policyDecision(p v1alpha1.PolicyValidation) string {
	if p.RequiredApproval {
		return "require_approval"
	}
	return "allow"
}
