package faults

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	workflowservice "go.temporal.io/api/workflowservice/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/alertmanager"
	"github.com/remedy-dev/remedy/internal/devenv"
	"github.com/remedy-dev/remedy/test/harness"
	"github.com/remedy-dev/remedy/test/procs"
)

// alerting is a real Alertmanager routed, as docs/alerts.md configures it,
// to the receiver of the worker the suite kills (--alerts-addr).
type alerting struct {
	am *devenv.Alertmanager
	// args are the worker's receiver flags.
	args []string
}

// startAlerting starts Alertmanager before the worker, which serves the
// receiver on a port fixed now so it is the same after each restart.
func startAlerting(t *testing.T) *alerting {
	t.Helper()
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	tokenFile := filepath.Join(t.TempDir(), "alerts-token")
	require.NoError(t, os.WriteFile(tokenFile, []byte(hex.EncodeToString(b)), 0o600))
	receiver := fmt.Sprintf("127.0.0.1:%d", procs.FreePort(t))
	amAddr, err := devenv.FreeLoopbackAddress()
	require.NoError(t, err)
	bin, err := devenv.AlertmanagerBinary(procs.Root)
	require.NoError(t, err)
	cfg := devenv.RouteToRemedy("http://"+receiver+"/alerts", tokenFile, "1s", "1s", "1h")
	am, err := devenv.StartAlertmanager(context.Background(), devenv.AlertmanagerOptions{Binary: bin, Config: cfg, ListenAddress: amAddr, Log: procs.Log(), DieWithParent: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = am.Stop() })
	return &alerting{am: am, args: []string{"--alerts-addr=" + receiver, "--alerts-token-file=" + tokenFile, "--alertmanager-url=" + am.URL,
		"--alertmanager-http-config-file=" + am.HTTPConfig,
		"--alerts-sweep-every=2s", "--alerts-sweep-grace=5s"}}
}

// alertAuthor writes the cases' rules; they run in its name.
const alertAuthor = "alert-author"

// alertRule creates, as its author, a rule restarting the Deployment the
// alert's deployment label names, with a circuit breaker of breaker runs;
// with, each case adds to its spec.
func alertRule(t *testing.T, ns, name, alertname string, breaker int32, with ...func(*v1alpha1.RemediationRuleSpec)) *v1alpha1.RemediationRule {
	t.Helper()
	ctx := context.Background()
	c := harness.As(t, ns, alertAuthor,
		rbacv1.PolicyRule{APIGroups: []string{"remedy.dev"}, Resources: []string{"remediationrules"}, Verbs: []string{"create", "get"}},
		rbacv1.PolicyRule{APIGroups: []string{"remedy.dev"}, Resources: []string{"actions"}, ResourceNames: []string{"restart"}, Verbs: []string{"execute"}})
	r := &v1alpha1.RemediationRule{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: v1alpha1.RemediationRuleSpec{
		Matchers:       []string{fmt.Sprintf("alertname=%q", alertname)},
		Cooldown:       v1alpha1.DurationOf(0),
		CircuitBreaker: &v1alpha1.CircuitBreakerSpec{MaxRuns: max(breaker, 1), Window: v1alpha1.DurationOf(time.Hour)},
		Template: v1alpha1.RemediationTemplate{Steps: []v1alpha1.RemediationStep{{Name: "restart", Execution: v1alpha1.KubernetesExecutionSpec{
			Action: "restart", Target: v1alpha1.ObjectRef{APIVersion: "apps/v1", Kind: "Deployment", Name: "{{ .Labels.deployment }}"}}}}},
	}}
	for _, f := range with {
		f(&r.Spec)
	}
	require.Eventually(t, func() bool { return c.Create(ctx, r) == nil }, time.Minute, 500*time.Millisecond, "the rule is admitted")
	return r
}

// alertCase makes a case's namespace with the Deployment web (returning its
// settled generation), the rule, and the labels of the alert on web.
func alertCase(t *testing.T, rule, alertname string, breaker int32, with ...func(*v1alpha1.RemediationRuleSpec)) (string, int64, *v1alpha1.RemediationRule, map[string]string) {
	t.Helper()
	ns := harness.Namespace(t)
	gen := target(t, ns)
	return ns, gen, alertRule(t, ns, rule, alertname, breaker, with...), map[string]string{"alertname": alertname, "namespace": ns, "deployment": "web"}
}

