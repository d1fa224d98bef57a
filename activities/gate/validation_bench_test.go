package gate

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/actions"
	"github.com/remedy-dev/remedy/internal/policy"
)

// BenchmarkEvaluatePolicy evaluates the shipped safety policy for one scale
// request from the worker's engine, which keeps the compiled Rego across runs
// (ns/op), against compiling it on every run as a fresh engine would
// (uncached-ms, and the ratio x-uncached). The API reads are served by a fake
// clientset, so the figures are the activity's own cost.
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
	eval := func(engine *policy.Engine) {
		v := &Validation{Kube: kube, ActionNamespace: cm.Namespace, Policy: engine}
		res, err := v.EvaluatePolicy(context.Background(), req)
		require.NoError(b, err)
		require.True(b, res.Validation.Allowed)
	}
	const uncachedRuns = 50
	start := time.Now()
	for range uncachedRuns {
		eval(policy.NewEngine())
	}
	uncached := time.Since(start) / uncachedRuns

	shared := policy.NewEngine()
	eval(shared)
	b.ResetTimer()
	start = time.Now()
	for b.Loop() {
		eval(shared)
	}
	cached := time.Since(start) / time.Duration(b.N)
	b.ReportMetric(float64(uncached.Microseconds())/1000, "uncached-ms")
	b.ReportMetric(float64(cached)/float64(uncached), "x-uncached")
}
