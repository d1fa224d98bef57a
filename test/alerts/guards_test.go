package alerts

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/alertmanager"
	"github.com/remedy-dev/remedy/test/harness"
)

// A flapping alert is remediated MaxRuns times within the window; the next
// firing trips the circuit breaker: refused, escalated on the rule, and
// nothing runs after that.
func TestFlappingAlertTripsTheCircuitBreaker(t *testing.T) {
	ns := tenant(t, "web")
	r := restartRule(ns, "flap", "Flapping")
	r.Spec.CircuitBreaker = &v1alpha1.CircuitBreakerSpec{MaxRuns: 2, Window: v1alpha1.DurationOf(time.Hour)}
	rule := createRule(t, r)
	l := labels(ns, "Flapping", "deployment", "web")
	fp := alertmanager.Fingerprint(l)
	id := v1alpha1.AlertWorkflowID(ns, rule.Name, fp)
	defer func() {
		if t.Failed() {
			explain(t, ns, rule.Name, fp)
		}
	}()
	for i := 1; i <= 2; i++ {
		fire(t, l)
		ruleStatus(t, rule, 60*time.Second, func(r *v1alpha1.RemediationRule) bool {
			rec := record(r, fp)
			return r.Status.RunsStarted == int64(i) && rec != nil && rec.Phase == v1alpha1.AlertDone
		})
		resolve(t, l)
		harness.WaitClosed(t, id, 30*time.Second)
		// Alertmanager notifies a change only at its group_interval (1s): a
		// firing inside the same interval as the resolve is no change to it.
		time.Sleep(2500 * time.Millisecond) // paces the input to Alertmanager's group_interval; asserts nothing
	}
	fire(t, l)
	got := ruleStatus(t, rule, 60*time.Second, func(r *v1alpha1.RemediationRule) bool {
		rec := record(r, fp)
		return rec != nil && rec.Phase == v1alpha1.AlertRefused
	})
	assert.Equal(t, v1alpha1.ReasonCircuitOpen, record(got, fp).Reason)
	cond := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionCircuitOpen)
	require.NotNil(t, cond, "escalated as a condition on the rule")
	assert.Contains(t, cond.Message, "Deployment/web")
	require.NotNil(t, got.Status.LastRefusal)
	assert.Equal(t, v1alpha1.ReasonCircuitOpen, got.Status.LastRefusal.Reason)
	harness.WaitQuiet(t, id, 30*time.Second) // refused, the run waits for the resolve
	assert.Len(t, requestsOf(t, ns, rule.Name), 2, "nothing ran after the breaker tripped")
	resolve(t, l)
	harness.WaitClosed(t, id, 30*time.Second)
	harness.ReplayHistory(t, id, "alert-circuit-open.json")
}

// A storm of 50 alerts across 50 workloads runs no more than the rule's
// maxConcurrent, and puts the rule into storm mode.
func TestAlertStormRespectsTheBudget(t *testing.T) {
	const n, budget = 50, 5
	var names []string
	for i := range n {
		names = append(names, fmt.Sprintf("w%02d", i))
	}
	ns := tenant(t, names...)
	r := restartRule(ns, "storm", "Storm")
	r.Spec.MaxConcurrent = budget
	r.Spec.Cooldown = v1alpha1.DurationOf(10 * time.Minute)
	rule := createRule(t, r)
	var batch []amAlert
	for _, d := range names {
		batch = append(batch, amAlert{Labels: labels(ns, "Storm", "deployment", d), StartsAt: time.Now(), EndsAt: time.Now().Add(time.Hour)})
	}
	post(t, batch...)
	got := ruleStatus(t, rule, 3*time.Minute, func(r *v1alpha1.RemediationRule) bool { return r.Status.Matches == n })
	got = ruleStatus(t, got, time.Minute, func(r *v1alpha1.RemediationRule) bool {
		return meta.IsStatusConditionTrue(r.Status.Conditions, v1alpha1.ConditionStorm)
	})
	require.NotNil(t, got.Status.StormUntil, "storm mode is visible in status")
	assert.True(t, got.Status.StormUntil.After(time.Now()))
	// The guard has answered every request: a later start would need a new one.
	require.Eventually(t, func() bool {
		if len(guardState(t, ns).Queue) > 0 {
			return false
		}
		r := ruleStatus(t, rule, time.Second, func(*v1alpha1.RemediationRule) bool { return true })
		for _, a := range r.Status.Alerts {
			if a.Phase == v1alpha1.AlertQueued {
				return false
			}
		}
		return true
	}, time.Minute, 200*time.Millisecond, "the guard left requests unanswered")
	rrs := requestsOf(t, ns, rule.Name)
	assert.NotEmpty(t, rrs)
	assert.LessOrEqual(t, len(rrs), budget, "no more runs than the budget")
	restarted := 0
	for _, d := range names {
		var dep appsv1.Deployment
		require.NoError(t, harness.Kube().Get(context.Background(), ctrlclient.ObjectKey{Namespace: ns, Name: d}, &dep))
		if dep.Spec.Template.Annotations["kubectl.kubernetes.io/restartedAt"] != "" {
			restarted++
		}
	}
	assert.LessOrEqual(t, restarted, budget)

	refused := record(got, got.Status.LastRefusal.Fingerprint)
	require.NotNil(t, refused)
	resolve(t, refused.Labels)
	harness.WaitClosed(t, refused.WorkflowID, 30*time.Second)
	harness.ReplayHistory(t, refused.WorkflowID, "alert-storm.json")
}

