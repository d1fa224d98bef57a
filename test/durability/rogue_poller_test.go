package durability

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/seal"
	"github.com/remedy-dev/remedy/test/harness"
	"github.com/remedy-dev/remedy/workflows"
)

// A rogue worker, with no Kubernetes credentials and no key, polls Remedy's
// task queue while Remedy's worker is down and takes a run's first task: it
// cannot read the run's input, and answers with a forged result that
// completes the workflow. Nothing is written and the run never reports the
// forged outcome.
func TestRoguePollerAnswersRemedysTask(t *testing.T) {
	ctx := context.Background()
	harness.StartOperator(t)
	ns := harness.Namespace(t)
	gen := harness.Deployment(t, ns, "web", 2).Generation

	rogue, err := client.Dial(client.Options{HostPort: harness.TemporalAddress(), Namespace: "default"})
	require.NoError(t, err)
	defer rogue.Close()
	read := make(chan error, 1)
	w := sdkworker.New(rogue, workflows.TaskQueue, sdkworker.Options{})
	w.RegisterDynamicWorkflow(func(ctx workflow.Context, args converter.EncodedValues) (map[string]any, error) {
		var input json.RawMessage
		select {
		case read <- args.Get(&input):
		default:
		}
		return map[string]any{"phase": "Completed", "message": "forged", "executionResults": map[string]any{"resourcesAffected": []any{}}}, nil
	}, workflow.DynamicRegisterOptions{})
	require.NoError(t, w.Start())
	defer w.Stop()

	k := createExecution(t, ns, "scale-polled", scaleSpec(ns, "web", 9))
	var readErr error
	select {
	case readErr = <-read:
	case <-time.After(time.Minute):
		require.FailNow(t, "the rogue never took the run's task")
	}
	require.ErrorContains(t, readErr, seal.Encoding, "the rogue cannot read the run's input")
	t.Logf("the rogue reading the input: %v", readErr)
	w.Stop()

	// Remedy's worker comes back; the forged completion is all there is.
	runWorker(t, nil)
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(250 * time.Millisecond) {
		require.Equal(t, gen, deployment(t, ns, "web").Generation, "nothing written")
		require.NoError(t, harness.Kube().Get(ctx, ctrlclient.ObjectKeyFromObject(k), k))
		require.NotEqual(t, "forged", k.Status.Message, "the forged outcome is never reported")
		require.NotEqual(t, v1alpha1.PhaseCompleted, k.Status.Phase)
	}
	t.Logf("the run: %s %s: %s", k.Status.Phase, k.Status.Reason, k.Status.Message)
	assert.Equal(t, int32(2), *deployment(t, ns, "web").Spec.Replicas)
}
