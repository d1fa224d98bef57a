package alerts

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/remedy-dev/remedy/activities/alerts"
	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/test/harness"
	"github.com/remedy-dev/remedy/workflows"
)

// A namespace's guard that has absorbed many signals while it still holds
// state (a cooldown) continues as new with that state, and ends once the
// cooldown has passed.
func TestGuardContinuesAsNewWithItsState(t *testing.T) {
	ctx := context.Background()
	ns := harness.Namespace(t)
	id := v1alpha1.AlertGuardWorkflowID(ns)
	// The permit goes to a workflow that does not exist: the guard releases
	// it at once, so the target's cooldown is all it holds.
	acq := alerts.GuardAcquire{AlertID: "alert/" + ns + "/none/0000000000000000", Rule: "none", Target: "Deployment/none",
		MaxConcurrent: 1, Cooldown: 20 * time.Second, Slots: 1}
	_, err := harness.Temporal().SignalWithStartWorkflow(ctx, id, workflows.SignalAcquire, acq,
		client.StartWorkflowOptions{ID: id, TaskQueue: workflows.TaskQueue}, workflows.AlertGuardWorkflow, workflows.GuardInput{State: workflows.GuardState{Namespace: ns}})
	require.NoError(t, err)
	for range 520 {
		require.NoError(t, harness.Temporal().SignalWorkflow(ctx, id, "", workflows.SignalRelease, workflows.ReleaseRequest{AlertID: "unknown"}))
	}
	require.NoError(t, harness.Temporal().GetWorkflow(ctx, id, "").Get(ctx, nil))
	assert.GreaterOrEqual(t, harness.ReplayChain(t, id, "alert-guard-continued.json"), 2, "the guard continued as new")
}
