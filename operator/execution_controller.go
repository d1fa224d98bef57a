package operator

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/metrics"
	"github.com/remedy-dev/remedy/workflows"
)

// Finalizer lets the operator cancel a run before its execution disappears.
const Finalizer = "remedy.dev/workflow"

// ExecutionReconciler turns each KubernetesExecution into one ExecutionWorkflow,
// relays the rollback annotation and cancels on delete. The workflow writes
// .status; a run none of whose writes landed (status.sequence 0) has its
// status query mirrored here.
type ExecutionReconciler struct {
	ctrlclient.Client
	Temporal client.Client
	Recorder events.EventRecorder
	Clock    clock.PassiveClock
	checks   runChecks
	// swept wakes executions whose workflow the sweep found not running.
	swept *sweptKind
	// openRuns holds back starts over the namespace's cap; nil: no cap.
	openRuns *openRuns
}

// +kubebuilder:rbac:groups=remedy.dev,resources=kubernetesexecutions,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=remedy.dev,resources=kubernetesexecutions/status,verbs=update
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=coordination.k8s.io,namespace=remedy-system,resources=leases,verbs=get;create;update

// Reconcile observes the execution and its workflow, plans the status in a
// pure function, then starts, cancels or writes status as planned.
func (r *ExecutionReconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, _ error) {
	logger := log.FromContext(ctx)
	var kexec v1alpha1.KubernetesExecution
	if err := r.Get(ctx, req.NamespacedName, &kexec); err != nil {
		r.checks.forget(req.NamespacedName)
		return ctrl.Result{}, ctrlclient.IgnoreNotFound(err)
	}
	id := v1alpha1.ExecutionWorkflowID(kexec.Namespace, kexec.Name, string(kexec.UID))

	if !kexec.DeletionTimestamp.IsZero() {
		r.checks.forget(req.NamespacedName)
		return ctrl.Result{}, r.finalize(ctx, &kexec, id)
	}
	if before := kexec.DeepCopy(); controllerutil.AddFinalizer(&kexec, Finalizer) {
		if err := r.Patch(ctx, &kexec, ctrlclient.MergeFrom(before)); err != nil {
			return ctrl.Result{}, fmt.Errorf("add finalizer: %w", err)
		}
	}

	// A step's run, or one started before v0.2, is recorded once it is open
	// (run_binding.go); until then its activities wait.
	if needsRun(kexec.Status.WorkflowID, kexec.Status.RunID, kexec.Status.Phase) {
		recorded, err := r.recordExecutionRun(ctx, &kexec, id)
		if err != nil {
			logger.Info("workflow run not recorded; retrying", "workflowID", id, "error", err.Error())
			return ctrl.Result{RequeueAfter: queryRetry}, nil
		}
		if recorded {
			return ctrl.Result{Requeue: true}, nil
		}
		// Not open yet (a step whose parent has not started it): look again soon.
		defer func() {
			if res.RequeueAfter == 0 || res.RequeueAfter > queryRetry {
				res.RequeueAfter = queryRetry
			}
		}()
	}

	// Observe.
	now := r.Clock.Now()
	seen, err := r.observe(ctx, &kexec, id, now)
	var failed lookFailed
	if errors.As(err, &failed) {
		logger.Info("workflow check failed; retrying", "workflowID", id, "error", failed.err.Error())
		return ctrl.Result{RequeueAfter: queryRetry}, nil
	}
	if err != nil {
		return ctrl.Result{}, err
	}

	// Plan.
	p := planExecution(&kexec, id, seen.observed, seen.run, seen.decided, now)
	if seen.held {
		p = planHeldExecution(&kexec, r.openRuns.limit, now)
	}

	// Execute.
	return r.execute(ctx, &kexec, id, p)
}

// lookFailed is a look at the workflow that failed: the reconcile tries
// again after queryRetry, without an error.
type lookFailed struct{ err error }

func (l lookFailed) Error() string { return l.err.Error() }
func (l lookFailed) Unwrap() error { return l.err }

// executionSeen is what a reconcile observed besides the execution.
type executionSeen struct {
	// run and observed are the look at the workflow and its status query.
	run      runLook
	observed *v1alpha1.KubernetesExecutionStatus
	// decided: the approval request the run waits on carries a decision.
	decided bool
	// held: the open-runs cap keeps the run from starting.
	held bool
}

