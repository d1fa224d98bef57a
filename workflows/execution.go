package workflows

import (
	"errors"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/remedy-dev/remedy/activities"
	"github.com/remedy-dev/remedy/activities/actions"
	"github.com/remedy-dev/remedy/api/v1alpha1"
)

// Reasons the workflow itself sets; failure reasons come from activities.
const (
	ReasonSucceeded         = "Succeeded"
	ReasonRollbackAvailable = "RollbackAvailable"
	ReasonRolledBack        = "RolledBack"
	ReasonRollbackFailed    = "RollbackFailed"
	ReasonCanceled          = "Canceled"
)

// ExecutionInput identifies the KubernetesExecution and carries its spec.
type ExecutionInput struct {
	Namespace string                           `json:"namespace"`
	Name      string                           `json:"name"`
	UID       string                           `json:"uid"`
	Spec      v1alpha1.KubernetesExecutionSpec `json:"spec"`
}

// ExecutionResult is the final phase object.
type ExecutionResult struct {
	Status v1alpha1.KubernetesExecutionStatus `json:"status"`
}

// RollbackRequest is the payload of the rollback signal.
type RollbackRequest struct {
	Requester string `json:"requester,omitempty"`
	Reason    string `json:"reason,omitempty"`
}

// ExecutionWorkflow takes one action through validation, execution and the
// rollback window, keeping the phase object that the status query returns and
// the operator mirrors into .status. Domain failures end the workflow
// successfully with phase Failed; only bugs fail the workflow itself.
func ExecutionWorkflow(ctx workflow.Context, in ExecutionInput) (ExecutionResult, error) {
	r := &executionRun{in: in, status: v1alpha1.KubernetesExecutionStatus{
		Phase:             v1alpha1.PhasePending,
		ValidationResults: &v1alpha1.ValidationResults{},
	}}
	if err := workflow.SetQueryHandler(ctx, QueryStatus, func() (v1alpha1.KubernetesExecutionStatus, error) {
		return r.status, nil
	}); err != nil {
		return ExecutionResult{}, err
	}
	r.run(ctx)
	return ExecutionResult{Status: r.status}, nil
}

type executionRun struct {
	in     ExecutionInput
	status v1alpha1.KubernetesExecutionStatus
}

var execution *activities.Execution

func (r *executionRun) run(ctx workflow.Context) {
	spec := r.in.Spec
	req := actions.Request{
		Action: spec.Action,
		Target: spec.Target,
		Token:  workflow.GetInfo(ctx).WorkflowStartTime.UTC().Format(time.RFC3339),
	}
	if spec.Parameters != nil {
		req.Params = *spec.Parameters
	}
	vr := r.status.ValidationResults
	quick := workflow.WithActivityOptions(ctx, quickOptions)

	r.setPhase(ctx, v1alpha1.PhaseValidating, "Validating", "checking parameters")
	err := workflow.ExecuteActivity(quick, execution.CheckSpec, spec, req).Get(ctx, nil)
	vr.ParameterValidation = boolPtr(err == nil)
	if err != nil {
		r.fail(ctx, err, activities.ReasonInvalidParameters)
		return
	}

	r.setPhase(ctx, v1alpha1.PhaseValidating, "Validating", "reading the target as "+actions.ServiceAccountName(spec.Action))
	var before actions.Plan
	err = workflow.ExecuteActivity(quick, execution.InspectTarget, req).Get(ctx, &before)
	if reasonOf(err, "") == activities.ReasonNotFound || err == nil {
		vr.ResourceExists = boolPtr(err == nil)
	}
	if err != nil {
		r.fail(ctx, err, activities.ReasonNotFound)
		return
	}

	if spec.DryRun {
		r.setPhase(ctx, v1alpha1.PhaseValidating, "Validating", "server-side dry-run")
		var dry v1alpha1.DryRunResults
		if err := workflow.ExecuteActivity(quick, execution.DryRun, req).Get(ctx, &dry); err != nil {
			vr.DryRunResults = &v1alpha1.DryRunResults{Performed: true, Warnings: []string{err.Error()}}
			r.fail(ctx, err, activities.ReasonDryRunFailed)
			return
		}
		vr.DryRunResults = &dry
	}

	r.setPhase(ctx, v1alpha1.PhaseExecuting, "Executing", actions.Impact(before.Change))
	var done activities.ExecuteResult
	start := workflow.Now(ctx)
	err = workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, executeOptions(spec)), execution.ExecuteInline, req).Get(ctx, &done)
	end := workflow.Now(ctx)
	affected := before.Change
	if before.NoOp {
		affected.Action = "unchanged"
	}
	r.status.ExecutionResults = &v1alpha1.ExecutionResults{
		StartTime:         &metav1.Time{Time: start},
		EndTime:           &metav1.Time{Time: end},
		Duration:          end.Sub(start).String(),
		ResourcesAffected: []v1alpha1.ResourceChange{affected},
		RetriesAttempted:  done.Retries,
	}
	if err != nil {
		r.fail(ctx, err, activities.ReasonExecutionFailed)
		return
	}

	r.status.RollbackInformation = &before.Rollback
	window := defaultRollbackWindow
	if spec.RollbackWindow != nil {
		window = spec.RollbackWindow.Duration
	}
	if !before.Rollback.Available || window <= 0 {
		r.setPhase(ctx, v1alpha1.PhaseCompleted, ReasonSucceeded, actions.Impact(affected))
		return
	}
	r.setPhase(ctx, v1alpha1.PhaseRollbackReady, ReasonRollbackAvailable,
		"rollback to "+before.Change.Before+" available for "+window.String()+" through the rollback signal")
	r.awaitRollback(ctx, req, window)
}

