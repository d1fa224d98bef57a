package monitoring

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/devenv"
	"github.com/remedy-dev/remedy/test/harness"
)

// ruleAuthor writes the undo rule; its runs act in their name.
const ruleAuthor = "crash-rule-author"

// verifyWindow is the rule's spec.verify.window: KubePodCrashLooping looks
// back 5 minutes (max_over_time), so it clears about that long after the
// crashing Pod is gone; the window covers that, the test's 10s `for:`, and
// Prometheus's evaluation and Alertmanager's group_interval.
const verifyWindow = 6 * time.Minute

// crashTimeline is when each fact of one real crash's remediation was
// seen, from the bad rollout on.
type crashTimeline struct {
	crashed, firing, started, undone, resolved, verified time.Duration
}

// crashToVerified breaks a Deployment for real with a bad rollout
// (DEMO_MODE=crash), and follows what happens with no hand in it:
// kube-state-metrics and Prometheus raise KubePodCrashLooping, Alertmanager
// notifies Remedy, the rule's rollout-undo restores the previous template,
// the alert resolves, and the run ends Verified, once.
func crashToVerified(t testing.TB) crashTimeline {
	t.Helper()
	ctx := context.Background()
	ns := harness.Namespace(t)
	d := harness.Deployment(t, ns, "web", 1)
	harness.Eventually(t, d, 2*time.Minute, func(d *appsv1.Deployment) bool { return d.Status.ReadyReplicas == 1 })
	rule := undoRule(t, ns)

	start := time.Now()
	since := func() time.Duration { return time.Since(start).Round(100 * time.Millisecond) }
	var tl crashTimeline
	patch := `{"spec":{"template":{"spec":{"containers":[{"name":"web","env":[{"name":"DEMO_MODE","value":"crash"}]}]}}}}`
	require.NoError(t, harness.Kube().Patch(ctx, d, ctrlclient.RawPatch(types.StrategicMergePatchType, []byte(patch))))

	require.Eventually(t, func() bool {
		var pods corev1.PodList
		require.NoError(t, harness.Kube().List(ctx, &pods, ctrlclient.InNamespace(ns)))
		for _, p := range pods.Items {
			for _, s := range p.Status.ContainerStatuses {
				if s.RestartCount > 0 || s.LastTerminationState.Terminated != nil {
					return true
				}
			}
		}
		return false
	}, 2*time.Minute, 100*time.Millisecond, "the new Pod's container crashed")
	tl.crashed = since()

	require.Eventually(t, func() bool { return crashLoopingFiring(t, ns) }, 3*time.Minute, 200*time.Millisecond, "Prometheus fires KubePodCrashLooping")
	tl.firing = since()

	var rr v1alpha1.RemediationRequest
	require.Eventually(t, func() bool {
		var l v1alpha1.RemediationRequestList
		require.NoError(t, harness.Kube().List(ctx, &l, ctrlclient.InNamespace(ns), ctrlclient.MatchingLabels{"remedy.dev/rule": rule.Name}))
		if len(l.Items) == 0 {
			return false
		}
		rr = l.Items[0]
		return true
	}, 2*time.Minute, 100*time.Millisecond, "the alert started the rule's RemediationRequest")
	tl.started = rr.CreationTimestamp.Sub(start).Round(time.Second)

	harness.Eventually(t, &rr, 2*time.Minute, func(rr *v1alpha1.RemediationRequest) bool { return rr.Status.Phase.Terminal() })
	require.Equal(t, v1alpha1.PhaseCompleted, rr.Status.Phase, rr.Status.Message)
	harness.Eventually(t, d, 2*time.Minute, func(d *appsv1.Deployment) bool {
		return d.Status.UpdatedReplicas == 1 && d.Status.ReadyReplicas == 1 && d.Status.Replicas == 1 && d.Status.ObservedGeneration == d.Generation
	})
	assert.Empty(t, d.Spec.Template.Spec.Containers[0].Env, "the previous revision's template is back")
	tl.undone = since()

	require.Eventually(t, func() bool { return !crashLoopingFiring(t, ns) }, verifyWindow, time.Second, "KubePodCrashLooping resolves once the crashing Pod is gone")
	tl.resolved = since()

	got := harness.Eventually(t, &v1alpha1.RemediationRule{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: rule.Name}}, verifyWindow+time.Minute,
		func(r *v1alpha1.RemediationRule) bool {
			return r.Status.Outcomes[v1alpha1.AlertVerified]+r.Status.Outcomes[v1alpha1.AlertIneffective] > 0
		})
	tl.verified = since()
	require.Equal(t, v1alpha1.AlertVerified, got.Status.LastOutcome.Outcome, got.Status.LastOutcome.Message)
	assert.Equal(t, int64(1), got.Status.Outcomes[v1alpha1.AlertVerified], "verified once")
	assert.Equal(t, int64(1), got.Status.RunsStarted, "one run")
	var l v1alpha1.RemediationRequestList
	require.NoError(t, harness.Kube().List(ctx, &l, ctrlclient.InNamespace(ns), ctrlclient.MatchingLabels{"remedy.dev/rule": rule.Name}))
	assert.Len(t, l.Items, 1, "one undo")
	return tl
}

