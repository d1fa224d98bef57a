// Package alerts tests alert-driven remediation end to end: alerts are
// posted to a real Alertmanager's API, which routes them through a real
// webhook_config (bearer auth, group_by, send_resolved) to Remedy's
// receiver; runs go through the real API server and Temporal.
package alerts

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/devenv"
	"github.com/remedy-dev/remedy/operator"
	"github.com/remedy-dev/remedy/test/harness"
)

func TestMain(m *testing.M) {
	os.Exit(harness.Main(m, harness.Options{Remedy: true, Alerts: &harness.AlertsOptions{MaxBodyBytes: 256 << 10}}))
}

// alertAuthor may write RemediationRules and run restart and scale in a test's namespace.
const alertAuthor = "alert-author"

// tenant makes a namespace with deployments and an author who may restart them.
func tenant(t testing.TB, deployments ...string) string {
	t.Helper()
	ns := harness.Namespace(t)
	for _, d := range deployments {
		harness.Deployment(t, ns, d, 1)
	}
	grantRules(t, ns, alertAuthor,
		rbacv1.PolicyRule{APIGroups: []string{"remedy.dev"}, Resources: []string{"remediationrules"}, Verbs: []string{"create", "get", "update", "patch"}},
		rbacv1.PolicyRule{APIGroups: []string{"remedy.dev"}, Resources: []string{"actions"}, ResourceNames: []string{"restart", "scale"}, Verbs: []string{"execute"}})
	return ns
}

func grantRules(t testing.TB, ns, user string, rules ...rbacv1.PolicyRule) {
	t.Helper()
	ctx := context.Background()
	name := "alerts-" + user
	subject := []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}
	require.NoError(t, harness.Kube().Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Rules: rules}))
	require.NoError(t, harness.Kube().Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name}, Subjects: subject}))
}

func impersonating(t testing.TB, user string) ctrlclient.Client {
	t.Helper()
	cfg := rest.CopyConfig(harness.Config())
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
	c, err := ctrlclient.New(cfg, ctrlclient.Options{Scheme: operator.Scheme()})
	require.NoError(t, err)
	return c
}

// restartRule restarts the Deployment the alert's deployment label names.
func restartRule(ns, name, alertname string) *v1alpha1.RemediationRule {
	return &v1alpha1.RemediationRule{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: v1alpha1.RemediationRuleSpec{
		Matchers: []string{fmt.Sprintf("alertname=%q", alertname)},
		Cooldown: v1alpha1.DurationOf(0),
		Template: v1alpha1.RemediationTemplate{Steps: []v1alpha1.RemediationStep{{Name: "restart", Execution: v1alpha1.KubernetesExecutionSpec{
			Action: "restart", Target: v1alpha1.ObjectRef{APIVersion: "apps/v1", Kind: "Deployment", Name: "{{ .Labels.deployment }}"}}}}},
	}}
}

// createRule creates the rule as the author; the webhook stamps them.
func createRule(t testing.TB, r *v1alpha1.RemediationRule) *v1alpha1.RemediationRule {
	t.Helper()
	require.NoError(t, impersonating(t, alertAuthor).Create(context.Background(), r))
	require.NotNil(t, r.Spec.Author)
	require.Equal(t, alertAuthor, r.Spec.Author.Username)
	return r
}

// amAlert is an alert as Alertmanager's API v2 takes it.
type amAlert struct {
	Labels       map[string]string `json:"labels"`
	Annotations  map[string]string `json:"annotations,omitempty"`
	StartsAt     time.Time         `json:"startsAt,omitzero"`
	EndsAt       time.Time         `json:"endsAt,omitzero"`
	GeneratorURL string            `json:"generatorURL,omitempty"`
}

// post sends alerts to the harness's Alertmanager's own API.
func post(t *testing.T, alerts ...amAlert) {
	t.Helper()
	postTo(t, harness.Alertmanager(), alerts...)
}

// postTo sends alerts to am's API, with its credentials.
func postTo(t testing.TB, am *devenv.Alertmanager, alerts ...amAlert) {
	t.Helper()
	postJSON(t, am.Client(), am.URL+"/api/v2/alerts", alerts)
}

// postJSON posts v to url as JSON with c and expects 200.
func postJSON(t testing.TB, c *http.Client, url string, v any) {
	t.Helper()
	body, err := json.Marshal(v)
	require.NoError(t, err)
	resp, err := c.Post(url, "application/json", bytes.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
}

// fire posts a firing alert; resolve posts it again with an endsAt in the past.
func fire(t *testing.T, labels map[string]string) {
	t.Helper()
	post(t, amAlert{Labels: labels, StartsAt: time.Now().Add(-time.Second), EndsAt: time.Now().Add(time.Hour), GeneratorURL: "http://prometheus.invalid/graph?g0.expr=up"})
}

func resolve(t *testing.T, labels map[string]string) {
	t.Helper()
	post(t, amAlert{Labels: labels, StartsAt: time.Now().Add(-time.Minute), EndsAt: time.Now().Add(-time.Second)})
}

func labels(ns, alertname string, kv ...string) map[string]string {
	m := map[string]string{"alertname": alertname, "namespace": ns}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

// ruleStatus waits until cond holds on the rule's status.
func ruleStatus(t *testing.T, r *v1alpha1.RemediationRule, timeout time.Duration, cond func(*v1alpha1.RemediationRule) bool) *v1alpha1.RemediationRule {
	t.Helper()
	return harness.Eventually(t, &v1alpha1.RemediationRule{ObjectMeta: metav1.ObjectMeta{Name: r.Name, Namespace: r.Namespace}}, timeout, cond)
}

// requestsOf lists the RemediationRequests the rule started.
func requestsOf(t testing.TB, ns, rule string) []v1alpha1.RemediationRequest {
	t.Helper()
	var l v1alpha1.RemediationRequestList
	require.NoError(t, harness.Kube().List(context.Background(), &l, ctrlclient.InNamespace(ns), ctrlclient.MatchingLabels{"remedy.dev/rule": rule}))
	return l.Items
}

func record(r *v1alpha1.RemediationRule, fingerprint string) *v1alpha1.AlertRecord {
	for i := range r.Status.Alerts {
		if r.Status.Alerts[i].Fingerprint == fingerprint {
			return &r.Status.Alerts[i]
		}
	}
	return nil
}
