package harness

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/remedy-dev/remedy/operator"
)

// StartReloadOperator runs a reload-only operator with cfg's identity, waits
// for its caches, and returns the function that stops it. Tests use it to
// have an operator they can take down, or a second one as in a leader handoff.
func StartReloadOperator(t testing.TB, cfg *rest.Config) (stop func()) {
	t.Helper()
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:  operator.Scheme(),
		Cache:   operator.CacheOptions(),
		Metrics: metricsserver.Options{BindAddress: "0"},
		// Several operators run in one test process.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	require.NoError(t, err)
	r := &operator.ReloadReconciler{Client: mgr.GetClient(), Live: mgr.GetAPIReader(), Temporal: env.Temporal,
		Recorder: mgr.GetEventRecorder("remedy-operator"), Clock: clock.RealClock{}}
	require.NoError(t, r.SetupWithManager(mgr))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	require.True(t, mgr.GetCache().WaitForCacheSync(ctx))
	return func() { cancel(); require.NoError(t, <-done) }
}
