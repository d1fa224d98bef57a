package operator

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"

	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/remedy-dev/remedy/internal/metrics"
)

// leaderMetrics runs only on the elected replica, so its Start is the
// moment leadership is acquired and its context's end the moment it is lost.
type leaderMetrics struct{}

func (leaderMetrics) NeedLeaderElection() bool { return true }

func (leaderMetrics) Start(ctx context.Context) error {
	metrics.ReloadLeaderState.Set(1)
	metrics.ReloadLeaderTransitions.WithLabelValues("acquired").Inc()
	<-ctx.Done()
	metrics.ReloadLeaderState.Set(0)
	metrics.ReloadLeaderTransitions.WithLabelValues("lost").Inc()
	return nil
}

// configMapType is how client-go's reflector describes the ConfigMap informer.
const configMapType = "*v1.ConfigMap"

// watchErrorHandler counts the ConfigMap informer's list-and-watch failures,
// then logs them as client-go would. A stream the server closed normally (EOF)
// is no error.
func watchErrorHandler(ctx context.Context, r *toolscache.Reflector, err error) {
	if r.TypeDescription() == configMapType && err != io.EOF {
		metrics.ReloadWatchErrors.Inc()
	}
	toolscache.DefaultWatchErrorHandler(ctx, r, err)
}

// countConfigMapWatches wraps cfg's transport so every ConfigMap watch
// request after the first counts as a reconnect: client-go reopens the
// stream itself (server timeouts, errors, relists) and exposes no hook for it.
func countConfigMapWatches(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	var opened atomic.Bool
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			if isConfigMapWatch(req) && opened.Swap(true) {
				metrics.ReloadWatchReconnects.Inc()
			}
			return rt.RoundTrip(req)
		})
	})
	return cfg
}

// isConfigMapWatch matches cluster-wide and namespaced ConfigMap watches.
func isConfigMapWatch(req *http.Request) bool {
	return req.Method == http.MethodGet && req.URL.Query().Get("watch") == "true" &&
		strings.HasPrefix(req.URL.Path, "/api/v1/") && strings.HasSuffix(req.URL.Path, "/configmaps")
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
