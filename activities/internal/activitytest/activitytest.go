// Package activitytest holds the fakes the activity packages' tests share:
// the test environment's run, a Temporal that describes it, a run of one
// activity, a counting client. Only tests import it (TestLayering).
package activitytest

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	workflowservice "go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"
	"k8s.io/apimachinery/pkg/runtime"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/remedy-dev/remedy/api/v1alpha1"
)

// The test activity environment's caller: every activity it runs is
// scheduled by this workflow ID and run ID.
const (
	TestWorkflowID = "default-test-workflow-id"
	TestRunID      = "default-test-run-id"
)

// TestTaskQueue is the queue the fakes' runs are on.
const TestTaskQueue = "remedy"

// JSONValue is a query answer as JSON.
type JSONValue []byte

func (v JSONValue) HasValue() bool { return len(v) > 0 }

func (v JSONValue) Get(valuePtr any) error { return json.Unmarshal(v, valuePtr) }

// OpenRunFake is a Temporal whose every workflow ID's open run is the test
// environment's run, of type Typ, on Queue (TestTaskQueue when empty);
// Described counts the questions.
type OpenRunFake struct {
	Typ, Queue, RunID string
	Described         int
}

func (f *OpenRunFake) DescribeWorkflowExecution(_ context.Context, id, _ string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	f.Described++
	queue, runID := f.Queue, f.RunID
	if queue == "" {
		queue = TestTaskQueue
	}
	if runID == "" {
		runID = TestRunID
	}
	return &workflowservice.DescribeWorkflowExecutionResponse{
		ExecutionConfig: &workflowpb.WorkflowExecutionConfig{TaskQueue: &taskqueuepb.TaskQueue{Name: queue}},
		WorkflowExecutionInfo: &workflowpb.WorkflowExecutionInfo{Execution: &commonpb.WorkflowExecution{WorkflowId: id, RunId: runID},
			Type: &commonpb.WorkflowType{Name: f.Typ}, Status: enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING},
	}, nil
}

// AsRun runs one activity of acts, once, inside a workflow with ID id (the
// test environment's run), and decodes its result into out when set.
func AsRun(t *testing.T, id string, acts, activityFn, in, out any) error {
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

// CountingClient is a fake client that counts its Gets.
func CountingClient(t *testing.T, objs ...ctrlclient.Object) (ctrlclient.Client, *atomic.Int32) {
	s := runtime.NewScheme()
	require.NoError(t, v1alpha1.AddToScheme(s))
	var gets atomic.Int32
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).WithStatusSubresource(objs...).WithInterceptorFuncs(interceptor.Funcs{
		Get: func(ctx context.Context, c ctrlclient.WithWatch, key ctrlclient.ObjectKey, obj ctrlclient.Object, opts ...ctrlclient.GetOption) error {
			gets.Add(1)
			return c.Get(ctx, key, obj, opts...)
		}}).Build()
	return c, &gets
}
