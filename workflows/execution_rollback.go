package workflows

import (
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/remedy-dev/remedy/activities/execution"
	"github.com/remedy-dev/remedy/activities/gate"
	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/actions"
	"github.com/remedy-dev/remedy/internal/seal"
)

// awaitRollback keeps the run open for the rollback window; a rollback signal
// runs the captured inverse action, the window's end finishes the run.
func (r *executionRun) awaitRollback(ctx workflow.Context, req actions.Request, window time.Duration) {
	var rb RollbackRequest
	var by *seal.Person
	signalled := false
	timerCtx, cancelTimer := workflow.WithCancel(ctx)
	sel := workflow.NewSelector(ctx)
	sel.AddFuture(workflow.NewTimer(timerCtx, window), func(workflow.Future) {})
	sel.AddReceive(workflow.GetSignalChannel(ctx, SignalRollback), func(c workflow.ReceiveChannel, _ bool) {
		// A rollback signal rolls back whatever its payload says: its fields
		// only describe the request. A malformed one is logged as a Warning.
		by = receivePersonSignal(ctx, c, &rb, lenient)
		signalled = true
	})
	for {
		sel.Select(ctx)
		if !signalled || by == nil || ctx.Err() != nil {
			break
		}
		// A person's rollback, through the codec server: they must hold the
		// grant for the inverse action themselves. Refused, the window stays open.
		if why := r.authorizeRollback(ctx, req, *by); why != "" {
			workflow.GetLogger(ctx).Warn("ignoring a person's rollback: "+why, "person", by.Username)
			warnSignal(ctx, SignalRollback, "rollback refused: "+why)
			rb, by, signalled = RollbackRequest{}, nil, false
			continue
		}
		rb.Requester = by.Username
		break
	}
	cancelTimer()
	if ctx.Err() != nil {
		r.setPhase(ctx, v1alpha1.PhaseCompleted, v1alpha1.ReasonCanceled, "run canceled during the rollback window; rollback information kept")
		return
	}
	if !signalled {
		r.finish(ctx, "rollback window closed")
		return
	}
	r.rollback(ctx, req, rb)
}

// awaitParent hands the decision to the RemediationRequest's workflow: the
// step reports where it stands and waits to be rolled back or finalized.
func (r *executionRun) awaitParent(ctx workflow.Context, req actions.Request) {
	parent := workflow.GetInfo(ctx).ParentWorkflowExecution
	reason, msg := v1alpha1.ReasonRollbackAvailable, "rollback to "+r.status.ExecutionResults.ResourcesAffected[0].Before+
		" kept available until the RemediationRequest ends; waiting for it to roll back or finalize"
	if r.postFailure != "" {
		reason, msg = v1alpha1.ReasonPostConditionFailed, r.postFailure+"; "+msg
	}
	r.setPhase(ctx, v1alpha1.PhaseRollbackReady, reason, msg)
	report := StepReport{Execution: r.in.Name, Status: r.status, PostFailure: r.postFailure}
	if err := workflow.SignalExternalWorkflow(ctx, parent.ID, "", SignalStepReady, report).Get(ctx, nil); err != nil {
		r.fail(ctx, err, v1alpha1.ReasonRollbackFailed)
		return
	}
	var req2 RollbackRequest
	finalize := false
	sel := workflow.NewSelector(ctx)
	var by *seal.Person
	sel.AddReceive(workflow.GetSignalChannel(ctx, SignalRollback), func(c workflow.ReceiveChannel, _ bool) {
		by = receivePersonSignal(ctx, c, &req2, lenient)
	})
	sel.AddReceive(workflow.GetSignalChannel(ctx, SignalFinalize), func(c workflow.ReceiveChannel, _ bool) {
		c.Receive(ctx, nil)
		finalize = true
	})
	sel.Select(ctx)
	// A step is rolled back by its RemediationRequest's run only, never by a person's signal.
	for by != nil && ctx.Err() == nil {
		warnSignal(ctx, SignalRollback, "rollback refused: "+by.Username+" may not roll back a step of a RemediationRequest; its request decides")
		req2, by = RollbackRequest{}, nil
		sel.Select(ctx)
	}
	switch {
	case ctx.Err() != nil:
		r.setPhase(ctx, v1alpha1.PhaseCompleted, v1alpha1.ReasonCanceled, "run canceled while waiting for the RemediationRequest")
	case finalize:
		r.finish(ctx, "finalized by the RemediationRequest")
	default:
		r.rollback(ctx, req, req2)
	}
}

