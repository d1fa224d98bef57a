package activities

import (
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/remedy-dev/remedy/activities/actions"
	"github.com/remedy-dev/remedy/activities/policy"
	"github.com/remedy-dev/remedy/api/v1alpha1"
)

// BenchmarkEvaluatePolicy evaluates the shipped safety policy for one scale
// request, compiling the Rego on every run (uncached, as if each run had its
// own engine) and from the worker's engine that keeps it compiled (cached).
// The API reads are served by a fake clientset, so the figures are the
// activity's own cost.
func BenchmarkEvaluatePolicy(b *testing.B) {
	raw, err := os.ReadFile("../deploy/policies/safety.yaml")
	require.NoError(b, err)
	var cm corev1.ConfigMap
	require.NoError(b, yaml.Unmarshal(raw, &cm))
	cm.Namespace = "remedy-system"
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop", Labels: map[string]string{"env": "prod"}}}
	kube := fake.NewClientset(&cm, ns)
	req := actions.Request{Action: "scale", Params: v1alpha1.ActionParameters{Replicas: ptr.To[int32](3)},
		Target: v1alpha1.ObjectRef{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "web"}}
	for _, tc := range []struct {
		name   string
		engine func(shared *policy.Engine) *policy.Engine
	}{
		{"uncached", func(*policy.Engine) *policy.Engine { return policy.NewEngine() }},
		{"cached", func(shared *policy.Engine) *policy.Engine { return shared }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			shared := policy.NewEngine()
			for b.Loop() {
				v := &Validation{Kube: kube, ActionNamespace: cm.Namespace, Policy: tc.engine(shared)}
				res, err := v.EvaluatePolicy(context.Background(), req)
				require.NoError(b, err)
				require.True(b, res.Validation.Allowed)
			}
		})
	}
}
