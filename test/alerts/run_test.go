package alerts

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/alertmanager"
	"github.com/remedy-dev/remedy/test/harness"
)

// An alert posted to Alertmanager reaches the rule, which restarts the
// Deployment its label names, in its author's name.
func TestAlertRestartsTheDeploymentInTheAuthorsName(t *testing.T) {
	ns := tenant(t, "web")
	rule := createRule(t, restartRule(ns, "latency", "HighLatency"))
	l := labels(ns, "HighLatency", "deployment", "web")
	fire(t, l)

	fp := alertmanager.Fingerprint(l)
	r := ruleStatus(t, rule, 60*time.Second, func(r *v1alpha1.RemediationRule) bool {
		rec := record(r, fp)
		return rec != nil && rec.Phase == v1alpha1.AlertDone
	})
	rec := record(r, fp)
	assert.Equal(t, int64(1), r.Status.Matches)
	assert.Equal(t, int64(1), r.Status.RunsStarted)
	assert.Equal(t, "Deployment/web", rec.Target)
	assert.Equal(t, "http://prometheus.invalid/graph?g0.expr=up", rec.GeneratorURL)
	rrs := requestsOf(t, ns, rule.Name)
	require.Len(t, rrs, 1)
	assert.Equal(t, alertAuthor, rrs[0].Spec.Requester.Username, "the run is the author's")
	assert.Equal(t, v1alpha1.PhaseCompleted, rrs[0].Status.Phase, rrs[0].Status.Message)
	var d appsv1.Deployment
	require.NoError(t, harness.Kube().Get(context.Background(), ctrlclient.ObjectKey{Namespace: ns, Name: "web"}, &d))
	assert.NotEmpty(t, d.Spec.Template.Annotations["kubectl.kubernetes.io/restartedAt"], "restarted")

	resolve(t, l)
	id := v1alpha1.AlertWorkflowID(ns, rule.Name, fp)
	harness.WaitClosed(t, id, 30*time.Second)
	harness.ReplayHistory(t, id, "alert-done.json")
}
