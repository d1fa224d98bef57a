package integration

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/utils/ptr"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/activities"
	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/test/harness"
	"github.com/remedy-dev/remedy/workflows"
)

// rogueCall is one activity a rogue workflow schedules on Remedy's task
// queue: by its registered name, with payloads copied from a history
// (Raw) or made up (Arg).
type rogueCall struct {
	Activity string            `json:"activity"`
	Raw      *commonpb.Payload `json:"raw,omitempty"`
	Arg      any               `json:"arg,omitempty"`
}

// rogueOutcome is what a call came back with: "" for success, else the
// failure's type and message.
type rogueOutcome struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// rogueWorkflow runs on the test's own task queue, in the test's process,
// with no Kubernetes credentials: it only asks Remedy's worker, through
// Temporal, to run Remedy's registered activities, once each, in order.
func rogueWorkflow(ctx workflow.Context, calls []rogueCall) ([]rogueOutcome, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:           workflows.TaskQueue,
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 1},
	})
	out := make([]rogueOutcome, len(calls))
	for i, c := range calls {
		arg := c.Arg
		if c.Raw != nil {
			arg = converter.NewRawValue(c.Raw)
		}
		err := workflow.ExecuteActivity(ctx, c.Activity, arg).Get(ctx, nil)
		var app *temporal.ApplicationError
		switch {
		case errors.As(err, &app):
			out[i] = rogueOutcome{Type: app.Type(), Message: app.Error()}
		case err != nil:
			out[i] = rogueOutcome{Type: "error", Message: err.Error()}
		}
	}
	return out, nil
}

// startRogue registers rogueWorkflow on a task queue of the test's own.
func startRogue(t *testing.T, queue string) {
	w := sdkworker.New(harness.Temporal(), queue, sdkworker.Options{})
	w.RegisterWorkflowWithOptions(rogueWorkflow, workflow.RegisterOptions{Name: "rogue"})
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)
}

// runRogue starts the rogue under id and returns each call's outcome.
func runRogue(t *testing.T, queue, id string, calls ...rogueCall) []rogueOutcome {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	run, err := harness.Temporal().ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: queue,
		// A closed run's workflow ID is free to anyone who reaches Temporal.
		WorkflowIDReusePolicy: enums.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE}, "rogue", calls)
	require.NoError(t, err)
	var out []rogueOutcome
	require.NoError(t, run.Get(ctx, &out))
	return out
}

// scheduledInput returns the input payload of the first activity of type
// name that run scheduled, as its history holds it (not decoded: a rogue
// copies the bytes).
func scheduledInput(t *testing.T, id, runID, name string) *commonpb.Payload {
	it := harness.Temporal().GetWorkflowHistory(context.Background(), id, runID, false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil && a.GetActivityType().GetName() == name {
			p := a.GetInput().GetPayloads()
			require.Len(t, p, 1)
			return p[0]
		}
	}
	require.Failf(t, "activity not in history", "%s scheduled no %s", id, name)
	return nil
}

