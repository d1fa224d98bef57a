package alerts

import (
	"context"
	"errors"
	"fmt"
	"slices"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workflowservice "go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"

	"github.com/remedy-dev/remedy/activities/fail"
	"github.com/remedy-dev/remedy/api/v1alpha1"
)

// GuardReader describes and queries a namespace's guard workflow;
// client.Client is one.
type GuardReader interface {
	DescribeWorkflowExecution(ctx context.Context, workflowID, runID string) (*workflowservice.DescribeWorkflowExecutionResponse, error)
	QueryWorkflow(ctx context.Context, workflowID, runID string, queryType string, args ...any) (converter.EncodedValue, error)
}

// guardQuery is the guard's status query (workflows.QueryStatus).
const guardQuery = "status"

// Permits is a's permit check as a function, for the gate's RunReads to
// bind an alert run's reads with (worker.go); a method it would not be, so
// that it registers no activity.
func Permits(a *Alerts) func(ctx context.Context, namespace string) error { return a.holdsPermit }

// holdsPermit requires the calling alert run to hold a permit of its
// namespace's guard. An alert run has no object of its own to record its
// run ID on; the guard records it: the run asks for its permit with its own
// run ID (GuardAcquire.RunID), and the guard's running permits name the
// workflow ID and run ID of each holder. So the caller, as Temporal's server
// names it (activity.GetInfo, never the input), must be a holder: a workflow
// started under an alert's workflow ID, or another run's replayed payload,
// holds no permit and writes nothing. The guard is believed only when it is
// the AlertGuardWorkflow on Remedy's task queue, so Remedy's worker answers
// the query; what it holds came from acquire signals, which only Remedy's
// sealed payloads can carry. The guard continues as new, so it is not bound
// by run ID: its permits are carried across runs, and whichever run of its ID
// is open answers. No run ID from an input (a first run ID included) is
// believed: an input can be copied, the server's name for the caller cannot.
func (a *Alerts) holdsPermit(ctx context.Context, namespace string) error {
	caller := activity.GetInfo(ctx).WorkflowExecution
	if a.Guard == nil {
		return fail.Permanent(v1alpha1.ReasonSubjectMismatch, errors.New("the worker cannot read the alert guard, so no alert run's permit can be verified"))
	}
	id := v1alpha1.AlertGuardWorkflowID(namespace)
	d, err := a.Guard.DescribeWorkflowExecution(ctx, id, "")
	var gone *serviceerror.NotFound
	if errors.As(err, &gone) {
		return fail.Permanent(v1alpha1.ReasonSubjectMismatch, fmt.Errorf("run %s of %s holds no permit: namespace %s has no guard", caller.RunID, caller.ID, namespace))
	}
	if err != nil {
		return fmt.Errorf("describe guard %s: %w", id, err)
	}
	info := d.GetWorkflowExecutionInfo()
	if info.GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING || info.GetType().GetName() != guardWorkflowType ||
		d.GetExecutionConfig().GetTaskQueue().GetName() != a.TaskQueue {
		return fail.Permanent(v1alpha1.ReasonSubjectMismatch, fmt.Errorf("run %s of %s holds no permit: guard %s is not Remedy's running guard", caller.RunID, caller.ID, id))
	}
	v, err := a.Guard.QueryWorkflow(ctx, id, info.GetExecution().GetRunId(), guardQuery)
	if err != nil {
		return fmt.Errorf("query guard %s: %w", id, err)
	}
	var state struct {
		Running []GuardAcquire `json:"running"`
	}
	if err := v.Get(&state); err != nil {
		return fmt.Errorf("decode guard %s: %w", id, err)
	}
	if !slices.ContainsFunc(state.Running, func(h GuardAcquire) bool { return h.AlertID == caller.ID && h.RunID == caller.RunID }) {
		return fail.Permanent(v1alpha1.ReasonSubjectMismatch, fmt.Errorf("run %s of %s holds no permit of guard %s: only a run the guard let through acts for its alert", caller.RunID, caller.ID, id))
	}
	return nil
}
