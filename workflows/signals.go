package workflows

import (
	"slices"
	"strings"

	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/workflow"

	"github.com/remedy-dev/remedy/internal/metrics"
)

// MetricUnknownSignals counts signals no handler of the receiving workflow
// type reads, by workflow_type (and the SDK's namespace and task_queue tags).
// The signal's name is in the Warning, not a label: senders choose it freely.
const MetricUnknownSignals = metrics.MetricWorkflowUnknownSignals

// knownSignals are the signals each workflow type reads. Temporal accepts a
// signal of any name into a running workflow; one nobody reads does nothing.
var knownSignals = map[string][]string{
	"ExecutionWorkflow":   {SignalApprove, SignalReject, SignalRollback, SignalFinalize},
	"RemediationWorkflow": {SignalStepReady},
	"ReloadWorkflow":      {SignalConfigChanged, SignalApprove, SignalReject},
	"DriftWorkflow":       {SignalDrift, SignalApprove, SignalReject},
	"AlertWorkflow":       {SignalAlert, SignalPermit, SignalApprove, SignalReject},
	"AlertGuardWorkflow":  {SignalAcquire, SignalRelease},
}

// UnknownSignals is a worker interceptor that logs a Warning and counts
// MetricUnknownSignals for a signal its workflow type never reads, such as
// "approved" or "roll-back", when it arrives rather than when the run ends
// (the SDK's own "Workflow has unhandled signals"). It issues no commands, so
// it cannot change a history; the logger and metrics are quiet on replay.
type UnknownSignals struct {
	interceptor.WorkerInterceptorBase
}

// InterceptWorkflow wraps each workflow's inbound calls.
func (*UnknownSignals) InterceptWorkflow(_ workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	i := &unknownSignalsInbound{}
	i.Next = next
	return i
}

type unknownSignalsInbound struct {
	interceptor.WorkflowInboundInterceptorBase
}

func (i *unknownSignalsInbound) HandleSignal(ctx workflow.Context, in *interceptor.HandleSignalInput) error {
	typ := workflow.GetInfo(ctx).WorkflowType.Name
	if known, ok := knownSignals[typ]; ok && !slices.Contains(known, in.SignalName) {
		workflow.GetLogger(ctx).Warn("unknown signal: this workflow reads no signal of that name, so it does nothing",
			"signal", in.SignalName, "workflowType", typ, "knownSignals", strings.Join(known, ", "))
		// Tagged here too, so the label does not depend on the SDK's own tags.
		workflow.GetMetricsHandler(ctx).WithTags(map[string]string{"workflow_type": typ}).Counter(MetricUnknownSignals).Inc(1)
	}
	return i.Next.HandleSignal(ctx, in)
}
