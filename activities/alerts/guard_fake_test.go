package alerts

import (
	"context"
	"encoding/json"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	workflowservice "go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/converter"

	"github.com/remedy-dev/remedy/activities/internal/activitytest"
)

// guardHolding is a running guard whose permits are held by the given alert
// workflows, each in the test environment's run.
type guardHolding []string

func (g guardHolding) DescribeWorkflowExecution(_ context.Context, id, _ string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	return &workflowservice.DescribeWorkflowExecutionResponse{
		ExecutionConfig: &workflowpb.WorkflowExecutionConfig{TaskQueue: &taskqueuepb.TaskQueue{Name: activitytest.TestTaskQueue}},
		WorkflowExecutionInfo: &workflowpb.WorkflowExecutionInfo{Execution: &commonpb.WorkflowExecution{WorkflowId: id, RunId: "guard-run"},
			Type: &commonpb.WorkflowType{Name: guardWorkflowType}, Status: enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING},
	}, nil
}

func (g guardHolding) QueryWorkflow(context.Context, string, string, string, ...any) (converter.EncodedValue, error) {
	running := make([]GuardAcquire, len(g))
	for i, id := range g {
		running[i] = GuardAcquire{AlertID: id, RunID: activitytest.TestRunID}
	}
	b, err := json.Marshal(map[string]any{"running": running})
	return activitytest.JSONValue(b), err
}
