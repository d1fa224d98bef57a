package workflows

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/workflow"

	"github.com/remedy-dev/remedy/activities/status"
	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/metrics"
)

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

// SignalWarner records, outside the history, a signal a workflow cannot
// use (status.SignalEvents: a Warning Event on the workflow's object).
// It must not block.
type SignalWarner interface {
	WarnSignal(status.SignalWarning)
}

// UnknownSignals is a worker interceptor that logs a Warning and counts
// remedy_workflow_unknown_signals_total (by workflow type; the signal's name
// is in the Warning, not a label: senders choose it freely) for a signal its workflow type never reads, such as
// "approved" or "roll-back", when it arrives rather than when the run ends
// (the SDK's own "Workflow has unhandled signals"), and hands it, and every
// signal whose payload the workflow cannot decode (receiveSignal), to
// Warner. It issues no commands, so it cannot change a history; the logger,
// metrics and Warner are quiet on replay.
type UnknownSignals struct {
	interceptor.WorkerInterceptorBase
	// Warner, when set, records each such signal on the workflow's object.
	Warner SignalWarner
	// Sealed, when set, refuses a signal whose payload Remedy's parts (or,
	// for an approval decision, a person through the codec server) did not
	// seal, before any handler or channel sees it; the refusal is counted
	// and handed to Warner.
	Sealed SealCheck
}

// SealCheck checks a signal's raw payloads (internal/seal.Signals).
type SealCheck interface {
	Check(ctx workflow.Context, signal string, personal bool, payloads *commonpb.Payloads) error
	// Track registers the run while its code runs, for what the SDK decodes
	// outside it (the upgrade's migration, internal/seal/migrate.go).
	Track(ctx workflow.Context) (release func())
}

// personSignals are the signals a person may send sealed by the codec
// server: approval decisions and a rollback, each authorized for that person
// by the workflow. Every other signal is Remedy's own.
var personSignals = []string{SignalApprove, SignalReject, SignalRollback}

// InterceptWorkflow wraps each workflow's inbound calls.
func (u *UnknownSignals) InterceptWorkflow(_ workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	i := &unknownSignalsInbound{warner: u.Warner, sealed: u.Sealed}
	i.Next = next
	return i
}

// unknownSignalsInbound is one run's interceptor.
type unknownSignalsInbound struct {
	interceptor.WorkflowInboundInterceptorBase
	warner SignalWarner
	sealed SealCheck
	// subject is the run's object, from its input; nil until the run starts.
	subject *corev1.ObjectReference
	// seq counts the run's signal warnings, replayed ones included, so each
	// has the same number however often a workflow task runs.
	seq int
}

// signalWarnings is the context key of the run's interceptor, for receiveSignal.
type signalWarnings struct{}

// subjectInput is a workflow input that names the workflow's object.
type subjectInput interface {
	signalSubject() corev1.ObjectReference
}

func (i *unknownSignalsInbound) ExecuteWorkflow(ctx workflow.Context, in *interceptor.ExecuteWorkflowInput) (any, error) {
	if i.sealed != nil {
		defer i.sealed.Track(ctx)()
	}
	if len(in.Args) > 0 {
		if s, ok := in.Args[0].(subjectInput); ok {
			ref := s.signalSubject()
			i.subject = &ref
		}
	}
	return i.Next.ExecuteWorkflow(workflow.WithValue(ctx, signalWarnings{}, i), in)
}