// awaitRollback keeps the run open for the rollback window; a rollback signal
// runs the captured inverse action, the window's end completes the run.
func (r *executionRun) awaitRollback(ctx workflow.Context, req actions.Request, window time.Duration) {
	var rb RollbackRequest
	signalled := false
	timerCtx, cancelTimer := workflow.WithCancel(ctx)
	sel := workflow.NewSelector(ctx)
	sel.AddFuture(workflow.NewTimer(timerCtx, window), func(workflow.Future) {})
	sel.AddReceive(workflow.GetSignalChannel(ctx, SignalRollback), func(c workflow.ReceiveChannel, _ bool) {
		c.Receive(ctx, &rb)
		signalled = true
	})
	sel.Select(ctx)
	cancelTimer()
	if ctx.Err() != nil {
		r.setPhase(ctx, v1alpha1.PhaseCompleted, ReasonCanceled, "run canceled during the rollback window; rollback information kept")
		return
	}
	if !signalled {
		r.setPhase(ctx, v1alpha1.PhaseCompleted, ReasonSucceeded, "rollback window closed")
		return
	}

	info := r.status.RollbackInformation
	back := actions.Request{Action: info.RollbackAction, Target: req.Target, Token: req.Token}
	if info.RollbackParameters != nil {
		back.Params = *info.RollbackParameters
	}
	workflow.GetLogger(ctx).Info("rollback requested", "requester", rb.Requester, "reason", rb.Reason)
	r.setPhase(ctx, v1alpha1.PhaseExecuting, "RollingBack", "rolling back as requested by "+orUnknown(rb.Requester))
	var done activities.ExecuteResult
	err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, executeOptions(r.in.Spec)), execution.ExecuteInline, back).Get(ctx, &done)
	if err != nil {
		r.setPhase(ctx, v1alpha1.PhaseFailed, ReasonRollbackFailed, err.Error())
		return
	}
	change := done.Plan.Change
	change.Action = "rolled back"
	r.status.ExecutionResults.ResourcesAffected = append(r.status.ExecutionResults.ResourcesAffected, change)
	r.setPhase(ctx, v1alpha1.PhaseCompleted, ReasonRolledBack, actions.Impact(change))
}

func (r *executionRun) setPhase(ctx workflow.Context, phase v1alpha1.Phase, reason, message string) {
	changed := r.status.Phase != phase
	r.status.Phase, r.status.Reason, r.status.Message = phase, reason, message
	if !changed {
		return
	}
	r.status.PhaseTransitions = append(r.status.PhaseTransitions, v1alpha1.PhaseTransition{
		Phase: phase, Reason: reason, Message: message, Time: metav1.NewTime(workflow.Now(ctx)),
	})
	workflow.GetLogger(ctx).Info("phase", "phase", phase, "reason", reason, "message", message)
	if err := workflow.UpsertTypedSearchAttributes(ctx, AttrPhase.ValueSet(string(phase))); err != nil {
		workflow.GetLogger(ctx).Warn("upsert RemedyPhase", "error", err)
	}
}

func (r *executionRun) fail(ctx workflow.Context, err error, fallback string) {
	if ctx.Err() != nil {
		r.setPhase(ctx, v1alpha1.PhaseFailed, ReasonCanceled, "run canceled")
		return
	}
	r.setPhase(ctx, v1alpha1.PhaseFailed, reasonOf(err, fallback), messageOf(err))
}

// reasonOf names a failure: the ApplicationError type of a permanent failure,
// ExecutionTimeout for timeouts, fallback otherwise.
func reasonOf(err error, fallback string) string {
	var app *temporal.ApplicationError
	switch {
	case err == nil:
		return ""
	case errors.As(err, &app) && app.Type() != "":
		return app.Type()
	case temporal.IsTimeoutError(err):
		return activities.ReasonExecutionTimeout
	default:
		return fallback
	}
}

// messageOf returns the innermost message: the API server's words, not the SDK's wrapping.
func messageOf(err error) string {
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		return app.Message()
	}
	return err.Error()
}

func boolPtr(v bool) *bool { return &v }

func orUnknown(s string) string {
	if s == "" {
		return "an unnamed requester"
	}
	return s
}