// rollback runs the captured inverse action after the same checks as the original.
func (r *executionRun) rollback(ctx workflow.Context, req actions.Request, rb RollbackRequest) {
	info := r.captured()
	back := actions.Request{Action: info.RollbackAction, Target: req.Target, Token: req.Token, Requester: req.Requester}
	if info.RollbackParameters != nil {
		back.Params = *info.RollbackParameters
	}
	workflow.GetLogger(ctx).Info("rollback requested", "requester", rb.Requester, "reason", rb.Reason)
	r.setPhase(ctx, v1alpha1.PhaseExecuting, v1alpha1.ReasonRollingBack, "rolling back as requested by "+orUnknown(rb.Requester))
	if err := r.validateRollback(ctx, back); err != nil {
		r.setPhase(ctx, v1alpha1.PhaseFailed, v1alpha1.ReasonRollbackFailed, "rollback refused: "+reasonOf(err, "")+": "+messageOf(err))
		return
	}
	var done execution.ExecuteResult
	w := r.write(back)
	w.RollbackKey = r.rollbackKey
	err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, rollbackOptions(r.in.Spec)), executionActs.ExecuteInline, w).Get(ctx, &done)
	if err != nil {
		r.setPhase(ctx, v1alpha1.PhaseFailed, v1alpha1.ReasonRollbackFailed, r.readable().Failure(err))
		return
	}
	change := r.change(done.Plan.Change)
	change.Action = "rolled back"
	r.status.ExecutionResults.ResourcesAffected = append(r.status.ExecutionResults.ResourcesAffected, change)
	r.setPhase(ctx, v1alpha1.PhaseCompleted, v1alpha1.ReasonRolledBack, r.impact(change))
}

// validateRollback puts the inverse action through the same parameter, RBAC
// and policy checks as the original.
func (r *executionRun) validateRollback(ctx workflow.Context, back actions.Request) error {
	quick := workflow.WithActivityOptions(ctx, rollbackCheckOptions())
	spec := v1alpha1.KubernetesExecutionSpec{Action: back.Action, Target: back.Target, Parameters: &back.Params}
	if err := workflow.ExecuteActivity(quick, validation.CheckSpec, spec, back).Get(ctx, nil); err != nil {
		return err
	}
	// The run acts for its requester, so the inverse action needs their grant too.
	if err := r.checkRequester(ctx, back.Action); err != nil {
		return err
	}
	if err := workflow.ExecuteActivity(quick, validation.CheckRBAC, back).Get(ctx, nil); err != nil {
		return err
	}
	var pol gate.PolicyResult
	if err := workflow.ExecuteActivity(quick, validation.EvaluatePolicy, back).Get(ctx, &pol); err != nil {
		return err
	}
	if !pol.Validation.Allowed {
		return temporal.NewNonRetryableApplicationError(strings.Join(pol.Validation.Messages, "; "), v1alpha1.ReasonPolicyDenied, nil)
	}
	return nil
}

// versionPersonRollbacks gates the authorization of a person's rollback
// (one sent through Remedy's codec server). A history without its marker
// never held one: runs before it could not decode them.
const versionPersonRollbacks = "person-rollbacks"

// authorizeRollback asks whether the person may have Remedy run the captured
// inverse action on the target themselves, as the rollback annotation's
// admission asks of whoever sets it; it returns why not, or "".
func (r *executionRun) authorizeRollback(ctx workflow.Context, req actions.Request, who seal.Person) string {
	if v := workflow.GetVersion(ctx, versionPersonRollbacks, workflow.DefaultVersion, 1); v == workflow.DefaultVersion {
		return "a person's rollback reached a run that predates them"
	}
	info := r.captured()
	if info == nil || !info.Available {
		return "this run captured no rollback"
	}
	check := gate.RequesterCheck{Namespace: r.in.Namespace, Action: info.RollbackAction, Target: req.Target,
		Requester: &v1alpha1.Requester{Username: who.Username, UID: who.UID, Groups: who.Groups, Extra: who.Extra}}
	if err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, rollbackCheckOptions()), validation.CheckRequester, check).Get(ctx, nil); err != nil {
		return messageOf(err)
	}
	return ""
}
