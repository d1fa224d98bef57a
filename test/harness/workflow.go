package harness

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// WaitClosed waits until the workflow has closed, however it ended.
func WaitClosed(t testing.TB, workflowID string, timeout time.Duration) {
	t.Helper()
	require.Eventually(t, func() bool {
		d, err := env.Temporal.DescribeWorkflowExecution(context.Background(), workflowID, "")
		require.NoError(t, err)
		return d.WorkflowExecutionInfo.GetCloseTime() != nil
	}, timeout, 100*time.Millisecond, "workflow %s is still open", workflowID)
}
