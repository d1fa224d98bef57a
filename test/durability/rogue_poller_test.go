package durability

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/seal"
	"github.com/remedy-dev/remedy/test/harness"
	"github.com/remedy-dev/remedy/workflows"
)

// A rogue worker, with no Kubernetes credentials and no key, polls Remedy's
// task queue while Remedy's worker is down and takes a run's first task: it
// cannot read the run's input, and answers with a forged result that
// completes the workflow. Nothing is written, and the operator, finding the
// workflow closed without a final phase it can read, fails the run as lost
// instead of reporting the forged outcome.
func TestRoguePollerAnswersRemedysTask(t *testing.T) {
	stopOperator := harness.StartOperator(t)
	ns := harness.Namespace(t)
	gen := harness.Deployment(t, ns, "web", 2).Generation

	rogue, err := client.Dial(client.Options{HostPort: harness.TemporalAddress(), Namespace: "default"})
	require.NoError(t, err)
	defer rogue.Close()
	read := make(chan error, 1)
	w := sdkworker.New(rogue, workflows.TaskQueue, sdkworker.Options{})
	w.RegisterDynamicWorkflow(func(ctx workflow.Context, args converter.EncodedValues) (map[string]any, error) {
		// Runs earlier tests left open (a reload's timer) are not this test's:
		// their task fails here and goes back to the queue, untouched.
		if !strings.HasPrefix(workflow.GetInfo(ctx).WorkflowExecution.ID, "kexec/"+ns+"/scale-polled/") {
			panic("not the run under test")
		}
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

	// Remedy's worker comes back; the forged completion is all there is. The
	// run never pushed a status, so the sweep of quiet runs (which looks only
	// at runs that push one) passes it by; the operator finds it when it next
	// looks at the object, here at its restart.
	runWorker(t, nil)
	stopOperator()
	harness.StartOperator(t)
	harness.Eventually(t, k, time.Minute, func(k *v1alpha1.KubernetesExecution) bool { return k.Status.Phase.Terminal() })
	t.Logf("the run: %s %s: %s", k.Status.Phase, k.Status.Reason, k.Status.Message)
	assert.Equal(t, v1alpha1.PhaseFailed, k.Status.Phase, "the forged completion is never reported")
	assert.Contains(t, k.Status.Message, "without a final phase")
	assert.NotContains(t, k.Status.Message, "forged")
	assert.Equal(t, gen, deployment(t, ns, "web").Generation, "nothing written")
	assert.Equal(t, int32(2), *deployment(t, ns, "web").Spec.Replicas)
}
