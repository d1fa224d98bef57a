package harness

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
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

// SignalsReceived counts the signals named name ("": any) in the history
// of the workflow's current run; signal-with-start records its signal too.
func SignalsReceived(t testing.TB, workflowID, name string) int {
	t.Helper()
	n := 0
	it := env.Temporal.GetWorkflowHistory(context.Background(), workflowID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		require.NoError(t, err)
		if s := e.GetWorkflowExecutionSignaledEventAttributes(); s != nil && (name == "" || s.GetSignalName() == name) {
			n++
		}
	}
	return n
}
