package workflows

import (
	"errors"
	"slices"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/remedy-dev/remedy/activities/execution"
	"github.com/remedy-dev/remedy/activities/fail"
	"github.com/remedy-dev/remedy/activities/gate"
	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/actions"
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
// that the run writes into .status at each phase change. A run that ends
// Failed closes its workflow failed, with its reason as the error type
// (closeRun), so the Web UI shows it.
func ExecutionWorkflow(ctx workflow.Context, in ExecutionInput) (ExecutionResult, error) {
	r := &executionRun{in: in, status: v1alpha1.KubernetesExecutionStatus{
		Phase:             v1alpha1.PhasePending,
		Requester:         requesterName(in.Spec.Requester),
		ValidationResults: &v1alpha1.ValidationResults{},
	}}
	if err := workflow.SetQueryHandler(ctx, QueryStatus, func() (v1alpha1.KubernetesExecutionStatus, error) {
		return r.status, nil
	}); err != nil {
		return ExecutionResult{}, err
	}
	r.run(ctx)
	return closeRun(r.status.Phase, r.status.Reason, r.status.Message, ExecutionResult{Status: r.status})
}

type executionRun struct {
	in     ExecutionInput
	status v1alpha1.KubernetesExecutionStatus
	// postFailure names the required postcondition that did not hold.
	postFailure string
	// approval is created on the first ask.
	approval *approvalGate
	// early holds the checks validate started ahead of their turn.
	early prefetch
	// redacts: the run publishes the target's values only as reads allows
	// (redactChange); inverse and rollbackKey are then the captured
	// rollback's real parameters and the key of their digest in status.
	redacts     bool
	reads       gate.Readable
	inverse     *v1alpha1.RollbackInformation
	rollbackKey []byte
}

var (
	executionActs *execution.Execution
	validation    *gate.Validation
	jobs          *execution.Jobs
)

// run validates, writes, verifies and then holds the rollback window.
func (r *executionRun) run(ctx workflow.Context) {
	req := r.request(ctx)
	r.status.WorkflowID = workflow.GetInfo(ctx).WorkflowExecution.ID
	if !r.verifySubject(ctx, req) {
		return
	}

	before, ok := r.validate(ctx, req)
	r.early = prefetch{}
	if !ok {
		return
	}

	r.setPhase(ctx, v1alpha1.PhaseExecuting, "Executing", r.impact(before.Change))
	var done execution.ExecuteResult
	start := workflow.Now(ctx)
	err := r.execute(ctx, req, &done)
	end := workflow.Now(ctx)
	if err == nil {
		// The write re-read the target: after an approval wait, only its
		// before-image knows what changed in between (an HPA's scaling).
		before = done.Plan
	}
	affected := before.Change
	if before.NoOp {
		affected.Action = "unchanged"
	}
	r.recordExecution(start, end, affected, done)
	if err != nil {
		r.failWrite(ctx, err, v1alpha1.ReasonExecutionFailed)
		return
	}
	if before.NoOp {
		// Someone else made the change while the run waited for approval.
		r.noChange(ctx, before.Change)
		return
	}

	r.captureRollback(ctx, before.Rollback)
	postFailed, ok := r.postconditions(ctx)
	if !ok {
		return
	}
	r.afterWrite(ctx, req, before, affected, postFailed)
}

// request is the action the run asks for. Its token is the run's start,
// the same on every replay.
func (r *executionRun) request(ctx workflow.Context) actions.Request {
	spec := r.in.Spec
	req := actions.Request{
		Action: spec.Action,
		Target: spec.Target,
		Token:  workflow.GetInfo(ctx).WorkflowStartTime.UTC().Format(time.RFC3339),
		// Requester feeds the safety policy's input.
		Requester: spec.Requester,
	}
	if spec.Parameters != nil {
		req.Params = *spec.Parameters
	}
	return req
}

// recordExecution writes what the write did into the status.
func (r *executionRun) recordExecution(start, end time.Time, affected v1alpha1.ResourceChange, done execution.ExecuteResult) {
	r.status.ExecutionResults = &v1alpha1.ExecutionResults{
		StartTime:         &metav1.Time{Time: start},
		EndTime:           &metav1.Time{Time: end},
		Duration:          end.Sub(start).String(),
		ResourcesAffected: []v1alpha1.ResourceChange{r.change(affected)},
		RetriesAttempted:  done.Retries,
		JobName:           done.JobName,
		// The job's output names the values it wrote.
		Logs: r.readable().Value(done.Logs),
	}
}

// postconditions evaluates the spec's postconditions, if any: it reports
// whether a required one failed (r.postFailure names it), or false when the
// run has failed.
func (r *executionRun) postconditions(ctx workflow.Context) (postFailed, ok bool) {
	conds := r.in.Spec.PostConditions
	if len(conds) == 0 {
		return false, true
	}
	r.setPhase(ctx, v1alpha1.PhaseVerifying, "Verifying", "evaluating postconditions")
	failed, err := r.conditions(ctx, conds, &r.status.ValidationResults.PostConditionResults)
	if err != nil {
		r.fail(ctx, err, v1alpha1.ReasonInvalidParameters)
		return false, false
	}
	if failed != "" {
		r.postFailure = "required postcondition " + failed + " failed"
	}
	return failed != "", true
}

// afterWrite ends the run, or holds it for its parent or for the rollback
// window while the change can be undone.
func (r *executionRun) afterWrite(ctx workflow.Context, req actions.Request, before actions.Plan, affected v1alpha1.ResourceChange, postFailed bool) {
	// A step whose change can be undone waits for its RemediationRequest to
	// roll it back or finalize it; one with no inverse has nothing to wait for.
	if workflow.GetInfo(ctx).ParentWorkflowExecution != nil && before.Rollback.Available {
		r.awaitParent(ctx, req)
		return
	}
	window := r.in.Spec.RollbackWindow.Or(defaultRollbackWindow)
	if !before.Rollback.Available || window <= 0 {
		r.finish(ctx, r.impact(affected))
		return
	}
	reason, msg := v1alpha1.ReasonRollbackAvailable, "rollback to "+r.readable().Value(before.Change.Before)+" available for "+window.String()+" through the rollback signal"
	if postFailed {
		// Where the person looks: the change is live, and how to undo it.
		reason, msg = v1alpha1.ReasonPostConditionFailed, r.postFailure+"; the change stays in place unless rolled back to "+
			r.readable().Value(before.Change.Before)+" within "+window.String()+": kubectl remedy rollback "+r.in.Name+" -n "+r.in.Namespace
	}
	r.setPhase(ctx, v1alpha1.PhaseRollbackReady, reason, msg)
	r.awaitRollback(ctx, req, window)
}

// finish ends a run that was not rolled back: Completed, or Failed when a
// required postcondition did not hold.
func (r *executionRun) finish(ctx workflow.Context, message string) {
	if r.postFailure != "" {
		r.setPhase(ctx, v1alpha1.PhaseFailed, v1alpha1.ReasonPostConditionFailed, r.postFailure+"; the change was kept ("+message+")")
		return
	}
	if w := r.warnings(); w != "" {
		message += "; warnings: " + w
	}
	r.setPhase(ctx, v1alpha1.PhaseCompleted, v1alpha1.ReasonSucceeded, message)
}

// noChange ends a run that found its target already in the desired state:
// nothing was written, so there is nothing to approve, verify or roll back.
func (r *executionRun) noChange(ctx workflow.Context, c v1alpha1.ResourceChange) {
	c = r.change(c)
	c.Action = "unchanged"
	if r.status.ExecutionResults == nil {
		r.status.ExecutionResults = &v1alpha1.ExecutionResults{ResourcesAffected: []v1alpha1.ResourceChange{c}}
	}
	r.status.RollbackInformation = &v1alpha1.RollbackInformation{Reason: "nothing was changed, so there is nothing to roll back"}
	r.setPhase(ctx, v1alpha1.PhaseCompleted, v1alpha1.ReasonNoChange, r.impact(c)+": the target is already in the desired state; nothing was written")
}

// execute runs the action with the executor the spec names.
func (r *executionRun) execute(ctx workflow.Context, req actions.Request, done *execution.ExecuteResult) error {
	spec := r.in.Spec
	if spec.Executor == v1alpha1.ExecutorJob {
		in := execution.JobInput{
			ExecutionNamespace: r.in.Namespace, ExecutionName: r.in.Name, ExecutionUID: r.in.UID,
			Request: req, Execution: spec, Timeout: executionTimeout(spec), MaxRetries: maxRetries(spec),
		}
		return workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, jobOptions(spec)), jobs.RunJob, in).Get(ctx, done)
	}
	return workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, executeOptions(spec)), executionActs.ExecuteInline, r.write(req)).Get(ctx, done)
}

