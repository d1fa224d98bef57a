package alerts

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/alertmanager"
	"github.com/remedy-dev/remedy/internal/devenv"
	"github.com/remedy-dev/remedy/internal/metrics"
	"github.com/remedy-dev/remedy/test/harness"
	"github.com/remedy-dev/remedy/workflows"
)

// recorder forwards webhook notifications to the receiver unchanged and
// keeps each body, so a test can replay exactly what Alertmanager sent.
type recorder struct {
	target string
	mu     sync.Mutex
	bodies [][]byte
}

func (r *recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	r.bodies = append(r.bodies, body)
	r.mu.Unlock()
	out, err := http.NewRequestWithContext(req.Context(), http.MethodPost, r.target, bytes.NewReader(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	out.Header = req.Header.Clone()
	resp, err := http.DefaultClient.Do(out)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}

func (r *recorder) recorded() [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([][]byte(nil), r.bodies...)
}

// secondReplica starts another Alertmanager routed like the harness's to
// the receiver, through a recorder. The two are not clustered: each
// delivers every alert it holds, which is what HA Alertmanager falls back
// to whenever its gossip lags or a peer is unreachable.
func secondReplica(t testing.TB) (*devenv.Alertmanager, *recorder) {
	t.Helper()
	rec := &recorder{target: harness.AlertsURL()}
	proxy := httptest.NewServer(rec)
	t.Cleanup(proxy.Close)
	token := filepath.Join(t.TempDir(), "alerts-token")
	require.NoError(t, os.WriteFile(token, []byte(harness.AlertsToken()), 0o600))
	bin, err := devenv.AlertmanagerBinary(harness.Root)
	require.NoError(t, err)
	am, err := devenv.StartAlertmanager(context.Background(), devenv.AlertmanagerOptions{Binary: bin, DieWithParent: true,
		Config: devenv.RouteToRemedy(proxy.URL+"/alerts", token, "1s", "1s", "1h")})
	require.NoError(t, err)
	t.Cleanup(func() { _ = am.Stop() })
	return am, rec
}

// The same alert posted to two Alertmanager replicas reaches the receiver
// from both, and the notification one of them sent is replayed byte for
// byte twice more: every delivery is answered 200, and all fold into one
// run, which starts one remediation. Within alerts.RedeliveryWindow the
// receiver does not even signal the run again for an alert it handed over.
func TestTwoReplicasAndAReplayedNotificationAreOneRun(t *testing.T) {
	ns := tenant(t, "web")
	rule := createRule(t, restartRule(ns, "ha", "HADup"))
	replica, rec := secondReplica(t)
	accepted := func() float64 { return testutil.ToFloat64(metrics.AlertsReceived.WithLabelValues("accepted")) }
	before := accepted()
	l := labels(ns, "HADup", "deployment", "web")
	a := amAlert{Labels: l, StartsAt: time.Now().Add(-time.Second), EndsAt: time.Now().Add(time.Hour)}
	var wg sync.WaitGroup
	for _, am := range []*devenv.Alertmanager{harness.Alertmanager(), replica} {
		wg.Go(func() { postTo(t, am, a) })
	}
	wg.Wait()

	fp := alertmanager.Fingerprint(l)
	id := v1alpha1.AlertWorkflowID(ns, rule.Name, fp)
	ruleStatus(t, rule, 60*time.Second, func(r *v1alpha1.RemediationRule) bool {
		rec := record(r, fp)
		return rec != nil && rec.Phase == v1alpha1.AlertDone
	})
	require.Eventually(t, func() bool { return len(rec.recorded()) > 0 && accepted()-before >= 2 }, 30*time.Second, 200*time.Millisecond,
		"both replicas delivered the alert")
	signals := harness.SignalsReceived(t, id, workflows.SignalAlert)

	body := rec.recorded()[0]
	redelivered := testutil.ToFloat64(metrics.AlertsRedelivered)
	for range 2 {
		assert.Equal(t, http.StatusOK, notifyRaw(t, harness.AlertsToken(), body))
	}
	assert.GreaterOrEqual(t, accepted()-before, 4.0, "the replays were read and accepted")
	assert.Equal(t, signals, harness.SignalsReceived(t, id, workflows.SignalAlert), "handed over already: no signal again")
	assert.Equal(t, 2.0, testutil.ToFloat64(metrics.AlertsRedelivered)-redelivered, "each replay counted as redelivered")
	r := ruleStatus(t, rule, time.Second, func(*v1alpha1.RemediationRule) bool { return true })
	assert.Equal(t, int64(1), r.Status.Matches)
	assert.Equal(t, int64(1), r.Status.RunsStarted)
	assert.Len(t, requestsOf(t, ns, rule.Name), 1)
}
