package drift

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	appsv1 "k8s.io/api/apps/v1"

	kv1 "github.com/remedy-dev/remedy/api/kausality/v1alpha1"
	"github.com/remedy-dev/remedy/test/harness"
	"github.com/remedy-dev/remedy/workflows"
)

func TestDriftWorkflowReportsDetectedThenResolvedWhenTheParentChanges(t *testing.T) {
	rcv := newReceiver(t)
	d := newDrift(t, to(rcv.URL))
	d.signalWithStart(t)
	// The webhook reports the same drift again while the controller retries: one report.
	d.signalWithStart(t)

	reports := rcv.waitPhases(t, kv1.DriftReportDetected)
	rep := reports[0]
	assert.Equal(t, kv1.DriftReportAPIVersion, rep.APIVersion)
	assert.Equal(t, kv1.DriftReportKind, rep.Kind)
	assert.Equal(t, d.signal.ID, rep.Spec.ID)
	assert.Equal(t, kv1.DriftObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: d.dep.Namespace, Name: "web",
		UID: string(d.dep.UID), Generation: 1}, rep.Spec.Parent)
	assert.Equal(t, d.rs.Name, rep.Spec.Child.Name)
	assert.Equal(t, kv1.DriftRequestContext{User: d.signal.User, Groups: d.signal.Groups, Operation: "UPDATE"}, rep.Spec.Request)
	var newRS appsv1.ReplicaSet
	require.NoError(t, json.Unmarshal(rep.Spec.NewObject, &newRS))
	assert.Equal(t, int32(3), *newRS.Spec.Replicas)

	st := d.status(t)
	require.Len(t, st.Open, 1)
	assert.Equal(t, d.signal.ID, st.Open[0].Signal.ID)

	// Stays open while nothing changes: a poll fired, and was handled (the
	// next poll's timer starts after it).
	harness.WaitSequence(t, d.workflowID(), driftTimeout, enumspb.EVENT_TYPE_TIMER_FIRED, enumspb.EVENT_TYPE_TIMER_STARTED)
	assert.Equal(t, []kv1.DriftReportPhase{kv1.DriftReportDetected}, rcv.phases())

	d.changeParent(t)
	rcv.waitPhases(t, kv1.DriftReportDetected, kv1.DriftReportResolved)
	harness.WaitClosed(t, d.workflowID(), driftTimeout)
	var res workflows.DriftResult
	require.NoError(t, harness.Temporal().GetWorkflow(context.Background(), d.workflowID(), "").Get(context.Background(), &res))
	assert.Equal(t, []workflows.ResolvedDrift{{ID: d.signal.ID, Reason: "ParentChanged"}}, res.Closed)
	harness.ReplayHistory(t, d.workflowID(), "drift-resolved.json")
}

// A drift detected under a snooze is silent until the snooze expires, and
// reported Detected by the first poll after, as it is still open. A change an
// approval let through opens no drift and is reported Resolved at once.
func TestDriftWorkflowReportsASnoozedDriftWhenTheSnoozeExpires(t *testing.T) {
	ctx := context.Background()
	rcv := newReceiver(t)
	d := newDrift(t, to(rcv.URL))
	d.signal.Snoozed = true
	d.signal.SnoozedUntil = time.Now().Add(time.Second).UTC()
	d.signalWithStart(t)
	require.Eventually(t, func() bool { return len(d.status(t).Open) == 1 }, driftTimeout, 50*time.Millisecond, "the drift is not tracked")
	harness.WaitHandled(t, d.workflowID(), driftTimeout)
	assert.Zero(t, harness.ActivitiesScheduled(t, d.workflowID(), "PostReport"), "snoozed: nothing is reported")
	assert.Empty(t, rcv.phases(), "snoozed")
	reports := rcv.waitPhases(t, kv1.DriftReportDetected)
	assert.Equal(t, d.signal.ID, reports[0].Spec.ID)
	require.True(t, d.status(t).Open[0].Unsnoozed)

	through := d.signal
	through.ID, through.Snoozed, through.SnoozedUntil, through.Approved = "0123456789abcdef", false, time.Time{}, true
	require.NoError(t, harness.Temporal().SignalWorkflow(ctx, d.workflowID(), "", workflows.SignalDrift, through))
	reports = rcv.waitPhases(t, kv1.DriftReportDetected, kv1.DriftReportResolved)
	assert.Equal(t, through.ID, reports[1].Spec.ID)

	d.changeParent(t)
	reports = rcv.waitPhases(t, kv1.DriftReportDetected, kv1.DriftReportResolved, kv1.DriftReportResolved)
	assert.Equal(t, d.signal.ID, reports[2].Spec.ID)
	harness.WaitClosed(t, d.workflowID(), driftTimeout)
	harness.ReplayHistory(t, d.workflowID(), "drift-unsnoozed.json")
}

// The webhook repeats an open drift each time the controller retries: past
// its signal budget the run continues as new with its approval request open,
// and the next run takes the decision on that same request.
func TestDriftWorkflowContinuesAsNewWithItsRequestOpen(t *testing.T) {
	ctx := context.Background()
	rcv, d, rar := askingDrift(t)
	desc, err := harness.Temporal().DescribeWorkflowExecution(ctx, d.workflowID(), "")
	require.NoError(t, err)
	firstRun := desc.GetWorkflowExecutionInfo().GetExecution().GetRunId()
	for range 200 {
		require.NoError(t, harness.Temporal().SignalWorkflow(ctx, d.workflowID(), "", workflows.SignalDrift, d.signal))
	}
	require.Eventually(t, func() bool {
		desc, err := harness.Temporal().DescribeWorkflowExecution(ctx, d.workflowID(), firstRun)
		require.NoError(t, err)
		return desc.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW
	}, driftTimeout, 100*time.Millisecond, "the run continued as new")
	st := d.status(t)
	require.Len(t, st.Open, 1)
	assert.Equal(t, rar.Name, st.Open[0].ApprovalRequest, "the same request")

	require.NoError(t, harness.Temporal().SignalWorkflow(ctx, d.workflowID(), "", workflows.SignalApprove,
		workflows.ApprovalSignal{Approver: "alice", Request: rar.Name}))
	rcv.waitPhases(t, kv1.DriftReportDetected, kv1.DriftReportResolved)
	harness.WaitClosed(t, d.workflowID(), driftTimeout)
	assert.Equal(t, 2, harness.ReplayChain(t, d.workflowID(), "drift-continued-as-new.json"))
}
