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
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/workflows"
)

// RemediationReconciler turns each RemediationRequest into one
// RemediationWorkflow. The workflow writes .status; runs started before it did
// have their status query mirrored here.
type RemediationReconciler struct {
	ctrlclient.Client
	Temporal client.Client
	Recorder events.EventRecorder
	Clock    clock.PassiveClock
}

// +kubebuilder:rbac:groups=remedy.dev,resources=remediationrequests,verbs=get;list;watch
// +kubebuilder:rbac:groups=remedy.dev,resources=remediationrequests/status,verbs=get;update;patch

// Reconcile observes the request and its workflow, plans, then starts or writes status.
func (r *RemediationReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var rr v1alpha1.RemediationRequest
	if err := r.Get(ctx, req.NamespacedName, &rr); err != nil {
		return ctrl.Result{}, ctrlclient.IgnoreNotFound(err)
	}
	if !rr.DeletionTimestamp.IsZero() {
		// Owned step executions cancel their own workflows, which ends this one.
		return ctrl.Result{}, nil
	}
	id := workflows.RemediationWorkflowID(rr.Namespace, rr.Name, string(rr.UID))

	var observed *v1alpha1.RemediationRequestStatus
	if rr.Status.WorkflowID != "" && !rr.Status.Phase.Terminal() && rr.Status.Sequence == 0 {
		var s v1alpha1.RemediationRequestStatus
		v, err := r.Temporal.QueryWorkflow(ctx, id, "", workflows.QueryStatus)
		if err == nil {
			err = v.Get(&s)
		}
		if err != nil {
			log.FromContext(ctx).Info("status query failed; retrying", "workflowID", id, "error", err.Error())
			return ctrl.Result{RequeueAfter: queryRetry}, nil
		}
		observed = &s
	}

	p := planRemediation(&rr, id, observed, r.Clock.Now())

	if p.start {
		_, err := r.Temporal.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
			ID:                       id,
			TaskQueue:                workflows.TaskQueue,
			WorkflowIDConflictPolicy: enums.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
			WorkflowIDReusePolicy:    enums.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
			TypedSearchAttributes: temporal.NewSearchAttributes(
				workflows.AttrKind.ValueSet("RemediationRequest"),
				workflows.AttrTarget.ValueSet(rr.Namespace+"/RemediationRequest/"+rr.Name),
				workflows.AttrPhase.ValueSet(string(v1alpha1.PhasePending)),
			),
		}, workflows.RemediationWorkflow, workflows.RemediationInput{Namespace: rr.Namespace, Name: rr.Name, UID: string(rr.UID), Spec: rr.Spec})
		var started *serviceerror.WorkflowExecutionAlreadyStarted
		if err != nil && !errors.As(err, &started) {
			return ctrl.Result{}, fmt.Errorf("start workflow %s: %w", id, err)
		}
	}
	if p.status != nil {
		rr.Status = *p.status
		err := r.Status().Update(ctx, &rr)
		if p.start && apierrors.IsConflict(err) {
			// The run just started may have written its first phase already.
			p.requeueAfter, err = freshPoll, nil
		}
		if err != nil {
			return ctrl.Result{}, fmt.Errorf("update status: %w", err)
		}
	}
	for _, e := range p.events {
		r.Recorder.Eventf(&rr, nil, e.eventType, e.reason, "Reconcile", "%s", e.note)
	}
	return ctrl.Result{RequeueAfter: p.requeueAfter}, nil
}

// planRemediation decides the next status from the request and its workflow's
// status query (nil when not queried). It takes no client.
func planRemediation(rr *v1alpha1.RemediationRequest, workflowID string, observed *v1alpha1.RemediationRequestStatus, now time.Time) plan[v1alpha1.RemediationRequestStatus] {
	cur := rr.Status
	if invalid := rr.Spec.ValidateDurations(); invalid != nil && cur.WorkflowID == "" {
		return refuseRemediation(rr, invalid, now)
	}
	if cur.WorkflowID == "" {
		next := cur.DeepCopy()
		next.WorkflowID, next.Phase, next.ObservedGeneration = workflowID, v1alpha1.PhasePending, rr.Generation
		setCondition(&next.Conditions, next.Phase, next.Reason, next.Message, rr.Generation, now)
		return plan[v1alpha1.RemediationRequestStatus]{start: true, status: next, requeueAfter: freshPoll,
			events: []event{{corev1.EventTypeNormal, "Started", "workflow " + workflowID + " started"}}}
	}
	if observed == nil || observed.Sequence > 0 {
		// Not queried, or the workflow writes its own status.
		return plan[v1alpha1.RemediationRequestStatus]{}
	}
	next := observed.DeepCopy()
	next.WorkflowID, next.ObservedGeneration, next.Conditions = cur.WorkflowID, rr.Generation, cur.Conditions
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
	if cur.Phase == v1alpha1.PhaseFailed && cur.Reason == ReasonInvalidSpec {
		return plan[v1alpha1.RemediationRequestStatus]{}
	}
	next := cur.DeepCopy()
	next.Phase, next.Reason, next.Message, next.ObservedGeneration = v1alpha1.PhaseFailed, ReasonInvalidSpec, invalidSpecMessage(invalid), rr.Generation
	setCondition(&next.Conditions, next.Phase, next.Reason, next.Message, rr.Generation, now)
	return plan[v1alpha1.RemediationRequestStatus]{status: next,
		events: []event{{corev1.EventTypeWarning, string(next.Phase), joinReason(next.Reason, next.Message)}}}
}

// SetupWithManager registers the reconciler; step executions wake their request.
func (r *RemediationReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.RemediationRequest{}).
		Owns(&v1alpha1.KubernetesExecution{}).
		Named("remediationrequest").
		Complete(r)
}
