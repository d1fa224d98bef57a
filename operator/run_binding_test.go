package operator

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/mocks"

	"github.com/remedy-dev/remedy/workflows"
)

// TestOpenRunOfRecordsOnlyRemedysOpenRun: the run the operator backfills is
// the open run of Remedy's workflow type on Remedy's task queue, and for a
// step the child of its request's recorded run; nothing else.
func TestOpenRunOfRecordsOnlyRemedysOpenRun(t *testing.T) {
	parent := &commonpb.WorkflowExecution{WorkflowId: "rr/shop/fix/u", RunId: "rr-run"}
	describe := func(status enums.WorkflowExecutionStatus, typ, queue string, parentOf *commonpb.WorkflowExecution) *workflowservice.DescribeWorkflowExecutionResponse {
		return &workflowservice.DescribeWorkflowExecutionResponse{
			WorkflowExecutionInfo: &workflowpb.WorkflowExecutionInfo{
				Execution: &commonpb.WorkflowExecution{WorkflowId: "kexec/shop/x/u", RunId: "the-run"},
				Type:      &commonpb.WorkflowType{Name: typ}, Status: status, ParentExecution: parentOf,
			},
			ExecutionConfig: &workflowpb.WorkflowExecutionConfig{TaskQueue: &taskqueuepb.TaskQueue{Name: queue}},
		}
	}
	running := enums.WORKFLOW_EXECUTION_STATUS_RUNNING
	for _, tc := range []struct {
		name   string
		resp   *workflowservice.DescribeWorkflowExecutionResponse
		err    error
		parent *commonpb.WorkflowExecution
		want   string
	}{
		{"Remedy's open run", describe(running, "ExecutionWorkflow", workflows.TaskQueue, nil), nil, nil, "the-run"},
		{"no run yet", nil, serviceerror.NewNotFound("none"), nil, ""},
		{"a closed run", describe(enums.WORKFLOW_EXECUTION_STATUS_COMPLETED, "ExecutionWorkflow", workflows.TaskQueue, nil), nil, nil, ""},
		{"another workflow type", describe(running, "rogue", workflows.TaskQueue, nil), nil, nil, ""},
		{"another task queue", describe(running, "ExecutionWorkflow", "rogue", nil), nil, nil, ""},
		{"a step started by its request's run", describe(running, "ExecutionWorkflow", workflows.TaskQueue, parent), nil, parent, "the-run"},
		{"a step started by another run", describe(running, "ExecutionWorkflow", workflows.TaskQueue,
			&commonpb.WorkflowExecution{WorkflowId: parent.WorkflowId, RunId: "other"}), nil, parent, ""},
		{"a step started by no parent", describe(running, "ExecutionWorkflow", workflows.TaskQueue, nil), nil, parent, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc2 := &mocks.Client{}
			tc2.On("DescribeWorkflowExecution", mock.Anything, "kexec/shop/x/u", "").Return(tc.resp, tc.err)
			got, err := openRunOf(t.Context(), tc2, "kexec/shop/x/u", "ExecutionWorkflow", tc.parent)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}
