package operator

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

func TestRequeueOnConflict(t *testing.T) {
	conflict := apierrors.NewConflict(schema.GroupResource{Group: "remedy.dev", Resource: "kubernetesexecutions"}, "web", errors.New("the object has been modified"))
	other := errors.New("connection refused")
	for _, tc := range []struct {
		name    string
		res     ctrl.Result
		err     error
		wantRes ctrl.Result
		wantErr error
	}{
		{"a wrapped conflict is a quick retry, not an error", ctrl.Result{}, fmt.Errorf("update status: %w", conflict), ctrl.Result{RequeueAfter: conflictRetry}, nil},
		{"another error stays an error", ctrl.Result{}, other, ctrl.Result{}, other},
		{"success passes through", ctrl.Result{RequeueAfter: 5}, nil, ctrl.Result{RequeueAfter: 5}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := requeueOnConflict(reconcile.Func(func(context.Context, ctrl.Request) (ctrl.Result, error) { return tc.res, tc.err }))
			res, err := r.Reconcile(context.Background(), ctrl.Request{})
			assert.Equal(t, tc.wantRes, res)
			assert.Equal(t, tc.wantErr, err)
		})
	}
}