func (i *unknownSignalsInbound) HandleSignal(ctx workflow.Context, in *interceptor.HandleSignalInput) error {
	typ := workflow.GetInfo(ctx).WorkflowType.Name
	if i.sealed != nil {
		// Deterministic: the same payload under the same keys is refused on every replay.
		if err := i.sealed.Check(ctx, in.SignalName, slices.Contains(personSignals, in.SignalName), in.Arg); err != nil {
			workflow.GetLogger(ctx).Warn("signal refused: its payload was not sealed by Remedy's parts, so it is not delivered",
				"signal", in.SignalName, "workflowType", typ, "error", err)
			i.warn(ctx, in.SignalName, v1alpha1.ReasonRefusedSignal, fmt.Sprintf(
				"signal %q was refused and not delivered: %v. Decide with kubectl remedy approve/reject, or through the codec server (docs/security.md, \"The Temporal trust boundary\").",
				in.SignalName, err))
			return nil
		}
	}
	if known, ok := knownSignals[typ]; ok && !slices.Contains(known, in.SignalName) {
		workflow.GetLogger(ctx).Warn("unknown signal: this workflow reads no signal of that name, so it does nothing",
			"signal", in.SignalName, "workflowType", typ, "knownSignals", strings.Join(known, ", "))
		count(ctx, metrics.WorkflowUnknownSignals.WithLabelValues(typ), 1)
		i.warn(ctx, in.SignalName, v1alpha1.ReasonUnknownSignal, fmt.Sprintf(
			"signal %q was accepted by Temporal but does nothing: %s reads only the signals %s. %s",
			in.SignalName, typ, strings.Join(known, ", "), preferDecide(ctx)))
	}
	return i.Next.HandleSignal(ctx, in)
}

// warn hands a warning to the warner, unless replaying.
func (i *unknownSignalsInbound) warn(ctx workflow.Context, signal, reason, note string) {
	i.seq++
	if i.warner == nil || workflow.IsReplaying(ctx) {
		return
	}
	info := workflow.GetInfo(ctx)
	subject := i.subject
	if subject == nil {
		// A signal handled before the run started (signal-with-start).
		return
	}
	i.warner.WarnSignal(status.SignalWarning{Regarding: *subject, WorkflowID: info.WorkflowExecution.ID, RunID: info.WorkflowExecution.RunID,
		Seq: i.seq, Signal: signal, Reason: reason, Note: note})
}

// warnSignal reports, from workflow code, a signal whose payload the
// workflow cannot use as sent.
func warnSignal(ctx workflow.Context, signal, note string) {
	if i, ok := ctx.Value(signalWarnings{}).(*unknownSignalsInbound); ok {
		i.warn(ctx, signal, v1alpha1.ReasonMalformedSignal, note)
	}
}

// warnRefused reports, from workflow code, a person's decision refused
// because they may not decide the request.
func warnRefused(ctx workflow.Context, signal, note string) {
	if i, ok := ctx.Value(signalWarnings{}).(*unknownSignalsInbound); ok {
		i.warn(ctx, signal, v1alpha1.ReasonApproverRefused, note)
	}
}

// preferDecide points a person at the decide update, which answers at once.
func preferDecide(ctx workflow.Context) string {
	return fmt.Sprintf(`To decide, prefer the decide update, which refuses a mistake at once: temporal workflow update execute --workflow-id '%s' --name decide --input '{"approved":true,"reason":"..."}' --codec-endpoint <Remedy's codec server> --codec-auth "Bearer <your Kubernetes token>"`,
		workflow.GetInfo(ctx).WorkflowExecution.ID)
}

func (in ExecutionInput) signalSubject() corev1.ObjectReference {
	return corev1.ObjectReference{APIVersion: v1alpha1.GroupVersion.String(), Kind: "KubernetesExecution", Namespace: in.Namespace, Name: in.Name, UID: types.UID(in.UID)}
}

func (in RemediationInput) signalSubject() corev1.ObjectReference {
	return corev1.ObjectReference{APIVersion: v1alpha1.GroupVersion.String(), Kind: "RemediationRequest", Namespace: in.Namespace, Name: in.Name, UID: types.UID(in.UID)}
}

func (in ReloadInput) signalSubject() corev1.ObjectReference {
	return corev1.ObjectReference{APIVersion: "apps/v1", Kind: in.Kind, Namespace: in.Namespace, Name: in.Name}
}

func (in DriftInput) signalSubject() corev1.ObjectReference {
	p := in.Parent
	return corev1.ObjectReference{APIVersion: p.APIVersion, Kind: p.Kind, Namespace: p.Namespace, Name: p.Name, UID: types.UID(p.UID)}
}
