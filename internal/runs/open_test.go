package runs

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	workflowservice "go.temporal.io/api/workflowservice/v1"
)

// described answers every Describe with one run, or err.
type described struct {
	resp *workflowservice.DescribeWorkflowExecutionResponse
	err  error
}

func (d described) DescribeWorkflowExecution(context.Context, string, string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	return d.resp, d.err
}

func run(status enumspb.WorkflowExecutionStatus, typ, queue string, parent *commonpb.WorkflowExecution) described {
	return described{resp: &workflowservice.DescribeWorkflowExecutionResponse{
		ExecutionConfig: &workflowpb.WorkflowExecutionConfig{TaskQueue: &taskqueuepb.TaskQueue{Name: queue}},
		WorkflowExecutionInfo: &workflowpb.WorkflowExecutionInfo{Execution: &commonpb.WorkflowExecution{WorkflowId: "reload/shop/Deployment/web", RunId: "r1"},
			Type: &commonpb.WorkflowType{Name: typ}, Status: status, ParentExecution: parent},
	}}
}

func TestOpenIsOnlyRemedysOpenRun(t *testing.T) {
	running := enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING
	parent := &commonpb.WorkflowExecution{WorkflowId: "rr/shop/fix/u", RunId: "p1"}
	tests := []struct {
		name   string
		d      described
		parent *commonpb.WorkflowExecution
		want   string
	}{
		{name: "open run of the type on the queue", d: run(running, "ReloadWorkflow", "remedy", nil), want: "r1"},
		{name: "closed", d: run(enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED, "ReloadWorkflow", "remedy", nil)},
		{name: "another type", d: run(running, "rogue", "remedy", nil)},
		{name: "another queue", d: run(running, "ReloadWorkflow", "rogue", nil)},
		{name: "no such workflow", d: described{err: serviceerror.NewNotFound("none")}},
		{name: "the child of the parent", d: run(running, "ReloadWorkflow", "remedy", parent), parent: parent, want: "r1"},
		{name: "another parent's child", d: run(running, "ReloadWorkflow", "remedy", &commonpb.WorkflowExecution{WorkflowId: "rr/shop/fix/u", RunId: "p0"}), parent: parent},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Open(context.Background(), tt.d, "reload/shop/Deployment/web", "ReloadWorkflow", "remedy", tt.parent)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
	_, err := Open(context.Background(), described{err: errors.New("unavailable")}, "x", "ReloadWorkflow", "remedy", nil)
	assert.Error(t, err, "Temporal not answering is an error, not a missing run")
}
