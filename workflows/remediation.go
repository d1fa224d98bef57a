package workflows

import (
	"fmt"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/remedy-dev/remedy/activities/execution"
	"github.com/remedy-dev/remedy/activities/gate"
	"github.com/remedy-dev/remedy/activities/status"
	"github.com/remedy-dev/remedy/api/v1alpha1"
)

// RemediationInput identifies the RemediationRequest and carries its spec.
type RemediationInput struct {
	Namespace string                          `json:"namespace"`
	Name      string                          `json:"name"`
	UID       string                          `json:"uid"`
	Spec      v1alpha1.RemediationRequestSpec `json:"spec"`
}

// RemediationResult is the final phase object.
type RemediationResult struct {
	Status v1alpha1.RemediationRequestStatus `json:"status"`
}

// StepReport is a step's status when it finished its action.
type StepReport struct {
	Execution string                             `json:"execution"`
	Status    v1alpha1.KubernetesExecutionStatus `json:"status"`
	// PostFailure names the required postcondition that did not hold.
	PostFailure string `json:"postFailure,omitempty"`
}

var remediation *execution.Remediation

// remediationRun is one RemediationRequest's saga: the phase object and the
// steps started so far.
type remediationRun struct {
	in    RemediationInput
	st    v1alpha1.RemediationRequestStatus
	steps []*stepRun
}

// stepRun is one started step's child workflow.
type stepRun struct {
	index      int
	workflowID string
	future     workflow.ChildWorkflowFuture
	// held: the step's change is done and its run waits, rollback available,
	// for the request to roll it back or finalize it.
	held bool
	// final is the step's status once its run has ended.
	final *v1alpha1.KubernetesExecutionStatus
}

// RemediationWorkflow runs a RemediationRequest as a saga. Every step is
// checked before the first write; then the steps run in order, each as a
// child ExecutionWorkflow of a KubernetesExecution owned by the request. A
// step whose change can be undone keeps its run open, rollback available,
// until the request ends. When a step fails, the rollback policy decides:
// the completed steps are rolled back newest first, or finalized as they are.
func RemediationWorkflow(ctx workflow.Context, in RemediationInput) (RemediationResult, error) {
	r := &remediationRun{in: in, st: v1alpha1.RemediationRequestStatus{Phase: v1alpha1.PhasePending}}
	for _, s := range in.Spec.Steps {
		r.st.Steps = append(r.st.Steps, v1alpha1.StepStatus{Name: s.Name})
	}
	if err := workflow.SetQueryHandler(ctx, QueryStatus, func() (v1alpha1.RemediationRequestStatus, error) { return r.st, nil }); err != nil {
		return RemediationResult{}, err
	}
	r.st.WorkflowID = workflow.GetInfo(ctx).WorkflowExecution.ID

	ref := gate.SubjectRef{Namespace: in.Namespace, Name: in.Name, UID: in.UID}
	quick := workflow.WithActivityOptions(ctx, quickOptions)
	if err := workflow.ExecuteActivity(quick, subjects.VerifyRemediation, ref, in.Spec).Get(ctx, nil); err != nil {
		r.setPhase(ctx, v1alpha1.PhaseFailed, reasonOf(err, v1alpha1.ReasonSubjectMismatch), messageOf(err))
		return r.close()
	}
	if !r.checkSteps(ctx) {
		return r.close()
	}
	r.setPhase(ctx, v1alpha1.PhaseExecuting, "Executing", fmt.Sprintf("running %d steps", len(in.Spec.Steps)))
	failure, postFailed := r.runSteps(ctx)
	if err := r.settle(ctx, failure, postFailed); err != nil {
		return RemediationResult{Status: r.st}, err
	}
	return r.close()
}

// close ends the workflow as the request's final phase says (closeRun).
func (r *remediationRun) close() (RemediationResult, error) {
	return closeRun(r.st.Phase, r.st.Reason, r.st.Message, RemediationResult{Status: r.st})
}

// push writes .status: the run does at each phase change and each step's progress.
func (r *remediationRun) push(ctx workflow.Context) {
	r.st.Sequence++
	pushStatus(ctx, statuses.PushRemediationStatus, status.RemediationStatusPush{Namespace: r.in.Namespace, Name: r.in.Name, UID: r.in.UID, Status: r.st})
}

