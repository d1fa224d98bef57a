package alerts

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/alertmanager"
	"github.com/remedy-dev/remedy/internal/alertrule"
	"github.com/remedy-dev/remedy/internal/metrics"
	"github.com/remedy-dev/remedy/test/harness"
	"github.com/remedy-dev/remedy/workflows"
)

func TestReceiverRefusesWhatItCannotTrust(t *testing.T) {
	l := labels("nowhere", "Abuse")
	ok := message("firing", time.Now(), l)
	bad := message("firing", time.Now(), l)
	bad.Alerts[0].Fingerprint = "0123456789abcdef"
	for _, tc := range []struct {
		name  string
		token string
		body  func(t *testing.T) int
		want  int
	}{
		{"no token", "", nil, http.StatusUnauthorized},
		{"wrong token", "not-the-token", nil, http.StatusUnauthorized},
		{"body over the cap", harness.AlertsToken(), func(t *testing.T) int {
			return notifyRaw(t, harness.AlertsToken(), []byte(`{"version":"4","alerts":[],"pad":"`+strings.Repeat("x", 300<<10)+`"}`))
		}, http.StatusRequestEntityTooLarge},
		{"not JSON", harness.AlertsToken(), func(t *testing.T) int { return notifyRaw(t, harness.AlertsToken(), []byte("{")) }, http.StatusBadRequest},
		{"version 3", harness.AlertsToken(), func(t *testing.T) int {
			m := ok
			m.Version = "3"
			return notify(t, harness.AlertsToken(), m)
		}, http.StatusBadRequest},
		{"fingerprint not of its labels", harness.AlertsToken(), func(t *testing.T) int { return notify(t, harness.AlertsToken(), bad) }, http.StatusBadRequest},
		{"authenticated and well formed", harness.AlertsToken(), nil, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got int
			if tc.body != nil {
				got = tc.body(t)
			} else {
				got = notify(t, tc.token, ok)
			}
			assert.Equal(t, tc.want, got)
		})
	}
}

// A rule whose template names another namespace, or a templated one, is
// refused at admission, naming the field.
func TestRuleTargetingAnotherNamespaceIsRefused(t *testing.T) {
	ns := tenant(t, "web")
	for _, target := range []string{"kube-system", "{{ .Labels.namespace }}"} {
		r := restartRule(ns, "escape", "Escape")
		r.Spec.Template.Steps[0].Execution.Target.Namespace = target
		err := impersonating(t, alertAuthor).Create(context.Background(), r)
		require.Error(t, err, target)
		assert.True(t, apierrors.IsInvalid(err), "want 422, got %v", err)
		assert.Contains(t, err.Error(), "spec.template.steps[0].execution.target.namespace")
	}
}

// A rule author without execute on the template's actions is refused, naming the grant.
func TestRuleAuthorWithoutExecuteIsRefused(t *testing.T) {
	ns := tenant(t, "web")
	grantRules(t, ns, "rule-writer", rbacv1.PolicyRule{APIGroups: []string{"remedy.dev"}, Resources: []string{"remediationrules"}, Verbs: []string{"create"}})
	err := impersonating(t, "rule-writer").Create(context.Background(), restartRule(ns, "noexec", "NoExec"))
	require.Error(t, err)
	assert.True(t, apierrors.IsForbidden(err), "want 403, got %v", err)
	assert.Contains(t, err.Error(), `cannot execute resource "actions"`)
	assert.Contains(t, err.Error(), `"restart"`)
}