// write asks for req as a write on the execution's behalf: the write gate
// re-reads the execution and its requester's grant right before it.
func (r *executionRun) write(req actions.Request) gate.Write {
	spec := r.in.Spec
	return gate.Write{
		Subject: gate.Subject{Kind: gate.SubjectExecution, Namespace: r.in.Namespace, Name: r.in.Name, UID: r.in.UID, Execution: &spec},
		Request: req,
		As:      actions.ServiceAccountName(req.Action),
	}
}

func (r *executionRun) setPhase(ctx workflow.Context, phase v1alpha1.Phase, reason, message string) {
	changed := r.status.Phase != phase
	message = capMessage(message)
	r.status.Phase, r.status.Reason, r.status.Message = phase, reason, message
	if !changed {
		return
	}
	r.status.PhaseTransitions = append(r.status.PhaseTransitions, v1alpha1.PhaseTransition{
		Phase: phase, Reason: reason, Message: message, Time: metav1.NewMicroTime(workflow.Now(ctx)),
	})
	workflow.GetLogger(ctx).Info("phase", "phase", phase, "reason", reason, "message", message)
	if err := workflow.UpsertTypedSearchAttributes(ctx, AttrPhase.ValueSet(string(phase))); err != nil {
		workflow.GetLogger(ctx).Warn("upsert RemedyPhase", "error", err)
	}
	r.push(ctx)
}

