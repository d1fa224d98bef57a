package activities

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	workflowservice "go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/remedy-dev/remedy/api/v1alpha1"
)

// openRun is a Temporal whose every workflow ID's open run is the test
// environment's run, of type typ, on queue (testTaskQueue when empty);
// described counts the questions.
type openRunFake struct {
	typ, queue, runID string
	described         int
}

func (f *openRunFake) DescribeWorkflowExecution(_ context.Context, id, _ string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	f.described++
	queue, runID := f.queue, f.runID
	if queue == "" {
		queue = testTaskQueue
	}
	if runID == "" {
		runID = testRunID
	}
	return &workflowservice.DescribeWorkflowExecutionResponse{
		ExecutionConfig: &workflowpb.WorkflowExecutionConfig{TaskQueue: &taskqueuepb.TaskQueue{Name: queue}},
		WorkflowExecutionInfo: &workflowpb.WorkflowExecutionInfo{Execution: &commonpb.WorkflowExecution{WorkflowId: id, RunId: runID},
			Type: &commonpb.WorkflowType{Name: f.typ}, Status: enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING},
	}, nil
}

// openRunsOf binds runs against a fake whose open runs are of type typ.
func openRunsOf(typ string) *OpenRuns {
	return &OpenRuns{Temporal: &openRunFake{typ: typ}, TaskQueue: testTaskQueue}
}

// asRun runs one activity of acts, once, inside a workflow with ID id (the
// test environment's run), and decodes its result into out when set.
func asRun(t *testing.T, id string, acts, activityFn, in, out any) error {
	t.Helper()
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	env.RegisterActivity(acts)
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: id})
	env.RegisterWorkflowWithOptions(func(ctx workflow.Context) (json.RawMessage, error) {
		ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute, RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1}})
		var res json.RawMessage
		err := workflow.ExecuteActivity(ctx, activityFn, in).Get(ctx, &res)
		return res, err
	}, workflow.RegisterOptions{Name: "as-run"})
	env.ExecuteWorkflow("as-run")
	if err := env.GetWorkflowError(); err != nil {
		return err
	}
	if out != nil {
		var raw json.RawMessage
		require.NoError(t, env.GetWorkflowResult(&raw))
		require.NoError(t, json.Unmarshal(raw, out))
	}
	return nil
}

// reloadRun runs reload activities as the reload run of the workload their
// input names; its ExecuteActivity stands in for an activity environment's.
type reloadRun struct {
	t *testing.T
	r *Reload
}

func (e reloadRun) ExecuteActivity(activityFn any, args ...any) (converter.EncodedValue, error) {
	e.t.Helper()
	b, err := json.Marshal(args[0])
	require.NoError(e.t, err)
	var w struct{ Namespace, Kind, Name string }
	require.NoError(e.t, json.Unmarshal(b, &w))
	var res json.RawMessage
	err = asRun(e.t, v1alpha1.ReloadWorkflowID(w.Namespace, w.Kind, w.Name), e.r, activityFn, args[0], &res)
	return jsonValue(res), err
}