// A target Argo CD tracks is refused with the reason, and left alone.
func TestGitOpsManagedTargetIsRefused(t *testing.T) {
	ns := tenant(t)
	d := harness.Deployment(t, ns, "argo-web", 1)
	d.Annotations = map[string]string{"argocd.argoproj.io/tracking-id": "shop:apps/Deployment:" + ns + "/argo-web"}
	require.NoError(t, harness.Kube().Update(context.Background(), d))
	rec, l := refusedAsGitOps(t, ns, "argo-web")
	assert.Contains(t, rec.Message, "Argo CD")
	assert.Contains(t, rec.Message, "argocd.argoproj.io/tracking-id")
	require.NoError(t, harness.Kube().Get(context.Background(), ctrlclient.ObjectKeyFromObject(d), d))
	assert.Empty(t, d.Spec.Template.Annotations["kubectl.kubernetes.io/restartedAt"])
	resolve(t, l)
	harness.WaitClosed(t, rec.WorkflowID, 30*time.Second)
	harness.ReplayHistory(t, rec.WorkflowID, "alert-gitops-refused.json")
}

// A dry-run rule records the server-side dry-run diff and writes nothing.
// The diff goes into the rule's status, which whoever may get the rule reads:
// it shows the Deployment's values only when the rule's author may get it.
func TestShadowModeWritesNothingAndRecordsTheDiff(t *testing.T) {
	diff := shadowDiff(t, rbacv1.PolicyRule{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"get"}})
	assert.Contains(t, diff, "1 -> 3")
}

// An author who may not get the Deployment reads none of its values from the diff.
func TestShadowDiffRedactedForAnAuthorWhoMayNotRead(t *testing.T) {
	assert.Equal(t, "scale: <redacted: "+alertAuthor+" may not get deployments.apps/web>", shadowDiff(t))
}

// shadowDiff runs a dry-run rule whose author holds extra besides the
// tenant's grants, and returns its one recorded diff.
func shadowDiff(t *testing.T, extra ...rbacv1.PolicyRule) string {
	t.Helper()
	ns := tenant(t, "web")
	if len(extra) > 0 {
		ctx := context.Background()
		require.NoError(t, harness.Kube().Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "author-reads", Namespace: ns}, Rules: extra}))
		require.NoError(t, harness.Kube().Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "author-reads", Namespace: ns},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "author-reads"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: alertAuthor}}}))
	}
	three := int32(3)
	r := &v1alpha1.RemediationRule{}
	r.Name, r.Namespace = "shadow", ns
	r.Spec = v1alpha1.RemediationRuleSpec{Matchers: []string{`alertname="Shadow"`}, DryRun: true,
		// A guard that holds nothing for long ends soon after the run.
		Cooldown: v1alpha1.DurationOf(0), CircuitBreaker: &v1alpha1.CircuitBreakerSpec{MaxRuns: 3, Window: v1alpha1.DurationOf(time.Second)},
		Template: v1alpha1.RemediationTemplate{Steps: []v1alpha1.RemediationStep{{Name: "scale", Execution: v1alpha1.KubernetesExecutionSpec{
			Action: "scale", Target: v1alpha1.ObjectRef{APIVersion: "apps/v1", Kind: "Deployment", Name: "{{ .Labels.deployment }}"},
			Parameters: &v1alpha1.ActionParameters{Replicas: &three}}}}}}
	rule := createRule(t, r)
	l := labels(ns, "Shadow", "deployment", "web")
	fp := alertmanager.Fingerprint(l)
	fire(t, l)
	defer func() {
		if t.Failed() {
			explain(t, ns, rule.Name, fp)
		}
	}()
	got := ruleStatus(t, rule, 60*time.Second, func(r *v1alpha1.RemediationRule) bool {
		rec := record(r, fp)
		return rec != nil && rec.Phase == v1alpha1.AlertShadow
	})
	rec := record(got, fp)
	require.Len(t, rec.DryRun, 1)
	assert.Empty(t, requestsOf(t, ns, rule.Name))
	var dep appsv1.Deployment
	require.NoError(t, harness.Kube().Get(context.Background(), ctrlclient.ObjectKey{Namespace: ns, Name: "web"}, &dep))
	assert.Equal(t, int32(1), *dep.Spec.Replicas, "nothing was written")
	resolve(t, l)
	harness.WaitClosed(t, rec.WorkflowID, 30*time.Second)
	harness.ReplayHistory(t, rec.WorkflowID, "alert-shadow.json")
	harness.WaitClosed(t, v1alpha1.AlertGuardWorkflowID(ns), 30*time.Second)
	harness.ReplayHistory(t, v1alpha1.AlertGuardWorkflowID(ns), "alert-guard-idle.json")
	return rec.DryRun[0]
}
