package workflows

import (
	"fmt"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/remedy-dev/remedy/activities"
	"github.com/remedy-dev/remedy/api/v1alpha1"
)

// Reasons of a RemediationRequest.
const (
	ReasonStepFailed = "StepFailed"
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

var remediation *activities.Remediation

type stepRun struct {
	workflowID string
	future     workflow.ChildWorkflowFuture
	canRollBck bool
}

// RemediationWorkflow runs the steps in order, each as a child
// ExecutionWorkflow of a KubernetesExecution owned by the request. It stops at
// the first failure; when a step's required postcondition fails and the
// policy allows, it rolls back every step that changed something, newest first.
func RemediationWorkflow(ctx workflow.Context, in RemediationInput) (RemediationResult, error) {
	st := v1alpha1.RemediationRequestStatus{Phase: v1alpha1.PhasePending}
	for _, s := range in.Spec.Steps {
		st.Steps = append(st.Steps, v1alpha1.StepStatus{Name: s.Name})
	}
	if err := workflow.SetQueryHandler(ctx, QueryStatus, func() (v1alpha1.RemediationRequestStatus, error) { return st, nil }); err != nil {
		return RemediationResult{}, err
	}
	// The run writes .status at each phase change and each step's progress.
	st.WorkflowID = workflow.GetInfo(ctx).WorkflowExecution.ID
	push := func() {
		st.Sequence++
		pushStatus(ctx, statuses.PushRemediationStatus, activities.RemediationStatusPush{Namespace: in.Namespace, Name: in.Name, UID: in.UID, Status: st})
	}
	setPhase := func(p v1alpha1.Phase, reason, msg string) {
		st.Phase, st.Reason, st.Message = p, reason, capMessage(msg)
		_ = workflow.UpsertTypedSearchAttributes(ctx, AttrPhase.ValueSet(string(p)))
		push()
	}
	ready := workflow.GetSignalChannel(ctx, SignalStepReady)
	quick := workflow.WithActivityOptions(ctx, quickOptions)
	var runs []stepRun

	ref := activities.SubjectRef{Namespace: in.Namespace, Name: in.Name, UID: in.UID}
	if err := workflow.ExecuteActivity(quick, subjects.VerifyRemediation, ref, in.Spec).Get(ctx, nil); err != nil {
		setPhase(v1alpha1.PhaseFailed, reasonOf(err, activities.ReasonSubjectMismatch), messageOf(err))
		return closeRun(st.Phase, st.Reason, st.Message, RemediationResult{Status: st})
	}
	setPhase(v1alpha1.PhaseExecuting, "Executing", fmt.Sprintf("running %d steps", len(in.Spec.Steps)))
	failure, postFailed := "", false
	for i, step := range in.Spec.Steps {
		st.CurrentStep = int32(i + 1)
		var ref activities.StepRef
		err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, stepCreateOptions), remediation.CreateStepExecution, activities.StepInput{
			Namespace: in.Namespace, Request: in.Name, RequestUID: in.UID, Step: step, Requester: in.Spec.Requester,
		}).Get(ctx, &ref)
		if err != nil {
			failure = "step " + step.Name + ": " + messageOf(err)
			break
		}
		st.Steps[i].ExecutionRef = &v1alpha1.LocalRef{Name: ref.Name}
		push()
		id := ExecutionWorkflowID(in.Namespace, ref.Name, ref.UID)
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
		spec.RemediationRequestRef = &v1alpha1.LocalRef{Name: in.Name}
		spec.Requester = in.Spec.Requester
		fut := workflow.ExecuteChildWorkflow(cctx, ExecutionWorkflow, ExecutionInput{Namespace: in.Namespace, Name: ref.Name, UID: ref.UID, Spec: spec})
		runs = append(runs, stepRun{workflowID: id, future: fut})

		// The step either ends (it failed before changing anything) or
		// reports that its action is done and waits for our decision.
		var report StepReport
		var result ExecutionResult
		ended := false
		sel := workflow.NewSelector(ctx)
		sel.AddFuture(fut, func(f workflow.Future) { ended = true; _ = FinalResult(f.Get(ctx, &result), &result) })
		sel.AddReceive(ready, func(c workflow.ReceiveChannel, _ bool) { c.Receive(ctx, &report) })
		sel.Select(ctx)
		if ended {
			st.Steps[i].Phase, st.Steps[i].Reason = result.Status.Phase, result.Status.Reason
			failure = "step " + step.Name + " failed: " + result.Status.Reason + ": " + result.Status.Message
			runs = runs[:len(runs)-1]
			break
		}
		st.Steps[i].Phase, st.Steps[i].Reason = report.Status.Phase, report.Status.Reason
		runs[len(runs)-1].canRollBck = report.Status.RollbackInformation != nil && report.Status.RollbackInformation.Available
		push()
		if report.Status.Reason == ReasonPostConditionFailed {
			failure, postFailed = "step "+step.Name+": "+report.PostFailure, true
			break
		}
	}

	rollBack := postFailed && in.Spec.RollbackPolicy != v1alpha1.RollbackNever
	signal := SignalFinalize
	if rollBack {
		signal = SignalRollback
		setPhase(v1alpha1.PhaseExecuting, ReasonRollingBack, failure+"; rolling back completed steps in reverse order")
	}
	// Steps are released newest first, one at a time, so rollbacks apply in reverse order.
	for i := len(runs) - 1; i >= 0; i-- {
		if err := workflow.SignalExternalWorkflow(ctx, runs[i].workflowID, "", signal, RollbackRequest{Requester: "RemediationRequest/" + in.Name, Reason: failure}).Get(ctx, nil); err != nil {
			return RemediationResult{Status: st}, fmt.Errorf("signal step %s: %w", runs[i].workflowID, err)
		}
		var result ExecutionResult
		if err := FinalResult(runs[i].future.Get(ctx, &result), &result); err != nil {
			return RemediationResult{Status: st}, fmt.Errorf("await step %s: %w", runs[i].workflowID, err)
		}
		st.Steps[i].Phase, st.Steps[i].Reason = result.Status.Phase, result.Status.Reason
		st.Steps[i].RolledBack = result.Status.Reason == ReasonRolledBack
		push()
	}

	switch {
	case failure == "":
		setPhase(v1alpha1.PhaseCompleted, ReasonSucceeded, fmt.Sprintf("%d steps completed", len(in.Spec.Steps)))
	case rollBack:
		setPhase(v1alpha1.PhaseFailed, ReasonRolledBack, failure+"; completed steps rolled back")
	case postFailed:
		setPhase(v1alpha1.PhaseFailed, ReasonPostConditionFailed, failure+"; rollbackPolicy Never: nothing rolled back")
	default:
		setPhase(v1alpha1.PhaseFailed, ReasonStepFailed, failure)
	}
	return closeRun(st.Phase, st.Reason, st.Message, RemediationResult{Status: st})
}
