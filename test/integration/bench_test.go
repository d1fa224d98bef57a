package integration

import (
	"context"
	"fmt"
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
			time.Sleep(5 * time.Millisecond)
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
