// Package runs finds the open run of a deterministic workflow ID, for the
// parts that bind what a run may do to the run itself: the operator's
// run-ID backfill and the worker's checks of reload, drift and alert runs.
package runs

import (
	"context"
	"errors"
	"fmt"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workflowservice "go.temporal.io/api/workflowservice/v1"
)

// Describer describes a workflow's runs; client.Client is one.
type Describer interface {
	DescribeWorkflowExecution(ctx context.Context, workflowID, runID string) (*workflowservice.DescribeWorkflowExecutionResponse, error)
}

// Open returns the run ID of id's open run when it is a workflowType run on
// taskQueue and, when parent is set, a child of that run; "" when there is
// no such run. Only one run of an ID can be open, and Remedy's workflow
// type on Remedy's task queue is run by Remedy's worker only, with Remedy's
// code: a run of another type, or on another queue (a rogue worker's), is
// no run of Remedy's, whatever its ID.
func Open(ctx context.Context, d Describer, id, workflowType, taskQueue string, parent *commonpb.WorkflowExecution) (string, error) {
	resp, err := d.DescribeWorkflowExecution(ctx, id, "")
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("describe workflow %s: %w", id, err)
	}
	info := resp.GetWorkflowExecutionInfo()
	switch {
	case info.GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING,
		info.GetType().GetName() != workflowType,
		resp.GetExecutionConfig().GetTaskQueue().GetName() != taskQueue:
		return "", nil
	case parent != nil && (info.GetParentExecution().GetWorkflowId() != parent.GetWorkflowId() || info.GetParentExecution().GetRunId() != parent.GetRunId()):
		return "", nil
	}
	return info.GetExecution().GetRunId(), nil
}