// TestRogueWorkflowReplayingAFinishedRunWritesNothing is the rogue-worker
// attack on a finished KubernetesExecution: a workflow of the attacker's,
// on its own task queue, schedules Remedy's activities on Remedy's task
// queue. It pushes a status that offers a rollback of its choosing, then
// asks for that "rollback" through the inline execution, with the write
// copied byte for byte from the finished run's history. From a workflow
// of its own, and from a new run under the finished run's own workflow ID,
// nothing is written: the status and the Deployment stay as the run left
// them.
func TestRogueWorkflowReplayingAFinishedRunWritesNothing(t *testing.T) {
	ctx := context.Background()
	ns := harness.Namespace(t)
	harness.Deployment(t, ns, "web", 1)
	k := waitPhase(t, createExecution(t, ns, "scale", scaleSpec(ns, "web", 2)), v1alpha1.PhaseCompleted)
	require.NotEmpty(t, k.Status.RunID, "the operator recorded the run it started")
	d, err := harness.Temporal().DescribeWorkflowExecution(ctx, k.Status.WorkflowID, "")
	require.NoError(t, err)
	assert.Equal(t, d.GetWorkflowExecutionInfo().GetExecution().GetRunId(), k.Status.RunID, "the recorded run is the one that ran")
	require.Equal(t, int32(2), replicasOf(t, ns, "web"))
	var dep appsv1.Deployment
	require.NoError(t, harness.Kube().Get(ctx, ctrlclient.ObjectKey{Namespace: ns, Name: "web"}, &dep))
	generation := dep.Generation

	// The write the run made, as its history holds it.
	write := scheduledInput(t, k.Status.WorkflowID, k.Status.RunID, "ExecuteInline")
	var w activities.Write
	require.NoError(t, converter.GetDefaultDataConverter().FromPayload(write, &w))
	require.Equal(t, string(k.UID), w.Subject.UID)

	// The forged status: not finished, offering a "rollback" to 7 replicas.
	forged := *k.Status.DeepCopy()
	forged.Sequence += 10
	forged.Phase, forged.Reason, forged.Message = v1alpha1.PhaseRollbackReady, workflows.ReasonRollbackAvailable, "forged"
	forged.RollbackInformation = &v1alpha1.RollbackInformation{Available: true, RollbackAction: "scale",
		RollbackParameters: &v1alpha1.ActionParameters{Replicas: ptr.To[int32](7)}}
	push := activities.ExecutionStatusPush{Namespace: ns, Name: k.Name, UID: string(k.UID), Action: "scale", Status: forged}
	rollback := w
	rollback.Request.Params = v1alpha1.ActionParameters{Replicas: ptr.To[int32](7)}

	queue := "rogue-" + ns
	startRogue(t, queue)
	for name, id := range map[string]string{
		"a workflow of its own":                     "rogue/" + ns,
		"a new run under the finished run's own ID": k.Status.WorkflowID,
	} {
		t.Run(name, func(t *testing.T) {
			out := runRogue(t, queue, id,
				rogueCall{Activity: "PushExecutionStatus", Arg: push},
				rogueCall{Activity: "ExecuteInline", Raw: write},
				rogueCall{Activity: "ExecuteInline", Arg: rollback})
			for i, o := range out {
				assert.Equal(t, activities.ReasonSubjectMismatch, o.Type, "call %d: %s", i, o.Message)
			}
			var now v1alpha1.KubernetesExecution
			require.NoError(t, harness.Kube().Get(ctx, ctrlclient.ObjectKeyFromObject(k), &now))
			assert.True(t, equality.Semantic.DeepEqual(k.Status, now.Status), "the status is the run's own: %+v", now.Status)
			require.NoError(t, harness.Kube().Get(ctx, ctrlclient.ObjectKey{Namespace: ns, Name: "web"}, &dep))
			assert.Equal(t, int32(2), *dep.Spec.Replicas, "nothing was scaled")
			assert.Equal(t, generation, dep.Generation, "nothing was written to the Deployment")
		})
	}
}

// TestRogueWorkflowCannotDecideAnApproval: a decision recorded on a waiting
// approval request from any run but the execution's own is refused, and the
// run still waits for a person.
func TestRogueWorkflowCannotDecideAnApproval(t *testing.T) {
	ctx := context.Background()
	ns := harness.Namespace(t)
	k, rar := awaitingApproval(t, ns, "held", 10*time.Minute, 0)
	require.NotEmpty(t, k.Status.RunID)
	decision := activities.DecisionInput{Namespace: ns, Name: rar.Name, WorkflowID: k.Status.WorkflowID,
		Decision: activities.Decision{Decision: v1alpha1.DecisionApproved, DecidedBy: "mallory", Via: v1alpha1.DecidedViaSignal, At: time.Now()}}
	queue := "rogue-" + ns
	startRogue(t, queue)
	out := runRogue(t, queue, "rogue/"+ns, rogueCall{Activity: "RecordDecision", Arg: decision})
	assert.Equal(t, activities.ReasonSubjectMismatch, out[0].Type, out[0].Message)
	require.NoError(t, harness.Kube().Get(ctx, ctrlclient.ObjectKeyFromObject(rar), rar))
	assert.Empty(t, rar.Status.Decision, "no decision recorded")
	require.NoError(t, harness.Kube().Get(ctx, ctrlclient.ObjectKeyFromObject(k), k))
	assert.Equal(t, v1alpha1.PhaseWaitingApproval, k.Status.Phase)
}
