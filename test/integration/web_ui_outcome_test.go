package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"k8s.io/utils/ptr"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/test/harness"
)

// The Web UI shows a run that failed (NotFound, Rejected, ...) as a failed
// workflow with its reason as the failure's type, and a run that completed
// as completed; the documented query finds the failures by reason.
func TestWebUIShowsDomainFailures(t *testing.T) {
	ctx := context.Background()
	ns := harness.Namespace(t)
	rejected, _ := awaitingApproval(t, ns, "scale-rejected", time.Hour, 0)
	ok := createExecution(t, ns, "scale-ok", v1alpha1.KubernetesExecutionSpec{
		Action: "scale", Target: target(ns, "web"), Parameters: &v1alpha1.ActionParameters{Replicas: ptr.To[int32](2)},
		RollbackWindow: v1alpha1.DurationOf(0),
	})
	missing := createExecution(t, ns, "scale-missing", v1alpha1.KubernetesExecutionSpec{
		Action: "scale", Target: target(ns, "nowhere"), Parameters: &v1alpha1.ActionParameters{Replicas: ptr.To[int32](2)},
	})
	out, err := temporalCLIAs(t, ns, "bob", "workflow", "signal", "--workflow-id", rejected.Status.WorkflowID, "--name", "reject",
		"--input", `{"approver":"bob","reason":"change freeze"}`)
	require.NoError(t, err, out)

	for _, tc := range []struct {
		k      *v1alpha1.KubernetesExecution
		phase  v1alpha1.Phase
		reason string
	}{
		{ok, v1alpha1.PhaseCompleted, v1alpha1.ReasonSucceeded},
		{missing, v1alpha1.PhaseFailed, "NotFound"},
		{rejected, v1alpha1.PhaseFailed, v1alpha1.ReasonApprovalRejected},
	} {
		k := waitPhase(t, tc.k, tc.phase)
		require.Equal(t, tc.reason, k.Status.Reason, k.Status.Message)
		harness.WaitClosed(t, k.Status.WorkflowID, runTimeout)
		d, err := harness.Temporal().DescribeWorkflowExecution(ctx, k.Status.WorkflowID, "")
		require.NoError(t, err)
		if tc.phase == v1alpha1.PhaseCompleted {
			assert.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED, d.WorkflowExecutionInfo.Status, k.Name)
			continue
		}
		assert.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_FAILED, d.WorkflowExecutionInfo.Status, k.Name)
		out, err := temporalCLI(t, "workflow", "describe", "--workflow-id", k.Status.WorkflowID, "--output", "json")
		require.NoError(t, err, out)
		assert.Contains(t, out, `"type": "`+tc.reason+`"`, "the failure's type is the reason")

		// The query docs/operations.md documents for the Web UI's list.
		q := fmt.Sprintf("RemedyKind='KubernetesExecution' AND ExecutionStatus='Failed' AND WorkflowId='%s'", k.Status.WorkflowID)
		require.Eventually(t, func() bool {
			resp, err := harness.Temporal().ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: q})
			require.NoError(t, err)
			return len(resp.Executions) == 1
		}, 10*time.Second, 200*time.Millisecond, "query %s finds no run", q)
	}
}
