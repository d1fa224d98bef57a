package integration

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/test/harness"
	"github.com/remedy-dev/remedy/workflows"
)

// Temporal accepts any signal into a running workflow, so the sender sees
// success; a malformed or misnamed one leaves a Warning Event on the object,
// where kubectl users look, and the run goes on waiting.
func TestMalformedAndMisnamedSignalsWarnOnTheObject(t *testing.T) {
	ctx := context.Background()
	ns := harness.Namespace(t)
	k, _ := awaitingApproval(t, ns, "scale-signals", time.Hour, 0)
	id := k.Status.WorkflowID

	require.NoError(t, harness.Temporal().SignalWorkflow(ctx, id, "", workflows.SignalApprove, map[string]string{"approvr": "alice"}))
	require.NoError(t, harness.Temporal().SignalWorkflow(ctx, id, "", "approved", workflows.ApprovalSignal{Approver: "alice"}))

	malformed := warningEventWith(t, ns, "KubernetesExecution", k.Name, v1alpha1.ReasonMalformedSignal).Note
	assert.Contains(t, malformed, `signal "approve" was accepted by Temporal but ignored: its payload is malformed: unknown field "approvr"`)
	assert.Contains(t, malformed, "prefer the decide update")
	assert.Contains(t, malformed, "--workflow-id '"+id+"' --name decide")
	misnamed := warningEventWith(t, ns, "KubernetesExecution", k.Name, v1alpha1.ReasonUnknownSignal).Note
	assert.Contains(t, misnamed, `signal "approved" was accepted by Temporal but does nothing: ExecutionWorkflow reads only the signals approve, reject, rollback, finalize`)
	assert.Equal(t, v1alpha1.PhaseWaitingApproval, queryPhase(t, id), "neither decided anything")
}