// An alert whose namespace label names another tenant's namespace matches
// no rule of this one, and nothing in either namespace changes.
func TestAlertNamingAnotherTenantsNamespaceMatchesNothing(t *testing.T) {
	mine := tenant(t, "web")
	theirs := tenant(t, "web")
	rule := createRule(t, restartRule(mine, "mine", "CrossTenant"))
	l := labels(theirs, "CrossTenant", "deployment", "web")
	fire(t, l)
	// The receiver answers once it has handed an alert on: given this one
	// itself, it started no run of the rule.
	assert.Equal(t, http.StatusOK, notify(t, harness.AlertsToken(), message("firing", time.Now(), l)))
	requireNoRun(t, v1alpha1.AlertWorkflowID(mine, rule.Name, alertmanager.Fingerprint(l)))
	got := ruleStatus(t, rule, time.Second, func(*v1alpha1.RemediationRule) bool { return true })
	assert.Zero(t, got.Status.Matches)
	for _, ns := range []string{mine, theirs} {
		var d appsv1.Deployment
		require.NoError(t, harness.Kube().Get(context.Background(), ctrlclient.ObjectKey{Namespace: ns, Name: "web"}, &d))
		assert.Empty(t, d.Spec.Template.Annotations["kubectl.kubernetes.io/restartedAt"], ns)
	}
}

// Alert workflows started by hand, as only someone with Temporal access
// could, verify their input and write nothing.
func TestForgedAlertStartsWriteNothing(t *testing.T) {
	ns := tenant(t, "web")
	rule := createRule(t, restartRule(ns, "forged", "Forged"))
	l := labels(ns, "Forged", "deployment", "web")
	fp := alertmanager.Fingerprint(l)
	in := workflows.AlertInput{Namespace: ns, Rule: rule.Name, Alert: alertrule.Alert{Labels: l, Fingerprint: fp, StartsAt: time.Now()}}
	other := in
	other.Alert.Labels = labels(ns, "Forged", "deployment", "other")
	theirs := tenant(t, "web")
	elsewhere := in
	elsewhere.Namespace = theirs
	ghost := in
	ghost.Rule = "no-such-rule"
	unmatched := in
	unmatched.Alert.Labels = labels(ns, "NotForged", "deployment", "web")
	unmatched.Alert.Fingerprint = alertmanager.Fingerprint(unmatched.Alert.Labels)
	for _, tc := range []struct {
		name string
		id   string
		in   workflows.AlertInput
		want string
	}{
		{"under another ID", v1alpha1.AlertWorkflowID(ns, rule.Name, fp) + "-forged", in, "is not the workflow of alert"},
		{"an alert Alertmanager does not hold", v1alpha1.AlertWorkflowID(ns, rule.Name, fp), in, "not firing in Alertmanager"},
		{"labels that are not the fingerprint's", v1alpha1.AlertWorkflowID(ns, rule.Name, fp), other, "is not the fingerprint"},
		{"another namespace's subject under this alert's ID", v1alpha1.AlertWorkflowID(ns, rule.Name, fp), elsewhere, "is not the workflow of alert"},
		{"another rule's ID", v1alpha1.AlertWorkflowID(ns, "other-rule", fp), in, "is not the workflow of alert"},
		{"a rule that does not exist", v1alpha1.AlertWorkflowID(ns, ghost.Rule, fp), ghost, "not found"},
		{"an alert the rule does not match", v1alpha1.AlertWorkflowID(ns, rule.Name, unmatched.Alert.Fingerprint), unmatched, "does not match the alert's labels"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run, err := harness.Temporal().ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: tc.id, TaskQueue: workflows.TaskQueue}, workflows.AlertWorkflow, tc.in)
			require.NoError(t, err)
			var res workflows.AlertResult
			require.NoError(t, run.Get(context.Background(), &res))
			assert.Equal(t, v1alpha1.AlertRefused, res.Phase)
			assert.Equal(t, v1alpha1.ReasonSubjectMismatch, res.Reason)
			assert.Contains(t, res.Message, tc.want)
			if tc.name == "under another ID" {
				harness.ReplayHistory(t, tc.id, "alert-subject-mismatch.json")
			}
		})
	}
	assert.Empty(t, requestsOf(t, ns, rule.Name))
	assert.Empty(t, requestsOf(t, theirs, rule.Name))
	got := ruleStatus(t, rule, time.Second, func(*v1alpha1.RemediationRule) bool { return true })
	assert.Zero(t, got.Status.Matches, "a forged start is not even counted")
}

