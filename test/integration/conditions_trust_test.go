package integration

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/release"
	"github.com/remedy-dev/remedy/test/harness"
)

const (
	dbPassword = "db-password-4f1c9"
	apiToken   = "api-token-7d2e8"
)

// secretBearingWorkload is a Deployment web whose env holds a password, and a
// Pod its selector matches whose env holds a token.
func secretBearingWorkload(t *testing.T, ns string) {
	t.Helper()
	ctx := context.Background()
	labels := map[string]string{"app": "web"}
	container := func(name, value string) []corev1.Container {
		return []corev1.Container{{Name: "web", Image: release.Image(), Env: []corev1.EnvVar{{Name: name, Value: value}}}}
	}
	require.NoError(t, harness.Kube().Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns, Labels: labels},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{Containers: container("DB_PASSWORD", dbPassword)}}},
	}))
	require.NoError(t, harness.Kube().Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-debug", Namespace: ns, Labels: labels},
		Spec: corev1.PodSpec{Containers: container("API_TOKEN", apiToken)}}))
}

// echoSpec scales web with a precondition whose message is the whole input:
// the target's env and the pods' env.
func echoSpec(ns string) v1alpha1.KubernetesExecutionSpec {
	spec := scaleSpec(ns, "web", 2)
	spec.PreConditions = []v1alpha1.Condition{{Name: "echo", Required: true, Timeout: v1alpha1.DurationOf(2 * time.Second),
		Rego: "package pre.echo\n\npass := true\n\nmessage := json.marshal(input)\n"}}
	return spec
}

// requireNowhere asserts that neither secret is in the execution or the namespace's Events.
func requireNowhere(t *testing.T, k *v1alpha1.KubernetesExecution) {
	t.Helper()
	raw, err := json.Marshal(k)
	require.NoError(t, err)
	var evs eventsv1.EventList
	require.NoError(t, harness.Kube().List(context.Background(), &evs, ctrlclient.InNamespace(k.Namespace)))
	evRaw, err := json.Marshal(evs)
	require.NoError(t, err)
	for _, secret := range []string{dbPassword, apiToken} {
		assert.NotContains(t, string(raw), secret, "the execution")
		assert.NotContains(t, string(evRaw), secret, "the Events")
	}
}

// The exploit: a user holding only execute on scale (the shipped on-call
// role) read a Deployment's env and another Pod's token through a
// precondition's message. The condition now fails Forbidden, naming the
// grant, before it reads anything, and the Deployment is not scaled.
func TestConditionCannotReadWhatTheRequesterCannot(t *testing.T) {
	ns := harness.Namespace(t)
	secretBearingWorkload(t, ns)
	require.NoError(t, harness.Kube().Create(context.Background(), &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "oncall", Namespace: ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "remedy-oncall"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "oncall-olga"}}}))
	k := &v1alpha1.KubernetesExecution{ObjectMeta: metav1.ObjectMeta{Name: "echo", Namespace: ns}, Spec: echoSpec(ns)}
	require.NoError(t, impersonating(t, "oncall-olga").Create(context.Background(), k), "execute on scale is enough to create it")

	k = waitPhase(t, k, v1alpha1.PhaseFailed)
	assert.Equal(t, "Forbidden", k.Status.Reason)
	assert.Contains(t, k.Status.Message, `condition echo reads the target for oncall-olga, and its message goes into .status: `+
		`user "oncall-olga" cannot get resource "deployments" in API group "apps" in the namespace `+ns+` (resourceName "web"): grant the verb "get" on deployments.apps/web`)
	assert.Empty(t, k.Status.ValidationResults.PreConditionResults)
	requireNowhere(t, k)
	assert.Equal(t, int32(1), replicasOf(t, ns, "web"))

	// Allowed to get the Deployment but not to list pods: the pods stay unread.
	grantRules(t, ns, "oncall-olga", rbacv1.PolicyRule{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"get"}})
	k = &v1alpha1.KubernetesExecution{ObjectMeta: metav1.ObjectMeta{Name: "echo-pods", Namespace: ns}, Spec: echoSpec(ns)}
	require.NoError(t, impersonating(t, "oncall-olga").Create(context.Background(), k))
	k = waitPhase(t, k, v1alpha1.PhaseFailed)
	assert.Equal(t, "Forbidden", k.Status.Reason)
	assert.Contains(t, k.Status.Message, `user "oncall-olga" cannot list resource "pods" in API group "" in the namespace `+ns+`: grant the verb "list" on pods`)
	requireNowhere(t, k)
	assert.Equal(t, int32(1), replicasOf(t, ns, "web"))
}

// A requester who may get the Deployment and list pods reads them through
// the condition as before.
func TestConditionReadsWhatTheRequesterMayRead(t *testing.T) {
	ns := harness.Namespace(t)
	secretBearingWorkload(t, ns)
	grantRules(t, ns, "reader-rita", createExecutions, execute("scale"),
		rbacv1.PolicyRule{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"get"}},
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list"}})
	k := &v1alpha1.KubernetesExecution{ObjectMeta: metav1.ObjectMeta{Name: "echo", Namespace: ns}, Spec: echoSpec(ns)}
	require.NoError(t, impersonating(t, "reader-rita").Create(context.Background(), k))
	k = waitPhase(t, k, v1alpha1.PhaseCompleted)
	res := k.Status.ValidationResults.PreConditionResults
	require.Len(t, res, 1)
	assert.True(t, res[0].Passed)
	assert.Contains(t, res[0].Message, dbPassword)
	assert.Contains(t, res[0].Message, apiToken)
	assert.Equal(t, int32(2), replicasOf(t, ns, "web"))
}
