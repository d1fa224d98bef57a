package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/test/harness"
)

// BenchmarkBaselineDirectScale is the floor: the same scale as one patch
// and one read by cluster-admin, with no validation, workflow or mirroring.
func BenchmarkBaselineDirectScale(b *testing.B) {
	ctx := context.Background()
	ns := harness.Namespace(b)
	d := harness.Deployment(b, ns, "web", 1)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		patch := []byte(fmt.Sprintf(`{"spec":{"replicas":%d}}`, i%5+2))
		require.NoError(b, harness.Kube().Patch(ctx, d, ctrlclient.RawPatch("application/merge-patch+json", patch)))
		require.NoError(b, harness.Kube().Get(ctx, ctrlclient.ObjectKeyFromObject(d), &appsv1.Deployment{}))
	}
}

// BenchmarkExecutionToCompleted is what a user waits for: from creating a
// scale KubernetesExecution (no rollback window) until .status.phase reads
// Completed, through the workflow, both activities and the status mirror.
func BenchmarkExecutionToCompleted(b *testing.B) {
	ctx := context.Background()
	ns := harness.Namespace(b)
	harness.Deployment(b, ns, "web", 1)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		k := &v1alpha1.KubernetesExecution{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("scale-%d", i), Namespace: ns},
			Spec: v1alpha1.KubernetesExecutionSpec{
				Action: "scale", Target: target(ns, "web"),
				Parameters:     &v1alpha1.ActionParameters{Replicas: ptr.To(int32(i%5 + 2))},
				RollbackWindow: v1alpha1.DurationOf(0),
			},
		}
		require.NoError(b, harness.Kube().Create(ctx, k))
		for k.Status.Phase != v1alpha1.PhaseCompleted {
			require.NotEqual(b, v1alpha1.PhaseFailed, k.Status.Phase, k.Status.Message)
			time.Sleep(5 * time.Millisecond) // polls at the resolution the benchmark times; asserts nothing negative
			require.NoError(b, harness.Kube().Get(ctx, ctrlclient.ObjectKeyFromObject(k), k))
		}
	}
}

// BenchmarkHappyPathHistory runs one scale execution to Completed and
// reports its workflow's history length (events), with that of a bare
// workflow with one no-op activity (bare-events) from the same server.
func BenchmarkHappyPathHistory(b *testing.B) {
	ctx := context.Background()
	ns := harness.Namespace(b)
	harness.Deployment(b, ns, "web-0", 1)
	_, bareID := bareThroughput(b, 1)
	var events int64
	for i := 0; i < b.N; i++ {
		k := manyScale(ns, i, 1)
		require.NoError(b, harness.Kube().Create(ctx, k))
		harness.Eventually(b, k, time.Minute, func(k *v1alpha1.KubernetesExecution) bool { return k.Status.Phase.Terminal() })
		require.Equal(b, v1alpha1.PhaseCompleted, k.Status.Phase, k.Status.Message)
		events += historyLength(b, k.Status.WorkflowID)
	}
	b.StopTimer()
	bare := historyLength(b, bareID)
	b.ReportMetric(float64(events)/float64(b.N), "events")
	b.ReportMetric(float64(bare), "bare-events")
}

// BenchmarkHappyPathAPIRequests counts the API requests of one scale
// execution from create to Completed, made by the operator (its admission
// webhooks included) and the worker: SubjectAccessReviews, reads, status
// writes and Events. The API server's CPU bounds Remedy's throughput, so this
// count is its cost per run. The first run warms discovery and caches.
func BenchmarkHappyPathAPIRequests(b *testing.B) {
	ctx := context.Background()
	ns := harness.Namespace(b)
	harness.Deployment(b, ns, "web-0", 1)
	run := func(i int) {
		k := manyScale(ns, i, 1)
		k.Spec.Parameters.Replicas = ptr.To(int32(i%5 + 2))
		require.NoError(b, harness.Kube().Create(ctx, k))
		harness.Eventually(b, k, time.Minute, func(k *v1alpha1.KubernetesExecution) bool { return k.Status.Phase.Terminal() })
		require.Equal(b, v1alpha1.PhaseCompleted, k.Status.Phase, k.Status.Message)
		// The operator's last reconcile and the final Events trail the phase.
		time.Sleep(time.Second) // paces the load: runs do not overlap; asserts nothing
	}
	run(0)
	total := map[string]int{}
	b.ResetTimer()
	for i := 1; i <= b.N; i++ {
		before := harness.APIRequests()
		run(i)
		for k, v := range harness.APIRequests() {
			total[k] += v - before[k]
		}
	}
	b.StopTimer()
	var all, sars, events, reads int
	for k, v := range total {
		all += v
		switch {
		case strings.HasSuffix(k, " subjectaccessreviews"):
			sars += v
		case strings.HasSuffix(k, " events"):
			events += v
		case strings.HasPrefix(k, "get ") || strings.HasPrefix(k, "list "):
			reads += v
		}
		b.Logf("%-45s %6.1f/run", k, float64(v)/float64(b.N))
	}
	n := float64(b.N)
	b.ReportMetric(float64(all)/n, "requests/run")
	b.ReportMetric(float64(sars)/n, "sars/run")
	b.ReportMetric(float64(reads)/n, "reads/run")
	b.ReportMetric(float64(events)/n, "events/run")
}
