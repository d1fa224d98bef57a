package operator

import (
	"context"
	"fmt"
	"time"

	"go.temporal.io/sdk/client"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/metrics"
	"github.com/remedy-dev/remedy/workflows"
)

// RemediationReconciler turns each RemediationRequest into one
// RemediationWorkflow. The workflow writes .status; a run none of whose writes
// landed (status.sequence 0) has its status query mirrored here.
type RemediationReconciler struct {
	ctrlclient.Client
	Temporal client.Client
	Recorder events.EventRecorder
	Clock    clock.PassiveClock
	checks   runChecks
	// swept: see ExecutionReconciler.swept.
	swept *sweptKind
	// openRuns: see ExecutionReconciler.openRuns.
	openRuns *openRuns
}

// +kubebuilder:rbac:groups=remedy.dev,resources=remediationrequests,verbs=get;list;watch
// The requester webhook reads the rule an alert's RemediationRequest names.
// +kubebuilder:rbac:groups=remedy.dev,resources=remediationrules,verbs=get
// +kubebuilder:rbac:groups=remedy.dev,resources=remediationrequests/status,verbs=update

// Reconcile observes the request and its workflow, plans, then starts or writes status.
func (r *RemediationReconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, _ error) {
	var rr v1alpha1.RemediationRequest
	if err := r.Get(ctx, req.NamespacedName, &rr); err != nil {
		r.checks.forget(req.NamespacedName)
		return ctrl.Result{}, ctrlclient.IgnoreNotFound(err)
	}
	if !rr.DeletionTimestamp.IsZero() {
		// Owned step executions cancel their own workflows, which ends this one.
		r.checks.forget(req.NamespacedName)
		return ctrl.Result{}, nil
	}
	id := v1alpha1.RemediationWorkflowID(rr.Namespace, rr.Name, string(rr.UID))

	// A run started before v0.2 is recorded once it is open (run_binding.go).
	if needsRun(rr.Status.WorkflowID, rr.Status.RunID, rr.Status.Phase) {
		recorded, err := r.recordRemediationRun(ctx, &rr, id)
		if err != nil {
			log.FromContext(ctx).Info("workflow run not recorded; retrying", "workflowID", id, "error", err.Error())
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

	// Observe as the execution reconciler does: query runs that do not push,
	// look at those that do when the sweep finds them not running.
	now := r.Clock.Now()
	run, observed, err := observeRun[v1alpha1.RemediationRequestStatus](ctx, r.Temporal, &r.checks, id, runSubject{key: req.NamespacedName,
		workflowID: rr.Status.WorkflowID, runID: rr.Status.RunID, phase: rr.Status.Phase, sequence: rr.Status.Sequence})
	if err != nil {
		log.FromContext(ctx).Info("workflow check failed; retrying", "workflowID", id, "error", err.Error())
		return ctrl.Result{RequeueAfter: queryRetry}, nil
	}

	held, err := r.held(ctx, &rr, now)
	if err != nil {
		return ctrl.Result{}, err
	}

	p := planRemediation(&rr, id, observed, run, now)
	if held {
		p = planHeldRemediation(&rr, r.openRuns.limit, now)
	}
	return r.execute(ctx, &rr, id, p)
}

// held says whether the open-runs cap keeps a run that is about to start
// from starting; a run that may start takes its slot.
func (r *RemediationReconciler) held(ctx context.Context, rr *v1alpha1.RemediationRequest, now time.Time) (bool, error) {
	if rr.Status.WorkflowID != "" || rr.Spec.ValidateDurations() != nil {
		return false, nil
	}
	ok, err := r.openRuns.admit(ctx, rr.Namespace, remediationRun(rr.Name), now)
	return !ok, err
}

// execute carries out the plan: the start, the one status write, the
// Events and the metric.
func (r *RemediationReconciler) execute(ctx context.Context, rr *v1alpha1.RemediationRequest, id string, p plan[v1alpha1.RemediationRequestStatus]) (ctrl.Result, error) {
	if p.start {
		runID, err := r.start(ctx, rr, id)
		if err != nil {
			return ctrl.Result{}, err
		}
		if runID != "" && p.status != nil {
			// Recorded with the workflow ID: only this run acts for the request.
			p.status.RunID = runID
		}
	}
	if p.status != nil {
		rr.Status = *p.status
		rr.Status.Progress = v1alpha1.StepsProgress(rr.Status.Steps, len(rr.Spec.Steps))
		err := r.Status().Update(ctx, rr)
		if p.start && apierrors.IsConflict(err) {
			// Another write came first; the next reconcile starts again and
			// records the run just started (USE_EXISTING).
			p.requeueAfter, err = freshPoll, nil
		}
		if err != nil {
			return ctrl.Result{}, fmt.Errorf("update status: %w", err)
		}
	}
	for _, e := range p.events {
		if e.reason == reasonStarted {
			if err := recordStarted(ctx, r.Client, rr, "RemediationRequest", e.note); err != nil {
				log.FromContext(ctx).Info("Started event not recorded", "error", err.Error())
			}
			continue
		}
		r.Recorder.Eventf(rr, nil, e.eventType, e.reason, "Reconcile", "%s", e.note)
	}
	if p.limited {
		metrics.OpenRunsLimited.WithLabelValues(rr.Namespace).Inc()
	}
	return ctrl.Result{RequeueAfter: p.requeueAfter}, nil
}

// start starts the request's workflow and returns its run ID; "" when the
// ID's run is closed (nothing is recorded then).
func (r *RemediationReconciler) start(ctx context.Context, rr *v1alpha1.RemediationRequest, id string) (string, error) {
	return startRun(ctx, r.Temporal, id, "RemediationRequest", rr.Namespace+"/RemediationRequest/"+rr.Name, workflows.RemediationWorkflow,
		workflows.RemediationInput{Namespace: rr.Namespace, Name: rr.Name, UID: string(rr.UID), Spec: rr.Spec})
}

// planRemediation decides the next status from the request, its workflow's
// status query (nil when not queried; a closed workflow's final status) and
// what a look at the workflow found, as planExecution does. It takes no client.
func planRemediation(rr *v1alpha1.RemediationRequest, workflowID string, observed *v1alpha1.RemediationRequestStatus, run runLook, now time.Time) plan[v1alpha1.RemediationRequestStatus] {
	cur := rr.Status
	if invalid := rr.Spec.ValidateDurations(); invalid != nil && cur.WorkflowID == "" {
		return refuseRemediation(rr, invalid, now)
	}
	if cur.WorkflowID == "" {
		next := cur.DeepCopy()
		next.WorkflowID, next.Phase, next.ObservedGeneration = workflowID, v1alpha1.PhasePending, rr.Generation
		next.Reason, next.Message = "", "" // no longer held back by the open-runs cap
		setCondition(&next.Conditions, next.Phase, next.Reason, next.Message, rr.Generation, now)
		return plan[v1alpha1.RemediationRequestStatus]{start: true, status: next, requeueAfter: freshPoll,
			events: []event{{corev1.EventTypeNormal, reasonStarted, "workflow " + workflowID + " started"}}}
	}
	if !cur.Phase.Terminal() {
		if run.state == runMissing && cur.Sequence == 0 && now.Sub(rr.CreationTimestamp.Time) < missingGrace {
			return plan[v1alpha1.RemediationRequestStatus]{requeueAfter: queryRetry}
		}
		var final *v1alpha1.Phase
		if observed != nil {
			final = &observed.Phase
		}
		if msg := lostMessage(cur.WorkflowID, cur.Phase, run, final); msg != "" {
			// The sequence stays: should the workflow write after all, its write wins.
			next := cur.DeepCopy()
			next.Phase, next.Reason, next.Message, next.ObservedGeneration = v1alpha1.PhaseFailed, v1alpha1.ReasonWorkflowLost, msg, rr.Generation
			setCondition(&next.Conditions, next.Phase, next.Reason, next.Message, rr.Generation, now)
			return plan[v1alpha1.RemediationRequestStatus]{status: next,
				events: []event{{corev1.EventTypeWarning, string(next.Phase), joinReason(next.Reason, next.Message)}}}
		}
	}
	late := run.state == runClosed && observed != nil && observed.Phase.Terminal() && !cur.Phase.Terminal() && observed.Sequence >= cur.Sequence
	if cur.Sequence > 0 && !late {
		// The workflow writes its own status; a quiet run is looked at again after run.recheck.
		return plan[v1alpha1.RemediationRequestStatus]{requeueAfter: run.recheck}
	}
	if observed == nil || (observed.Sequence > 0 && !late) {
		// Not queried, or the workflow writes its own status.
		return plan[v1alpha1.RemediationRequestStatus]{}
	}
	next := observed.DeepCopy()
	next.WorkflowID, next.RunID, next.ObservedGeneration, next.Conditions = cur.WorkflowID, cur.RunID, rr.Generation, cur.Conditions
	setCondition(&next.Conditions, next.Phase, next.Reason, next.Message, rr.Generation, now)
	p := plan[v1alpha1.RemediationRequestStatus]{requeueAfter: pollInterval(next.Phase, 0)}
	if next.Phase != cur.Phase || next.Reason != cur.Reason {
		t := corev1.EventTypeNormal
		if next.Phase == v1alpha1.PhaseFailed {
			t = corev1.EventTypeWarning
		}
		p.events = []event{{t, string(next.Phase), joinReason(next.Reason, next.Message)}}
	}
	if !equality.Semantic.DeepEqual(&cur, next) {
		p.status = next
	}
	return p
}

// refuseRemediation fails a request whose spec the schema should have
// refused without starting its workflow, as refuseExecution does.
func refuseRemediation(rr *v1alpha1.RemediationRequest, invalid error, now time.Time) plan[v1alpha1.RemediationRequestStatus] {
	cur := rr.Status
	if cur.Phase == v1alpha1.PhaseFailed && cur.Reason == v1alpha1.ReasonInvalidSpec {
		return plan[v1alpha1.RemediationRequestStatus]{}
	}
	next := cur.DeepCopy()
	next.Phase, next.Reason, next.Message, next.ObservedGeneration = v1alpha1.PhaseFailed, v1alpha1.ReasonInvalidSpec, invalidSpecMessage(invalid), rr.Generation
	setCondition(&next.Conditions, next.Phase, next.Reason, next.Message, rr.Generation, now)
	return plan[v1alpha1.RemediationRequestStatus]{status: next,
		events: []event{{corev1.EventTypeWarning, string(next.Phase), joinReason(next.Reason, next.Message)}}}
}

// remediationQuietSince is when the request's Ready condition last changed
// (or it was created): a request has no phase history.
func remediationQuietSince(rr *v1alpha1.RemediationRequest) time.Time {
	t := rr.CreationTimestamp.Time
	if c := meta.FindStatusCondition(rr.Status.Conditions, v1alpha1.ConditionReady); c != nil && c.LastTransitionTime.After(t) {
		t = c.LastTransitionTime.Time
	}
	return t
}

// SetupWithManager registers the reconciler; step executions wake their request.
func (r *RemediationReconciler) SetupWithManager(mgr ctrl.Manager) error {
	r.swept = newSweptKind(&r.checks)
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.RemediationRequest{}).
		Owns(&v1alpha1.KubernetesExecution{}).
		WatchesRawSource(r.swept.source()).
		Named("remediationrequest").
		Complete(requeueOnConflict(r))
}
