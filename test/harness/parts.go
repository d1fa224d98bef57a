package harness

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/remedy-dev/remedy/internal/devcompose"
)

// StartOperator runs the whole operator, its admission webhooks included, as
// remedy-operator until stop is called or the test ends: stopping it also takes the approval
// and requester webhooks down, as an operator restart does.
func StartOperator(t testing.TB) (stop func()) {
	t.Helper()
	return StartOperatorWith(t, remedyOpts)
}

// StartOperatorWith is StartOperator with options of the test's own, such as
// a tiny open-runs cap.
func StartOperatorWith(t testing.TB, o devcompose.RemedyOptions) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	mgr, err := devcompose.NewOperator(ctx, env, o)
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	require.True(t, mgr.GetCache().WaitForCacheSync(ctx))
	started := mgr.GetWebhookServer().StartedChecker()
	require.Eventually(t, func() bool { return started(&http.Request{}) == nil }, 10*time.Second, 50*time.Millisecond, "webhook server did not start")
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); require.NoError(t, <-done) }) }
	t.Cleanup(stop)
	return stop
}
