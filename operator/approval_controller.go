package operator

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/remedy-dev/remedy/api/v1alpha1"
)

// SubjectIndex is the field index of RARs by spec.subjectRef.name (ADR-040:
// lookup by the subject, not by labels).
const SubjectIndex = "spec.subjectRef.name"

// ApprovalReconciler relays kubectl decisions to the waiting workflow, keeps
// timeRemaining fresh and records each RAR's lifecycle as Events.
type ApprovalReconciler struct {
	ctrlclient.Client
	Temporal client.Client
	Recorder events.EventRecorder
	Clock    clock.PassiveClock
	// CheckInterval is how often the workflow of a request past requiredBy,
	// still running when looked at, is looked at again (0: DefaultWorkflowCheckInterval).
	CheckInterval time.Duration

	checks runChecks
}

// +kubebuilder:rbac:groups=remedy.dev,resources=remediationapprovalrequests,verbs=get;list;watch
// +kubebuilder:rbac:groups=remedy.dev,resources=remediationapprovalrequests/status,verbs=update
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// Reconcile observes the RAR and its subject, plans in a pure function, then
// signals, writes status and records Events as planned.
func (r *ApprovalReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var rar v1alpha1.RemediationApprovalRequest
	if err := r.Get(ctx, req.NamespacedName, &rar); err != nil {
		r.checks.forget(req.NamespacedName)
		return ctrl.Result{}, ctrlclient.IgnoreNotFound(err)
	}
	subject, err := r.observeSubject(ctx, &rar)
	if err != nil {
		return ctrl.Result{}, err
	}
	// Past requiredBy without a decision, the workflow is looked at: its timer
	// decides unless it is gone. Looked at once at requiredBy (the countdown
	// requeues then), then at most once per check interval.
	now := r.Clock.Now()
	var run runLook
	if !expiryCheckDue(&rar, subject, now) {
		r.checks.forget(req.NamespacedName)
	} else {
		due, wait := checkDue(time.Time{}, r.checks.get(req.NamespacedName), now, checkInterval(r.CheckInterval))
		if due {
			var err error
			if run, _, err = describeRun[struct{}](ctx, r.Temporal, rar.Spec.WorkflowID, "", false); err != nil {
				return ctrl.Result{}, err
			}
			r.checks.set(req.NamespacedName, now)
		}
		run.recheck = wait
	}
	p := planApproval(&rar, subject, run, now)

	if p.signal != "" {
		err := r.Temporal.SignalWorkflow(ctx, rar.Spec.WorkflowID, "", p.signal, p.payload)
		var nf *serviceerror.NotFound
		if errors.As(err, &nf) {
			// The run already ended (expired, canceled): the RAR keeps the decision, nothing waits for it.
			// No run is waiting, so the request is not ours to mark as handled.
			r.Recorder.Eventf(&rar, nil, corev1.EventTypeWarning, reasonDecisionIgnored, "Relay", "workflow %s is not running; the decision has no effect", rar.Spec.WorkflowID)
			return ctrl.Result{}, nil
		} else if err != nil {
			return ctrl.Result{}, fmt.Errorf("signal %s to %s: %w", p.signal, rar.Spec.WorkflowID, err)
		}
		log.FromContext(ctx).Info("approval decision relayed", "decision", rar.Status.RequestedDecision.Decision,
			"approver", rar.Status.RequestedDecision.RequestedBy, "via", v1alpha1.DecidedViaKubectl, "workflowID", rar.Spec.WorkflowID)
	}
	if p.status != nil {
		rar.Status = *p.status
		if err := r.Status().Update(ctx, &rar); err != nil {
			return ctrl.Result{}, fmt.Errorf("update status: %w", err)
		}
	}
	for _, e := range p.events {
		r.Recorder.Eventf(&rar, nil, e.eventType, e.reason, "Approval", "%s", e.note)
	}
	return ctrl.Result{RequeueAfter: p.requeueAfter}, nil
}

// observeSubject reads the KubernetesExecution the RAR waits for, in the
// RAR's own namespace: its UID, and whether it is deleted, being deleted or
// finished. Other subjects are not read.
func (r *ApprovalReconciler) observeSubject(ctx context.Context, rar *v1alpha1.RemediationApprovalRequest) (approvalSubject, error) {
	if rar.Spec.SubjectRef.Kind != "KubernetesExecution" {
		return approvalSubject{}, nil
	}
	var k v1alpha1.KubernetesExecution
	err := r.Get(ctx, types.NamespacedName{Namespace: rar.Namespace, Name: rar.Spec.SubjectRef.Name}, &k)
	if apierrors.IsNotFound(err) {
		return approvalSubject{gone: true}, nil
	}
	if err != nil {
		return approvalSubject{}, fmt.Errorf("read subject %s: %w", rar.Spec.SubjectRef.Name, err)
	}
	gone := !k.DeletionTimestamp.IsZero() || (k.Status.Phase.Terminal() && k.Status.Phase != "")
	return approvalSubject{gone: gone, uid: string(k.UID)}, nil
}

// approvalsOf maps an execution to its RARs through the subject index.
func (r *ApprovalReconciler) approvalsOf(ctx context.Context, obj ctrlclient.Object) []reconcile.Request {
	var list v1alpha1.RemediationApprovalRequestList
	if err := r.List(ctx, &list, ctrlclient.InNamespace(obj.GetNamespace()), ctrlclient.MatchingFields{SubjectIndex: obj.GetName()}); err != nil {
		log.FromContext(ctx).Error(err, "list approval requests by subject", "subject", obj.GetName())
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for _, rar := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: rar.Namespace, Name: rar.Name}})
	}
	return reqs
}

// SetupWithManager registers the subject index and the reconciler.
func (r *ApprovalReconciler) SetupWithManager(mgr ctrl.Manager) error {
	err := mgr.GetFieldIndexer().IndexField(context.Background(), &v1alpha1.RemediationApprovalRequest{}, SubjectIndex, func(o ctrlclient.Object) []string {
		if name := o.(*v1alpha1.RemediationApprovalRequest).Spec.SubjectRef.Name; name != "" {
			return []string{name}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("index approval requests by subject: %w", err)
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.RemediationApprovalRequest{}).
		Watches(&v1alpha1.KubernetesExecution{}, handler.EnqueueRequestsFromMapFunc(r.approvalsOf)).
		Named("remediationapprovalrequest").
		Complete(requeueOnConflict(r))
}