// ruleAlert waits until the rule's record of the alert satisfies cond.
func ruleAlert(t *testing.T, r *v1alpha1.RemediationRule, fp string, timeout time.Duration, cond func(*v1alpha1.RemediationRule, *v1alpha1.AlertRecord) bool) *v1alpha1.RemediationRule {
	t.Helper()
	return harness.Eventually(t, &v1alpha1.RemediationRule{ObjectMeta: metav1.ObjectMeta{Name: r.Name, Namespace: r.Namespace}}, timeout, func(got *v1alpha1.RemediationRule) bool {
		for i := range got.Status.Alerts {
			if got.Status.Alerts[i].Fingerprint == fp {
				return cond(got, &got.Status.Alerts[i])
			}
		}
		return false
	})
}

// alertRuns counts the runs of an alert's workflow ID.
func alertRuns(t *testing.T, id string) int {
	t.Helper()
	resp, err := procs.Env().Temporal.ListWorkflow(context.Background(), &workflowservice.ListWorkflowExecutionsRequest{Query: fmt.Sprintf("WorkflowId = '%s'", id)})
	require.NoError(t, err)
	return len(resp.Executions)
}

func alertRequests(t *testing.T, ns, rule string) int {
	t.Helper()
	var l v1alpha1.RemediationRequestList
	require.NoError(t, harness.Kube().List(context.Background(), &l, ctrlclient.InNamespace(ns), ctrlclient.MatchingLabels{"remedy.dev/rule": rule}))
	return len(l.Items)
}

// alertReceipt: Alertmanager notifies the receiver, which is held after it
// read the notification and before it looked up the rules and started the
// workflow; there the process is killed. Alertmanager, never answered 2xx,
// sends the notification again: the alert runs once.
func alertReceipt(t *testing.T, p *parts, what string) string {
	ns, gen, rule, l := alertCase(t, "receipt", "FaultReceipt", 3)
	fp := alertmanager.Fingerprint(l)
	id := v1alpha1.AlertWorkflowID(ns, rule.Name, fp)
	rules := "/apis/remedy.dev/v1alpha1/namespaces/" + ns + "/remediationrules"
	hold := p.proxy.HoldBefore(t, func(r *http.Request, _ []byte) bool { return r.Method == http.MethodGet && r.URL.Path == rules })
	harness.FireAlert(t, p.alerting.am, l)
	select {
	case <-hold.Reached():
	case <-time.After(30 * time.Second):
		require.FailNow(t, "the receiver never got the notification")
	}
	p.kill(t, what)
	if what == worker {
		_, err := procs.Env().Temporal.DescribeWorkflowExecution(context.Background(), id, "")
		require.Error(t, err, "killed before the workflow started")
	} else {
		// The receiver goes on, and meets Temporal down: 503.
		hold.Release()
	}
	time.Sleep(down[what]) // the fault itself: the part stays down; asserts nothing
	p.restart(t, what)
	hold.Release()

	got := ruleAlert(t, rule, fp, 90*time.Second, func(_ *v1alpha1.RemediationRule, a *v1alpha1.AlertRecord) bool { return a.Phase == v1alpha1.AlertDone })
	return "killed holding the notification; Alertmanager's retry delivered it; " + tally(t, p, got, l, gen, 1, 1)
}

// tally resolves the alert and checks that its firings and runs each
// happened and were counted once: the workflow's runs, the rule's counters,
// the RemediationRequests and the Deployment's generation (one per restart).
func tally(t *testing.T, p *parts, got *v1alpha1.RemediationRule, l map[string]string, gen int64, firings, runs int) string {
	t.Helper()
	ns, rule := got.Namespace, got.Name
	id := v1alpha1.AlertWorkflowID(ns, rule, alertmanager.Fingerprint(l))
	harness.ResolveAlert(t, p.alerting.am, l)
	harness.WaitClosed(t, id, time.Minute)
	assert.Equal(t, int64(firings), got.Status.Matches, "each firing matched once")
	assert.Equal(t, int64(runs), got.Status.RunsStarted, "each run counted once")
	assert.Equal(t, firings, alertRuns(t, id), "one workflow run per firing")
	assert.Equal(t, runs, alertRequests(t, ns, rule), "one RemediationRequest per run")
	d := deployment(t, ns, "web")
	assert.Equal(t, gen+int64(runs), d.Generation, "restarted once per run")
	return fmt.Sprintf("%d workflow runs, %d requests, matches %d, runs %d; generation +%d",
		alertRuns(t, id), alertRequests(t, ns, rule), got.Status.Matches, got.Status.RunsStarted, d.Generation-gen)
}

