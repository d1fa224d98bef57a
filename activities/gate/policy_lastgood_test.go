package gate

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/metrics"
	"github.com/remedy-dev/remedy/internal/policy"
)

func policyMap(name, uid, rego string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "remedy-system", Name: name, UID: types.UID(uid), ResourceVersion: "1",
		Labels: map[string]string{v1alpha1.PolicyLabel: "true"}}, Data: map[string]string{"policy.rego": rego}}
}

func policyWarnings(t *testing.T, kube *fake.Clientset) map[string]string {
	t.Helper()
	list, err := kube.EventsV1().Events("remedy-system").List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	out := map[string]string{}
	for _, ev := range list.Items {
		assert.Equal(t, v1alpha1.ReasonPolicyBroken, ev.Reason)
		assert.Equal(t, corev1.EventTypeWarning, ev.Type)
		out[ev.Regarding.Name] = ev.Note
	}
	return out
}

func TestLastGoodPolicy(t *testing.T) {
	ctx := context.Background()
	engine := policy.NewEngine()
	good := policyMap("remedy-safety", "u1", "package remedy.safety\n\ndeny contains \"no deletes\" if input.action == \"delete-pod\"\n")
	helper := policyMap("remedy-helpers", "u2", "package remedy.helpers\n\nx := 1\n")
	broken := policyMap("zz-extra", "u3", "package remedy.safety\n\ndeny contains msg if {")

	t.Run("a broken edit keeps the last good policy and warns on the ConfigMap that broke it", func(t *testing.T) {
		kube := fake.NewClientset()
		l := &LastGoodPolicy{Events: kube}
		l.Observe(ctx, engine, []*corev1.ConfigMap{good, helper})
		assert.Equal(t, 0.0, testutil.ToFloat64(metrics.SafetyPolicyBroken))

		set := policySetOf([]*corev1.ConfigMap{good, helper, broken})
		l.Observe(ctx, engine, set.Maps)
		assert.Equal(t, 1.0, testutil.ToFloat64(metrics.SafetyPolicyBroken))
		warnings := policyWarnings(t, kube)
		require.Len(t, warnings, 1, "only the ConfigMap that fails on its own: %v", warnings)
		assert.Contains(t, warnings["zz-extra"], "safety policy remedy-helpers,remedy-safety,zz-extra is broken")
		assert.Contains(t, warnings["zz-extra"], "keeps deciding with the last good policy (remedy-helpers,remedy-safety")

		kept := l.broken(ctx, engine, set, assert.AnError)
		require.NotNil(t, kept, "evaluations decide with the last good policy")
		assert.Equal(t, policySetOf([]*corev1.ConfigMap{good, helper}).Hash, kept.Hash)
		assert.Len(t, policyWarnings(t, kube), 1, "reported once per content")

		l.Observe(ctx, engine, []*corev1.ConfigMap{good})
		assert.Equal(t, 0.0, testutil.ToFloat64(metrics.SafetyPolicyBroken), "fixed")
	})

	t.Run("a worker that starts on a broken policy has none to keep", func(t *testing.T) {
		kube := fake.NewClientset()
		l := &LastGoodPolicy{Events: kube}
		set := policySetOf([]*corev1.ConfigMap{good, broken})
		l.Observe(ctx, engine, set.Maps)
		assert.Nil(t, l.broken(ctx, engine, set, assert.AnError))
		assert.Contains(t, policyWarnings(t, kube)["zz-extra"], "every execution fails PolicyDenied")
	})

	t.Run("modules that break only together warn on the ConfigMaps that changed", func(t *testing.T) {
		kube := fake.NewClientset()
		l := &LastGoodPolicy{Events: kube}
		a := policyMap("a", "ua", "package remedy.safety\n\nrequire_approval := true\n")
		b := policyMap("b", "ub", "package remedy.safety\n\nrequire_dry_run := true\n")
		l.Observe(ctx, engine, []*corev1.ConfigMap{a, b})
		b2 := policyMap("b", "ub", "package remedy.safety\n\nrequire_approval contains x if { x := 1 }\n")
		b2.ResourceVersion = "2"
		l.Observe(ctx, engine, []*corev1.ConfigMap{a, b2})
		warnings := policyWarnings(t, kube)
		assert.Len(t, warnings, 1, "%v", warnings)
		assert.Contains(t, warnings, "b")
	})
}
