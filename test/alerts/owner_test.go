package alerts

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
	"k8s.io/utils/ptr"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/alertmanager"
	"github.com/remedy-dev/remedy/test/harness"
)

// ownedBy makes obj's controller owner.
func ownedBy(obj, owner ctrlclient.Object, kind string) {
	obj.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "apps/v1", Kind: kind, Name: owner.GetName(), UID: owner.GetUID(), Controller: ptr.To(true)}})
}

// pods creates Pods named names, controlled by owner.
func pods(t *testing.T, owner ctrlclient.Object, kind string, app string, names ...string) {
	t.Helper()
	for _, n := range names {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: n, Namespace: owner.GetNamespace(), Labels: map[string]string{"app": app}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{harness.DemoContainer(app)}}}
		ownedBy(p, owner, kind)
		require.NoError(t, harness.Kube().Create(context.Background(), p))
	}
}

// Alerts about Pods are guarded per owning workload: a Deployment's Pods
// (through their ReplicaSet) and a StatefulSet's are one target each, so
// the breaker counts a replacement Pod's alert against the same workload.
func TestPodAlertsAreGuardedByTheirOwningWorkload(t *testing.T) {
	ctx := context.Background()
	ns := tenant(t)
	require.NoError(t, harness.Kube().Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "delete-pod", Namespace: ns},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"remedy.dev"}, Resources: []string{"actions"}, ResourceNames: []string{"delete-pod"}, Verbs: []string{"execute"}}}}))
	require.NoError(t, harness.Kube().Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "delete-pod", Namespace: ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "delete-pod"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: alertAuthor}}}))

	dep := harness.Deployment(t, ns, "web", 0)
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "web-5d8f", Namespace: ns, Labels: dep.Spec.Template.Labels},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](2), Selector: dep.Spec.Selector, Template: dep.Spec.Template}}
	ownedBy(rs, dep, "Deployment")
	require.NoError(t, harness.Kube().Create(ctx, rs))
	pods(t, rs, "ReplicaSet", "web", "web-5d8f-a", "web-5d8f-b")
	dbLabels := map[string]string{"app": "db"}
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: ns, Labels: dbLabels},
		Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](2), ServiceName: "db", Selector: &metav1.LabelSelector{MatchLabels: dbLabels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: dbLabels}, Spec: corev1.PodSpec{Containers: []corev1.Container{harness.DemoContainer("db")}}}}}
	require.NoError(t, harness.Kube().Create(ctx, sts))
	pods(t, sts, "StatefulSet", "db", "db-0", "db-1")

	rule := createRule(t, &v1alpha1.RemediationRule{ObjectMeta: metav1.ObjectMeta{Name: "pods", Namespace: ns}, Spec: v1alpha1.RemediationRuleSpec{
		Matchers: []string{`alertname="PodUnhealthy"`}, DryRun: true, Cooldown: v1alpha1.DurationOf(0),
		CircuitBreaker: &v1alpha1.CircuitBreakerSpec{MaxRuns: 1, Window: v1alpha1.DurationOf(time.Hour)},
		Template: v1alpha1.RemediationTemplate{Steps: []v1alpha1.RemediationStep{{Name: "delete", Execution: v1alpha1.KubernetesExecutionSpec{
			Action: "delete-pod", Target: v1alpha1.ObjectRef{APIVersion: "v1", Kind: "Pod", Name: "{{ .Labels.pod }}"}}}}}}})
	owners := map[string]string{"web-5d8f-a": "Deployment/web", "web-5d8f-b": "Deployment/web", "db-0": "StatefulSet/db", "db-1": "StatefulSet/db"}
	var batch []amAlert
	for pod := range owners {
		batch = append(batch, amAlert{Labels: labels(ns, "PodUnhealthy", "pod", pod), StartsAt: time.Now(), EndsAt: time.Now().Add(time.Hour)})
	}
	post(t, batch...)
	got := ruleStatus(t, rule, 90*time.Second, func(r *v1alpha1.RemediationRule) bool {
		final := 0
		for _, a := range r.Status.Alerts {
			if a.Phase == v1alpha1.AlertShadow || a.Phase == v1alpha1.AlertRefused {
				final++
			}
		}
		return final == len(owners)
	})
	ran, refused := map[string]int{}, map[string]int{}
	for pod, owner := range owners {
		rec := record(got, alertmanager.Fingerprint(labels(ns, "PodUnhealthy", "pod", pod)))
		require.NotNil(t, rec, pod)
		assert.Equal(t, owner, rec.Target, "%s is guarded as its owning workload", pod)
		switch rec.Phase {
		case v1alpha1.AlertShadow:
			ran[owner]++
		case v1alpha1.AlertRefused:
			refused[owner]++
			assert.Equal(t, v1alpha1.ReasonCircuitOpen, rec.Reason, pod)
			assert.Contains(t, rec.Message, owner, pod)
		}
	}
	want := map[string]int{"Deployment/web": 1, "StatefulSet/db": 1}
	assert.Equal(t, want, ran, "one run per workload")
	assert.Equal(t, want, refused, "the other Pod's alert is the same workload's second: the breaker (1 run) refuses it")
	for pod := range owners {
		l := labels(ns, "PodUnhealthy", "pod", pod)
		resolve(t, l)
		harness.WaitClosed(t, v1alpha1.AlertWorkflowID(ns, rule.Name, alertmanager.Fingerprint(l)), 30*time.Second)
	}
}