// With Temporal unreachable the receiver answers 503, so Alertmanager
// keeps the notification and retries it; once Temporal is back the retry
// delivers it and the alert runs.
func TestTemporalDownAnswers503AndAlertmanagerRetries(t *testing.T) {
	ns := tenant(t, "web")
	rule := createRule(t, restartRule(ns, "retry", "Retried"))
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := dead.Addr().String()
	require.NoError(t, dead.Close())
	down, err := client.NewLazyClient(client.Options{HostPort: addr})
	require.NoError(t, err)
	defer down.Close()
	harness.SetAlertsTemporal(down)
	t.Cleanup(func() { harness.SetAlertsTemporal(nil) })

	l := labels(ns, "Retried", "deployment", "web")
	assert.Equal(t, http.StatusServiceUnavailable, notify(t, harness.AlertsToken(), message("firing", time.Now(), l)))
	unavailable := received("temporal_unavailable")
	fire(t, l)
	require.Eventually(t, func() bool { return received("temporal_unavailable") > unavailable }, 60*time.Second, 100*time.Millisecond,
		"Alertmanager's notification did not meet the outage")
	got := ruleStatus(t, rule, time.Second, func(*v1alpha1.RemediationRule) bool { return true })
	assert.Zero(t, got.Status.Matches, "nothing reached Temporal")

	harness.SetAlertsTemporal(nil)
	fp := alertmanager.Fingerprint(l)
	ruleStatus(t, rule, 90*time.Second, func(r *v1alpha1.RemediationRule) bool {
		rec := record(r, fp)
		return rec != nil && rec.Phase == v1alpha1.AlertDone
	})
}

// A suspended rule starts nothing: the receiver skips it, and a run
// started for it anyway (by hand) ends Suspended.
func TestSuspendedRuleStartsNothing(t *testing.T) {
	ns := tenant(t, "web")
	r := restartRule(ns, "suspended", "Suspended")
	r.Spec.Suspend = true
	rule := createRule(t, r)
	l := labels(ns, "Suspended", "deployment", "web")
	fp := alertmanager.Fingerprint(l)
	fire(t, l)
	// The receiver answers once it has handed an alert on: given this one itself, it skipped the rule.
	assert.Equal(t, http.StatusOK, notify(t, harness.AlertsToken(), message("firing", time.Now(), l)))
	id := v1alpha1.AlertWorkflowID(ns, rule.Name, fp)
	requireNoRun(t, id)

	run, err := harness.Temporal().ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: id, TaskQueue: workflows.TaskQueue}, workflows.AlertWorkflow,
		workflows.AlertInput{Namespace: ns, Rule: rule.Name, Alert: alertrule.Alert{Labels: l, Fingerprint: fp, StartsAt: time.Now()}})
	require.NoError(t, err)
	var res workflows.AlertResult
	require.NoError(t, run.Get(context.Background(), &res))
	assert.Equal(t, v1alpha1.ReasonAlertSuspended, res.Reason)
	assert.Empty(t, requestsOf(t, ns, rule.Name))
	harness.ReplayHistory(t, id, "alert-suspended.json")
}

// received is the receiver's count of alerts read with result.
func received(result string) float64 {
	return testutil.ToFloat64(metrics.AlertsReceived.WithLabelValues(result))
}

// requireNoRun fails unless Temporal has no workflow id.
func requireNoRun(t *testing.T, id string) {
	t.Helper()
	_, err := harness.Temporal().DescribeWorkflowExecution(context.Background(), id, "")
	var notFound *serviceerror.NotFound
	require.ErrorAs(t, err, &notFound, "the receiver started run %s", id)
}
