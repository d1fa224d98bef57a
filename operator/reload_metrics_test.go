package operator

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/remedy-dev/remedy/internal/metrics"
)

func TestConfigMapWatchReconnectsAreCounted(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	defer srv.Close()
	cfg := countConfigMapWatches(&rest.Config{Host: srv.URL})
	rt, err := rest.TransportFor(cfg)
	require.NoError(t, err)
	get := func(path string) {
		t.Helper()
		resp, err := rt.RoundTrip(httptest.NewRequest(http.MethodGet, srv.URL+path, nil).WithContext(context.Background()))
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
	}
	before := testutil.ToFloat64(metrics.ReloadWatchReconnects)
	for _, tc := range []struct {
		path string
		want float64
	}{
		{"/api/v1/configmaps?watch=true&resourceVersion=1", 0}, // the first stream connects
		{"/api/v1/configmaps?resourceVersion=0", 0},            // a list
		{"/apis/apps/v1/deployments?watch=true", 0},            // another resource
		{"/api/v1/configmaps?watch=true&resourceVersion=7", 1},
		{"/api/v1/namespaces/shop/configmaps?watch=true", 2},
	} {
		get(tc.path)
		assert.Equal(t, tc.want, testutil.ToFloat64(metrics.ReloadWatchReconnects)-before, tc.path)
	}
}

func TestConfigMapWatchErrorsAreCounted(t *testing.T) {
	cms := toolscache.NewReflector(&toolscache.ListWatch{}, &corev1.ConfigMap{}, toolscache.NewStore(toolscache.MetaNamespaceKeyFunc), 0)
	pods := toolscache.NewReflector(&toolscache.ListWatch{}, &corev1.Pod{}, toolscache.NewStore(toolscache.MetaNamespaceKeyFunc), 0)
	before := testutil.ToFloat64(metrics.ReloadWatchErrors)
	watchErrorHandler(context.Background(), cms, errors.New("connection refused"))
	watchErrorHandler(context.Background(), cms, io.EOF)
	watchErrorHandler(context.Background(), pods, errors.New("connection refused"))
	assert.Equal(t, 1.0, testutil.ToFloat64(metrics.ReloadWatchErrors)-before, "ConfigMap errors only; EOF is a normal close")
}

func TestLeaderStateFollowsLeadership(t *testing.T) {
	acquired := func() float64 { return testutil.ToFloat64(metrics.ReloadLeaderTransitions.WithLabelValues("acquired")) }
	lost := func() float64 { return testutil.ToFloat64(metrics.ReloadLeaderTransitions.WithLabelValues("lost")) }
	a0, l0 := acquired(), lost()
	require.True(t, leaderMetrics{}.NeedLeaderElection())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- leaderMetrics{}.Start(ctx) }()
	require.Eventually(t, func() bool { return testutil.ToFloat64(metrics.ReloadLeaderState) == 1 }, 5*time.Second, 10*time.Millisecond)
	assert.Equal(t, a0+1, acquired())
	cancel()
	require.NoError(t, <-done)
	assert.Equal(t, 0.0, testutil.ToFloat64(metrics.ReloadLeaderState))
	assert.Equal(t, l0+1, lost())
}