// observe looks at the execution's workflow, its approval request and the
// open-runs cap. A run that writes its own status (sequence > 0) is not
// queried; its workflow is looked at when the sweep finds it not running.
func (r *ExecutionReconciler) observe(ctx context.Context, kexec *v1alpha1.KubernetesExecution, id string, now time.Time) (executionSeen, error) {
	var seen executionSeen
	var err error
	seen.run, seen.observed, err = observeRun[v1alpha1.KubernetesExecutionStatus](ctx, r.Temporal, &r.checks, id, runSubject{key: ctrlclient.ObjectKeyFromObject(kexec),
		workflowID: kexec.Status.WorkflowID, runID: kexec.Status.RunID, phase: kexec.Status.Phase, sequence: kexec.Status.Sequence})
	if err != nil {
		return seen, lookFailed{err}
	}
	if ref := kexec.Status.ApprovalRequestRef; ref != nil && kexec.Status.Phase == v1alpha1.PhaseWaitingApproval {
		var rar v1alpha1.RemediationApprovalRequest
		if err := r.Get(ctx, ctrlclient.ObjectKey{Namespace: kexec.Namespace, Name: ref.Name}, &rar); err == nil {
			seen.decided = rar.Status.Decision != ""
		}
	}
	seen.held, err = r.held(ctx, kexec, now)
	return seen, err
}

// execute carries out the plan: the start, the one status write, the
// Events and metrics, and the rollback signal.
func (r *ExecutionReconciler) execute(ctx context.Context, kexec *v1alpha1.KubernetesExecution, id string, p executionPlan) (ctrl.Result, error) {
	logger := log.FromContext(ctx)
	if p.start {
		runID, err := r.start(ctx, kexec, id)
		if err != nil {
			return ctrl.Result{}, err
		}
		if p.status != nil {
			// Recorded with the workflow ID: only this run acts for the execution.
			p.status.RunID = runID
		}
		logger.Info("workflow started", "workflowID", id, "runID", runID)
	}
	if p.status != nil {
		kexec.Status = *p.status
		kexec.Status.Target = kexec.Spec.Target.KindName()
		err := r.Status().Update(ctx, kexec)
		if p.start && apierrors.IsConflict(err) {
			// Another write came first; the next reconcile starts again, finds
			// the run just started (USE_EXISTING) and records it. The Started
			// Event holds either way.
			p.requeueAfter, err = firstPushWait, nil
		}
		if err != nil {
			// A conflict means a newer object is queued; the next reconcile mirrors again.
			return ctrl.Result{}, fmt.Errorf("update status: %w", err)
		}
	}
	r.announce(ctx, kexec, p)
	if p.rollback != nil {
		return r.relayRollback(ctx, kexec, id, *p.rollback, p.requeueAfter)
	}
	return ctrl.Result{RequeueAfter: p.requeueAfter}, nil
}

// announce records the plan's Events and metrics.
func (r *ExecutionReconciler) announce(ctx context.Context, kexec *v1alpha1.KubernetesExecution, p executionPlan) {
	for _, e := range p.events {
		if e.reason == reasonStarted {
			if err := recordStarted(ctx, r.Client, kexec, "KubernetesExecution", e.note); err != nil {
				log.FromContext(ctx).Info("Started event not recorded", "error", err.Error())
			}
			continue
		}
		r.Recorder.Eventf(kexec, nil, e.eventType, e.reason, "Reconcile", "%s", e.note)
	}
	if p.limited {
		metrics.OpenRunsLimited.WithLabelValues(kexec.Namespace).Inc()
	}
	for _, e := range p.entered {
		metrics.ExecutionPhases.WithLabelValues(kexec.Spec.Action, e.phase, e.reason).Inc()
		if e.prevPhase != "" {
			metrics.PhaseDuration.WithLabelValues(kexec.Spec.Action, e.prevPhase).Observe(e.prevDuration.Seconds())
		}
	}
}

// relayRollback sends the rollback annotation's signal to the run.
func (r *ExecutionReconciler) relayRollback(ctx context.Context, kexec *v1alpha1.KubernetesExecution, id string, rb workflows.RollbackRequest, requeueAfter time.Duration) (ctrl.Result, error) {
	err := r.Temporal.SignalWorkflow(ctx, id, "", workflows.SignalRollback, rb)
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		// The window closed since the last query: mirror the ended run, whose
		// plan then answers the annotation (planLateRollback).
		return ctrl.Result{RequeueAfter: freshPoll}, nil
	}
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("signal rollback to %s: %w", id, err)
	}
	r.Recorder.Eventf(kexec, nil, corev1.EventTypeNormal, "RollbackRequested", "Rollback", "annotation %s=%q sent the rollback signal", RollbackAnnotation, rb.Reason)
	return ctrl.Result{RequeueAfter: requeueAfter}, nil
}

