package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/remedy-dev/remedy/activities/status"
)

var statuses *status.Statuses

// PushOptions: a status write is two short API calls, so it runs as a local
// activity in the workflow task that changed the phase (one marker event, no
// round trip through the task queue). Retries ride out a conflict or a briefly
// unavailable API server; past the bound the next phase change writes again.
var PushOptions = workflow.LocalActivityOptions{
	ScheduleToCloseTimeout: time.Minute,
	StartToCloseTimeout:    10 * time.Second,
	RetryPolicy: &temporal.RetryPolicy{
		InitialInterval:    200 * time.Millisecond,
		BackoffCoefficient: 2,
		MaximumInterval:    5 * time.Second,
	},
}

// pushStatus runs the status writer and waits for it, so writes leave in
// phase order. A canceled run still writes its last phase.
func pushStatus(ctx workflow.Context, writer, in any) {
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	dctx = workflow.WithLocalActivityOptions(dctx, PushOptions)
	if err := workflow.ExecuteLocalActivity(dctx, writer, in).Get(dctx, nil); err != nil {
		workflow.GetLogger(ctx).Warn("status push failed; the next phase change writes again", "error", err)
	}
}

// push writes the run's status with the next sequence number.
func (r *executionRun) push(ctx workflow.Context) {
	r.status.Sequence++
	pushStatus(ctx, statuses.PushExecutionStatus, status.ExecutionStatusPush{
		Namespace: r.in.Namespace, Name: r.in.Name, UID: r.in.UID, Action: r.in.Spec.Action, Status: r.status,
	})
}