func (r *remediationRun) setPhase(ctx workflow.Context, p v1alpha1.Phase, reason, msg string) {
	r.st.Phase, r.st.Reason, r.st.Message = p, reason, capMessage(msg)
	workflow.GetLogger(ctx).Info("phase", "phase", p, "reason", reason, "message", r.st.Message)
	_ = workflow.UpsertTypedSearchAttributes(ctx, AttrPhase.ValueSet(string(p)))
	r.push(ctx)
}

// record copies a step's phase, reason and message into the request's status.
func (r *remediationRun) record(i int, s v1alpha1.KubernetesExecutionStatus) {
	r.st.Steps[i].Phase, r.st.Steps[i].Reason, r.st.Steps[i].Message = s.Phase, s.Reason, capMessage(s.Message)
}

// runSteps runs the steps in order until one fails; it returns the failure
// and whether it was a required postcondition.
func (r *remediationRun) runSteps(ctx workflow.Context) (failure string, postFailed bool) {
	ready := workflow.GetSignalChannel(ctx, SignalStepReady)
	for i, step := range r.in.Spec.Steps {
		r.st.CurrentStep = int32(i + 1)
		var ref execution.StepRef
		err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, stepCreateOptions), remediation.CreateStepExecution, execution.StepInput{
			Namespace: r.in.Namespace, Request: r.in.Name, RequestUID: r.in.UID, Step: step, Requester: r.in.Spec.Requester,
		}).Get(ctx, &ref)
		if err != nil {
			return "step " + step.Name + ": " + messageOf(err), false
		}
		r.st.Steps[i].ExecutionRef = &v1alpha1.LocalRef{Name: ref.Name}
		r.push(ctx)
		run := r.startStep(ctx, i, ref)

		// The step either ends (it failed, changed nothing, or has nothing
		// to undo) or reports that its change is done and waits for our decision.
		var report StepReport
		var endErr error
		sel := workflow.NewSelector(ctx)
		sel.AddFuture(run.future, func(f workflow.Future) {
			var result ExecutionResult
			if endErr = FinalResult(f.Get(ctx, &result), &result); endErr != nil {
				result.Status.Phase, result.Status.Reason, result.Status.Message = v1alpha1.PhaseFailed, v1alpha1.ReasonExecutionFailed, messageOf(endErr)
			}
			run.final = &result.Status
		})
		sel.AddReceive(ready, func(c workflow.ReceiveChannel, _ bool) { c.Receive(ctx, &report) })
		sel.Select(ctx)
		if s := run.final; s != nil {
			r.record(i, *s)
			r.push(ctx)
			switch {
			case endErr != nil:
				return "step " + step.Name + " failed: " + messageOf(endErr), false
			case s.Phase != v1alpha1.PhaseCompleted:
				return "step " + step.Name + " failed: " + s.Reason + ": " + s.Message, s.Reason == v1alpha1.ReasonPostConditionFailed
			}
			continue
		}
		run.held = true
		r.record(i, report.Status)
		r.push(ctx)
		if report.Status.Reason == v1alpha1.ReasonPostConditionFailed {
			return "step " + step.Name + ": " + report.PostFailure, true
		}
	}
	return "", false
}

// startStep starts the step's execution workflow as a child of this one.
func (r *remediationRun) startStep(ctx workflow.Context, i int, ref execution.StepRef) *stepRun {
	step := r.in.Spec.Steps[i]
	id := v1alpha1.ExecutionWorkflowID(r.in.Namespace, ref.Name, ref.UID)
	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
		WorkflowID:            id,
		TaskQueue:             TaskQueue,
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		ParentClosePolicy:     enumspb.PARENT_CLOSE_POLICY_REQUEST_CANCEL,
		TypedSearchAttributes: temporal.NewSearchAttributes(
			AttrKind.ValueSet("KubernetesExecution"),
			AttrTarget.ValueSet(step.Execution.Target.String()),
			AttrPhase.ValueSet(string(v1alpha1.PhasePending)),
		),
	})
	spec := step.Execution
	spec.RemediationRequestRef = &v1alpha1.LocalRef{Name: r.in.Name}
	spec.Requester = r.in.Spec.Requester
	run := &stepRun{index: i, workflowID: id,
		future: workflow.ExecuteChildWorkflow(cctx, ExecutionWorkflow, ExecutionInput{Namespace: r.in.Namespace, Name: ref.Name, UID: ref.UID, Spec: spec})}
	r.steps = append(r.steps, run)
	return run
}
