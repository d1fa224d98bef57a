package harness

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/remedy-dev/remedy/internal/seal"
	"github.com/remedy-dev/remedy/workflows"
)

// RogueCall is one activity a rogue workflow schedules on Remedy's task
// queue: by its registered name, with payloads copied from a history
// (Raw) or made up (Arg).
type RogueCall struct {
	Activity string            `json:"activity"`
	Raw      *commonpb.Payload `json:"raw,omitempty"`
	Arg      any               `json:"arg,omitempty"`
}

// RogueOutcome is what a call came back with: "" for success, else the
// failure's type and message.
type RogueOutcome struct {
	Type    string `json:"type"`
	Message string `json:"message"`
	// NonRetryable: the failure was typed for good, not to be retried.
	NonRetryable bool `json:"nonRetryable,omitempty"`
}

// rogueWorkflow runs on the test's own task queue, in the test's process,
// with no Kubernetes credentials: it only asks Remedy's worker, through
// Temporal, to run Remedy's registered activities, once each, in order.
func rogueWorkflow(ctx workflow.Context, calls []RogueCall) ([]RogueOutcome, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:           workflows.TaskQueue,
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 1},
	})
	out := make([]RogueOutcome, len(calls))
	for i, c := range calls {
		arg := c.Arg
		if c.Raw != nil {
			arg = converter.NewRawValue(c.Raw)
		}
		err := workflow.ExecuteActivity(ctx, c.Activity, arg).Get(ctx, nil)
		var app *temporal.ApplicationError
		switch {
		case errors.As(err, &app):
			out[i] = RogueOutcome{Type: app.Type(), Message: app.Error(), NonRetryable: app.NonRetryable()}
		case err != nil:
			out[i] = RogueOutcome{Type: "error", Message: err.Error()}
		}
	}
	return out, nil
}

// StartRogue registers rogueWorkflow on a task queue of the test's own.
func StartRogue(t testing.TB, queue string) {
	w := sdkworker.New(Temporal(), queue, sdkworker.Options{})
	w.RegisterWorkflowWithOptions(rogueWorkflow, workflow.RegisterOptions{Name: "rogue"})
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)
}

// RunRogue starts the rogue under id and returns each call's outcome.
func RunRogue(t testing.TB, queue, id string, calls ...RogueCall) []RogueOutcome {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// A copied payload is sealed; the rogue's own client seals whatever it
	// sends once more. Opened here first, what reaches Remedy's worker is
	// exactly the copied seal's content, as a replay of those bytes would be.
	for i, c := range calls {
		if c.Raw == nil {
			continue
		}
		opened, err := (&seal.Codec{Keys: Keys()}).Decode([]*commonpb.Payload{c.Raw})
		require.NoError(t, err, "open the copied payload")
		calls[i].Raw = opened[0]
	}
	run, err := Temporal().ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: queue,
		// A closed run's workflow ID is free to anyone who reaches Temporal.
		WorkflowIDReusePolicy: enums.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE}, "rogue", calls)
	require.NoError(t, err)
	var out []RogueOutcome
	require.NoError(t, run.Get(ctx, &out))
	return out
}

// ScheduledInput returns the input payload of the first activity of type
// name that run scheduled, as its history holds it (not decoded: a rogue
// copies the bytes).
func ScheduledInput(t testing.TB, id, runID, name string) *commonpb.Payload {
	it := Temporal().GetWorkflowHistory(context.Background(), id, runID, false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
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
