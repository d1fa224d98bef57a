package operator

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// conflictRetry is how soon a reconcile that lost a write race runs again.
const conflictRetry = 200 * time.Millisecond

// requeueOnConflict retries a reconcile whose write lost a race (409
// Conflict: the object changed since it was read) once the cache has had a
// moment to see the newer object, logging it at debug level. A conflict is the ordinary outcome of two writers, not an
// error: returned as one, controller-runtime logs "Reconciler error" with a
// stack trace and backs off.
func requeueOnConflict(r reconcile.Reconciler) reconcile.Reconciler {
	return reconcile.Func(func(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
		res, err := r.Reconcile(ctx, req)
		if err != nil && apierrors.IsConflict(err) {
			log.FromContext(ctx).V(1).Info("write conflicted with another; reconciling again", "error", err.Error())
			return ctrl.Result{RequeueAfter: conflictRetry}, nil
		}
		return res, err
	})
}
