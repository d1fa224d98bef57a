package harness

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
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
// of the workflow's current run (none: never started); signal-with-start
// records its signal too.
func SignalsReceived(t testing.TB, workflowID, name string) int {
	t.Helper()
	n := 0
	for _, e := range events(t, workflowID, true) {
		if s := e.GetWorkflowExecutionSignaledEventAttributes(); s != nil && (name == "" || s.GetSignalName() == name) {
			n++
		}
	}
	return n
}

// Events counts the events of type typ in the history of the workflow's
// current run; a workflow not started yet has none.
func Events(t testing.TB, workflowID string, typ enumspb.EventType) int {
	t.Helper()
	n := 0
	for _, e := range events(t, workflowID, false) {
		if e.GetEventType() == typ {
			n++
		}
	}
	return n
}

// WaitEvents waits until the history of the workflow's current run holds at
// least n events of type typ: a timer fired, a signal was recorded, a
// workflow task after it completed. It is how a test knows the workflow had
// its chance to act before it asserts that nothing was written.
func WaitEvents(t testing.TB, workflowID string, typ enumspb.EventType, n int, timeout time.Duration) {
	t.Helper()
	require.Eventually(t, func() bool { return Events(t, workflowID, typ) >= n }, timeout, 100*time.Millisecond,
		"workflow %s: fewer than %d %s events", workflowID, n, typ)
}

// WaitHandled waits until the workflow's current run has completed a
// workflow task after every signal, fired timer and activity result now in
// its history: the workflow code has seen them and issued whatever commands
// they lead to.
func WaitHandled(t testing.TB, workflowID string, timeout time.Duration) {
	t.Helper()
	last := lastInput(events(t, workflowID, true))
	require.Eventually(t, func() bool {
		for _, e := range events(t, workflowID, false) {
			if e.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED && e.GetEventId() > last {
				return true
			}
		}
		return false
	}, timeout, 100*time.Millisecond, "workflow %s handled nothing after event %d", workflowID, last)
}

// WaitSequence waits until the history of the workflow's current run,
// after the events it holds now, has events of these types in this order
// (others between them): TimerFired then TimerStarted is a poll that fired
// and was handled, since the next timer starts only after it.
func WaitSequence(t testing.TB, workflowID string, timeout time.Duration, types ...enumspb.EventType) {
	t.Helper()
	from := lastEventID(t, workflowID)
	require.Eventually(t, func() bool {
		i := 0
		for _, e := range events(t, workflowID, false) {
			if e.GetEventId() > from && e.GetEventType() == types[i] {
				if i++; i == len(types) {
					return true
				}
			}
		}
		return false
	}, timeout, 100*time.Millisecond, "workflow %s: no %v after event %d", workflowID, types, from)
}

// ActivitiesScheduled counts the activities of type activity the workflow's
// current run has scheduled.
func ActivitiesScheduled(t testing.TB, workflowID, activity string) int {
	t.Helper()
	n := 0
	for _, e := range events(t, workflowID, true) {
		if a := e.GetActivityTaskScheduledEventAttributes(); a != nil && a.GetActivityType().GetName() == activity {
			n++
		}
	}
	return n
}

func lastEventID(t testing.TB, workflowID string) int64 {
	t.Helper()
	evs := events(t, workflowID, true)
	require.NotEmpty(t, evs, "workflow %s has no history", workflowID)
	return evs[len(evs)-1].GetEventId()
}

// lastInput is the ID of the last event that the workflow code must see.
func lastInput(evs []*historypb.HistoryEvent) int64 {
	var last int64
	for _, e := range evs {
		switch e.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED, enumspb.EVENT_TYPE_TIMER_FIRED,
			enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED, enumspb.EVENT_TYPE_ACTIVITY_TASK_FAILED,
			enumspb.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT, enumspb.EVENT_TYPE_ACTIVITY_TASK_CANCELED:
			last = e.GetEventId()
		}
	}
	return last
}

// WaitQuiet waits until the workflow's current run has handled everything
// in its history and has no activity or workflow task pending: it waits on
// a timer or a signal, and writes nothing until one comes.
func WaitQuiet(t testing.TB, workflowID string, timeout time.Duration) {
	t.Helper()
	WaitHandled(t, workflowID, timeout)
	require.Eventually(t, func() bool {
		d, err := env.Temporal.DescribeWorkflowExecution(context.Background(), workflowID, "")
		require.NoError(t, err)
		return d.GetPendingWorkflowTask() == nil && len(d.GetPendingActivities()) == 0
	}, timeout, 100*time.Millisecond, "workflow %s kept working", workflowID)
}

// WaitPendingActivity waits until the workflow's pending activity of type
// activity is on its attempt after n failed ones, and returns it.
func WaitPendingActivity(t testing.TB, workflowID, activity string, n int32, timeout time.Duration) *workflowpb.PendingActivityInfo {
	t.Helper()
	var got *workflowpb.PendingActivityInfo
	require.Eventually(t, func() bool {
		// Not started yet is retried too.
		d, err := env.Temporal.DescribeWorkflowExecution(context.Background(), workflowID, "")
		if err != nil {
			return false
		}
		for _, pa := range d.GetPendingActivities() {
			if pa.GetActivityType().GetName() == activity && pa.GetAttempt() > n {
				got = pa
				return true
			}
		}
		return false
	}, timeout, 200*time.Millisecond, "workflow %s: activity %s did not fail %d times", workflowID, activity, n)
	return got
}

// events reads the history of the workflow's current run. A workflow never
// started has none; unless strict, another error reads as what was read so far.
func events(t testing.TB, workflowID string, strict bool) []*historypb.HistoryEvent {
	t.Helper()
	var out []*historypb.HistoryEvent
	it := env.Temporal.GetWorkflowHistory(context.Background(), workflowID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		var notFound *serviceerror.NotFound
		if strict && !errors.As(err, &notFound) {
			require.NoError(t, err)
		}
		if err != nil {
			return out
		}
		out = append(out, e)
	}
	return out
}