// alertFlap: a flapping alert runs, resolves, and fires again while the
// process is down. Once it is back the second run happens once, and the
// third firing trips the breaker (2 runs): nothing lost, nothing doubled.
func alertFlap(t *testing.T, p *parts, what string) string {
	ns, gen, rule, l := alertCase(t, "flap", "FaultFlap", 2)
	fp := alertmanager.Fingerprint(l)
	id := v1alpha1.AlertWorkflowID(ns, rule.Name, fp)
	ran := func(n int64, timeout time.Duration) {
		t.Helper()
		ruleAlert(t, rule, fp, timeout, func(r *v1alpha1.RemediationRule, a *v1alpha1.AlertRecord) bool {
			return r.Status.RunsStarted == n && a.Phase == v1alpha1.AlertDone
		})
		harness.ResolveAlert(t, p.alerting.am, l)
		harness.WaitClosed(t, id, time.Minute)
		// A firing inside the resolve's group_interval (1s) is no change to Alertmanager.
		time.Sleep(2500 * time.Millisecond) // paces the input; asserts nothing
	}
	harness.FireAlert(t, p.alerting.am, l)
	ran(1, time.Minute)

	p.kill(t, what)
	harness.FireAlert(t, p.alerting.am, l)
	time.Sleep(down[what]) // the fault itself: the part stays down; asserts nothing
	p.restart(t, what)
	back := time.Now()
	ran(2, 90*time.Second)
	t.Logf("the second run was done %.1fs after %s was back", time.Since(back).Seconds(), what)

	harness.FireAlert(t, p.alerting.am, l)
	got := ruleAlert(t, rule, fp, time.Minute, func(_ *v1alpha1.RemediationRule, a *v1alpha1.AlertRecord) bool {
		return a.Phase == v1alpha1.AlertRefused
	})
	rec := got.Status.Alerts[0]
	assert.Equal(t, v1alpha1.ReasonCircuitOpen, rec.Reason)
	assert.Contains(t, rec.Message, "remediated 2 times", "the breaker counted each run once")
	return "fired again while down; third firing " + rec.Reason + "; " + tally(t, p, got, l, gen, 3, 2)
}

// alertVerify: the run restarted its target and waits, in spec.verify's
// window, for the alert to resolve. The process is killed there and the
// alert resolves while it is down; once it is back the run ends Verified,
// by the one request it made, and is counted once.
func alertVerify(t *testing.T, p *parts, what string) string {
	_, gen, rule, l := alertCase(t, "verify", "FaultVerify", 3, func(s *v1alpha1.RemediationRuleSpec) {
		// Outlasts the fault: the window ends after the part is back.
		s.Verify = &v1alpha1.VerifySpec{Window: v1alpha1.DurationOf(20 * time.Second)}
	})
	fp := alertmanager.Fingerprint(l)
	harness.FireAlert(t, p.alerting.am, l)
	ruleAlert(t, rule, fp, 90*time.Second, func(_ *v1alpha1.RemediationRule, a *v1alpha1.AlertRecord) bool {
		return a.Phase == v1alpha1.AlertVerifying
	})

	p.kill(t, what)
	harness.ResolveAlert(t, p.alerting.am, l)
	time.Sleep(down[what]) // the fault itself: the part stays down; asserts nothing
	p.restart(t, what)

	got := ruleAlert(t, rule, fp, 2*time.Minute, func(_ *v1alpha1.RemediationRule, a *v1alpha1.AlertRecord) bool {
		return a.Phase == v1alpha1.AlertVerified
	})
	assert.Equal(t, int64(1), got.Status.Outcomes[v1alpha1.AlertVerified], "verified once")
	return "resolved while down; Verified; " + tally(t, p, got, l, gen, 1, 1)
}