// held says whether the open-runs cap keeps a run that is about to start
// from starting; a run that may start takes its slot.
func (r *ExecutionReconciler) held(ctx context.Context, kexec *v1alpha1.KubernetesExecution, now time.Time) (bool, error) {
	if kexec.Status.WorkflowID != "" || isStep(kexec) || kexec.Spec.ValidateDurations() != nil {
		return false, nil
	}
	ok, err := r.openRuns.admit(ctx, kexec.Namespace, executionRun(kexec.Name), now)
	return !ok, err
}

// start starts the execution's workflow and returns its run ID, or the
// open run's when it runs already; "" when the ID's run is closed (the
// object's run then stays unrecorded and nothing acts for it).
func (r *ExecutionReconciler) start(ctx context.Context, kexec *v1alpha1.KubernetesExecution, id string) (string, error) {
	return startRun(ctx, r.Temporal, id, "KubernetesExecution", kexec.Spec.Target.String(), workflows.ExecutionWorkflow,
		workflows.ExecutionInput{Namespace: kexec.Namespace, Name: kexec.Name, UID: string(kexec.UID), Spec: kexec.Spec})
}

// startRun starts an object's workflow (kind and target are its search
// attributes) and returns its run ID, or the open run's when it runs
// already; "" when the ID's run is closed.
func startRun(ctx context.Context, c client.Client, id, kind, target string, wf, input any) (string, error) {
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                       id,
		TaskQueue:                workflows.TaskQueue,
		WorkflowIDConflictPolicy: enums.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		WorkflowIDReusePolicy:    enums.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		TypedSearchAttributes: temporal.NewSearchAttributes(
			workflows.AttrKind.ValueSet(kind),
			workflows.AttrTarget.ValueSet(target),
			workflows.AttrPhase.ValueSet(string(v1alpha1.PhasePending)),
		),
	}, wf, input)
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	if errors.As(err, &started) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("start workflow %s: %w", id, err)
	}
	return run.GetRunID(), nil
}

// quietSince is when the execution last changed phase (or was created).
func quietSince(kexec *v1alpha1.KubernetesExecution) time.Time {
	t := kexec.CreationTimestamp.Time
	if n := len(kexec.Status.PhaseTransitions); n > 0 && kexec.Status.PhaseTransitions[n-1].Time.After(t) {
		t = kexec.Status.PhaseTransitions[n-1].Time.Time
	}
	return t
}

// finalize cancels a run that is still going, so deleting an execution stops
// its work. The workflow ID is derived from the object, so a run whose start
// was not yet recorded in status.workflowID (the finalizer is added before
// the start) is canceled too.
func (r *ExecutionReconciler) finalize(ctx context.Context, kexec *v1alpha1.KubernetesExecution, id string) error {
	if !controllerutil.ContainsFinalizer(kexec, Finalizer) {
		return nil
	}
	if !kexec.Status.Phase.Terminal() {
		var nf *serviceerror.NotFound
		err := r.Temporal.CancelWorkflow(ctx, id, "")
		if err != nil && !errors.As(err, &nf) {
			return fmt.Errorf("cancel workflow %s: %w", id, err)
		}
		if err == nil || kexec.Status.WorkflowID != "" {
			r.Recorder.Eventf(kexec, nil, corev1.EventTypeNormal, "Canceled", "Delete", "workflow %s canceled because the execution is being deleted", id)
		}
	}
	before := kexec.DeepCopy()
	controllerutil.RemoveFinalizer(kexec, Finalizer)
	if err := r.Patch(ctx, kexec, ctrlclient.MergeFrom(before)); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("remove finalizer: %w", err)
	}
	return nil
}

func subjectOf(_ context.Context, o ctrlclient.Object) []reconcile.Request {
	rar, ok := o.(*v1alpha1.RemediationApprovalRequest)
	if !ok || rar.Spec.SubjectRef.Kind != "KubernetesExecution" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: rar.Namespace, Name: rar.Spec.SubjectRef.Name}}}
}

// SetupWithManager registers the reconciler.
func (r *ExecutionReconciler) SetupWithManager(mgr ctrl.Manager) error {
	r.swept = newSweptKind(&r.checks)
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.KubernetesExecution{}).
		// A decision on the approval request wakes its subject at once.
		Watches(&v1alpha1.RemediationApprovalRequest{}, handler.EnqueueRequestsFromMapFunc(subjectOf)).
		WatchesRawSource(r.swept.source()).
		Named("kubernetesexecution").
		Complete(requeueOnConflict(r))
}
