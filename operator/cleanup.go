package operator

import (
	"context"
	"fmt"
	"time"

	"go.temporal.io/sdk/client"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/remedy-dev/remedy/api/v1alpha1"
)

// +kubebuilder:rbac:groups=remedy.dev,resources=kubernetesexecutions;remediationrequests;remediationapprovalrequests,verbs=delete

// cleanupPlan says what the cleanup of one object does: delete it now, or
// look again after requeueAfter (0: never, nothing will make it due).
type cleanupPlan struct {
	delete       bool
	requeueAfter time.Duration
}

// planCleanup decides from when the object finished (finished false: it has
// not), its spec's ttlSecondsAfterFinished (nil: unset) and the operator's
// default (0: keep), as a Job's TTL controller does. It takes no client.
func planCleanup(finishedAt time.Time, finished bool, ttl *int32, def time.Duration, now time.Time) cleanupPlan {
	if !finished {
		return cleanupPlan{}
	}
	keep := def
	if ttl != nil {
		keep = time.Duration(*ttl) * time.Second
	} else if def <= 0 {
		return cleanupPlan{}
	}
	if due := finishedAt.Add(keep); now.Before(due) {
		return cleanupPlan{requeueAfter: due.Sub(now)}
	}
	return cleanupPlan{delete: true}
}

// approvalFinished is when a request was decided (its decidedAt, else when
// its Ready condition last changed); false while it is undecided.
func approvalFinished(rar *v1alpha1.RemediationApprovalRequest) (time.Time, bool) {
	if rar.Status.Decision == "" {
		return time.Time{}, false
	}
	if rar.Status.DecidedAt != nil {
		return rar.Status.DecidedAt.Time, true
	}
	if c := meta.FindStatusCondition(rar.Status.Conditions, v1alpha1.ConditionReady); c != nil {
		return c.LastTransitionTime.Time, true
	}
	return rar.CreationTimestamp.Time, true
}

// cleanupKind is what the cleanup knows of one resource.
type cleanupKind struct {
	name string
	obj  func() ctrlclient.Object
	// finished says when the object finished, and whether it has; only
	// objects that finished by themselves are cleaned up.
	finished func(ctrlclient.Object) (time.Time, bool)
	ttl      func(ctrlclient.Object) *int32
	// workflowID, when set, names a workflow that must have closed before
	// the object goes: a decided approval request is read again by the
	// write gate of the run that waited for it.
	workflowID func(ctrlclient.Object) string
}

var cleanupKinds = []cleanupKind{
	{
		name: "kubernetesexecution",
		obj:  func() ctrlclient.Object { return &v1alpha1.KubernetesExecution{} },
		finished: func(o ctrlclient.Object) (time.Time, bool) {
			k := o.(*v1alpha1.KubernetesExecution)
			if isStep(k) {
				// A step goes with its RemediationRequest, whose saga may still need it.
				return time.Time{}, false
			}
			return v1alpha1.FinishedAt(k.Status.Phase, k.Status.Conditions)
		},
		ttl: func(o ctrlclient.Object) *int32 {
			return o.(*v1alpha1.KubernetesExecution).Spec.TTLSecondsAfterFinished
		},
	},
	{
		name: "remediationrequest",
		obj:  func() ctrlclient.Object { return &v1alpha1.RemediationRequest{} },
		finished: func(o ctrlclient.Object) (time.Time, bool) {
			rr := o.(*v1alpha1.RemediationRequest)
			return v1alpha1.FinishedAt(rr.Status.Phase, rr.Status.Conditions)
		},
		ttl: func(o ctrlclient.Object) *int32 { return o.(*v1alpha1.RemediationRequest).Spec.TTLSecondsAfterFinished },
	},
	{
		name: "remediationapprovalrequest",
		obj:  func() ctrlclient.Object { return &v1alpha1.RemediationApprovalRequest{} },
		finished: func(o ctrlclient.Object) (time.Time, bool) {
			return approvalFinished(o.(*v1alpha1.RemediationApprovalRequest))
		},
		ttl: func(o ctrlclient.Object) *int32 {
			return o.(*v1alpha1.RemediationApprovalRequest).Spec.TTLSecondsAfterFinished
		},
		workflowID: func(o ctrlclient.Object) string { return o.(*v1alpha1.RemediationApprovalRequest).Spec.WorkflowID },
	},
}

// CleanupReconciler deletes a finished object of its kind once its time to
// live has passed: spec.ttlSecondsAfterFinished, else the operator's
// --ttl-after-finished. Temporal keeps the run's history for its namespace's
// retention. The deletion names the object's UID, so a new object of the
// same name is never deleted in its place; owned objects (steps, approval
// requests) go with their owner through the garbage collector.
type CleanupReconciler struct {
	ctrlclient.Client
	Temporal client.Client
	Clock    clock.PassiveClock
	// Default is the time to live of objects whose spec sets none (0: keep them).
	Default time.Duration
	// CheckInterval is how often an approval request whose workflow still
	// runs is looked at again.
	CheckInterval time.Duration
	kind          cleanupKind
}

// Reconcile observes the object, plans its cleanup and deletes it when due.
func (r *CleanupReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	obj := r.kind.obj()
	if err := r.Get(ctx, req.NamespacedName, obj); err != nil {
		return ctrl.Result{}, ctrlclient.IgnoreNotFound(err)
	}
	if !obj.GetDeletionTimestamp().IsZero() {
		return ctrl.Result{}, nil
	}
	at, finished := r.kind.finished(obj)
	p := planCleanup(at, finished, r.kind.ttl(obj), r.Default, r.Clock.Now())
	if !p.delete {
		return ctrl.Result{RequeueAfter: p.requeueAfter}, nil
	}
	if r.kind.workflowID != nil {
		id := r.kind.workflowID(obj)
		run, _, err := describeRun[struct{}](ctx, r.Temporal, id, "", false)
		if err != nil {
			return ctrl.Result{}, err
		}
		if !run.gone() {
			return ctrl.Result{RequeueAfter: checkInterval(r.CheckInterval)}, nil
		}
	}
	uid := obj.GetUID()
	err := r.Delete(ctx, obj, ctrlclient.Preconditions{UID: &uid}, ctrlclient.PropagationPolicy("Background"))
	if err := ctrlclient.IgnoreNotFound(err); err != nil {
		return ctrl.Result{}, fmt.Errorf("delete finished %s: %w", r.kind.name, err)
	}
	log.FromContext(ctx).Info("finished object deleted after its time to live", "kind", r.kind.name, "finishedAt", at)
	return ctrl.Result{}, nil
}

// setupCleanup registers one cleanup controller per kind.
func setupCleanup(mgr ctrl.Manager, tc client.Client, def, check time.Duration) error {
	for _, k := range cleanupKinds {
		r := &CleanupReconciler{Client: mgr.GetClient(), Temporal: tc, Clock: clock.RealClock{}, Default: def, CheckInterval: check, kind: k}
		if err := ctrl.NewControllerManagedBy(mgr).For(k.obj()).Named(k.name + "-cleanup").Complete(requeueOnConflict(r)); err != nil {
			return fmt.Errorf("set up %s cleanup: %w", k.name, err)
		}
	}
	return nil
}