func (r *executionRun) fail(ctx workflow.Context, err error, fallback string) {
	if ctx.Err() != nil {
		r.setPhase(ctx, v1alpha1.PhaseFailed, v1alpha1.ReasonCanceled, "run canceled")
		return
	}
	r.setPhase(ctx, v1alpha1.PhaseFailed, reasonOf(err, fallback), messageOf(err))
}

// failWrite is fail for a dry-run or a write, whose message the API server
// wrote: it is published as the requester may read the target.
func (r *executionRun) failWrite(ctx workflow.Context, err error, fallback string) {
	if ctx.Err() != nil {
		r.fail(ctx, err, fallback)
		return
	}
	r.setPhase(ctx, v1alpha1.PhaseFailed, reasonOf(err, fallback), r.readable().Failure(err))
}

// reasonOf names a failure: the ApplicationError type of a permanent failure,
// ExecutionTimeout for timeouts, fallback otherwise. A retryable error that
// ran out of attempts carries its Go type name ("wrapError", "StatusError"),
// which is no reason.
func reasonOf(err error, fallback string) string {
	var app *temporal.ApplicationError
	switch {
	case err == nil:
		return ""
	case errors.As(err, &app) && app.Type() != "" && (app.NonRetryable() || slices.Contains(fail.NonRetryable, app.Type())):
		return app.Type()
	case temporal.IsTimeoutError(err):
		return v1alpha1.ReasonExecutionTimeout
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