// crashLoopingFiring says whether Prometheus holds KubePodCrashLooping as firing in ns.
func crashLoopingFiring(t testing.TB, ns string) bool {
	for _, a := range harness.PrometheusAlerts(t) {
		if a.Labels["alertname"] == "KubePodCrashLooping" && a.Labels["namespace"] == ns && a.State == "firing" {
			return true
		}
	}
	return false
}

// undoRule is the sample rule (deploy/samples/rrule-demo-crashloop.yaml) in
// ns, written by ruleAuthor, who may execute rollout-undo there.
func undoRule(t testing.TB, ns string) *v1alpha1.RemediationRule {
	t.Helper()
	c := harness.As(t, ns, ruleAuthor,
		rbacv1.PolicyRule{APIGroups: []string{"remedy.dev"}, Resources: []string{"remediationrules"}, Verbs: []string{"create", "get"}},
		rbacv1.PolicyRule{APIGroups: []string{"remedy.dev"}, Resources: []string{"actions"}, ResourceNames: []string{"rollout-undo"}, Verbs: []string{"execute"}})
	r := &v1alpha1.RemediationRule{ObjectMeta: metav1.ObjectMeta{Name: "crashloop", Namespace: ns}, Spec: v1alpha1.RemediationRuleSpec{
		Matchers: []string{`alertname="KubePodCrashLooping"`},
		Cooldown: v1alpha1.DurationOf(0),
		Verify:   &v1alpha1.VerifySpec{Window: v1alpha1.DurationOf(verifyWindow), OnFailure: v1alpha1.VerifyNone},
		Template: v1alpha1.RemediationTemplate{Steps: []v1alpha1.RemediationStep{{Name: "undo", Execution: v1alpha1.KubernetesExecutionSpec{
			Action: "rollout-undo", Target: v1alpha1.ObjectRef{APIVersion: "apps/v1", Kind: "Deployment", Name: "{{ .Workload.Name }}"}}}}},
	}}
	require.Eventually(t, func() bool { return c.Create(context.Background(), r) == nil }, time.Minute, 500*time.Millisecond, "the rule is admitted")
	return r
}

// A real crash is fixed and the fix is proven by the alert resolving.
func TestRealCrashIsUndoneAndVerified(t *testing.T) {
	tl := crashToVerified(t)
	t.Logf("bad rollout -> crashed %s, firing %s, remediation started %s, undone %s, alert resolved %s, Verified %s",
		tl.crashed, tl.firing, tl.started, tl.undone, tl.resolved, tl.verified)
}

// BenchmarkCrashToVerified times each fact of crashToVerified and reports
// it beside the parts' own settings in the same run: Prometheus's
// evaluation interval (firing needs `for:` plus one or two of them) and the
// rule's verify window (Verified comes at its end).
func BenchmarkCrashToVerified(b *testing.B) {
	var tl crashTimeline
	for range b.N {
		tl = crashToVerified(b)
	}
	eval := devenv.DefaultMonitoringInterval
	for _, m := range []struct {
		name string
		d    time.Duration
	}{{"s_crashed", tl.crashed}, {"s_firing", tl.firing}, {"s_started", tl.started}, {"s_undone", tl.undone}, {"s_resolved", tl.resolved}, {"s_verified", tl.verified}} {
		b.ReportMetric(m.d.Seconds(), m.name)
	}
	b.ReportMetric((tl.firing-tl.crashed).Seconds()/eval.Seconds(), "firing_after_crash/eval")
	b.ReportMetric((tl.started-tl.firing).Seconds()/eval.Seconds(), "started_after_firing/eval")
	b.ReportMetric((tl.verified-tl.undone).Seconds()/verifyWindow.Seconds(), "verified_after_undo/window")
	b.Logf("evaluation interval %s, for %s, window %s", eval, alertFor, verifyWindow)
}
