package node

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/test/harness"
)

const runTimeout = 90 * time.Second

func execute(t *testing.T, ns, name string, spec v1alpha1.KubernetesExecutionSpec, phase v1alpha1.Phase) *v1alpha1.KubernetesExecution {
	t.Helper()
	k := &v1alpha1.KubernetesExecution{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: spec}
	require.NoError(t, harness.Kube().Create(context.Background(), k))
	return harness.Eventually(t, k, runTimeout, func(k *v1alpha1.KubernetesExecution) bool {
		return k.Status.Phase == phase || k.Status.Phase == v1alpha1.PhaseFailed || k.Status.Phase == v1alpha1.PhaseCompleted
	})
}

func target(ns, name string) v1alpha1.ObjectRef {
	return v1alpha1.ObjectRef{APIVersion: "apps/v1", Kind: "Deployment", Namespace: ns, Name: name}
}

func available(t *testing.T, ns, name string, replicas int32) *appsv1.Deployment {
	t.Helper()
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	return harness.Eventually(t, d, runTimeout, func(d *appsv1.Deployment) bool {
		return d.Status.ObservedGeneration == d.Generation && d.Status.UpdatedReplicas == replicas &&
			d.Status.AvailableReplicas == replicas && d.Status.Replicas == replicas
	})
}

func podNames(t *testing.T, ns string) map[string]bool {
	t.Helper()
	pods := &corev1.PodList{}
	require.NoError(t, harness.Kube().List(context.Background(), pods, ctrlclient.InNamespace(ns)))
	names := map[string]bool{}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			names[p.Name] = true
		}
	}
	return names
}

// TestJobExecutorScalesFromARealPod: `remedy exec` runs from the imported
// image in the Job's Pod, as the action's ServiceAccount, reaching the API
// server through the kubernetes Service; the run completes and the new
// replicas become available.
func TestJobExecutorScalesFromARealPod(t *testing.T) {
	ns := harness.Namespace(t)
	harness.Deployment(t, ns, "web", 1)
	available(t, ns, "web", 1)
	start := time.Now()
	k := execute(t, ns, "scale-by-job", v1alpha1.KubernetesExecutionSpec{
		Action: "scale", Target: target(ns, "web"), Executor: v1alpha1.ExecutorJob,
		Parameters: &v1alpha1.ActionParameters{Replicas: ptr.To[int32](3)}, RollbackWindow: v1alpha1.DurationOf(0),
	}, v1alpha1.PhaseCompleted)
	require.Equal(t, v1alpha1.PhaseCompleted, k.Status.Phase, "%s: %s", k.Status.Reason, k.Status.Message)
	t.Logf("completed through a Job Pod in %.1fs", time.Since(start).Seconds())
	require.NotNil(t, k.Status.ExecutionResults)
	assert.NotEmpty(t, k.Status.ExecutionResults.JobName)
	available(t, ns, "web", 3)
}

// TestRestartIsACompletedRollout: a restart run completes, and the
// Deployment's rollout replaces every Pod with new ones that become ready.
func TestRestartIsACompletedRollout(t *testing.T) {
	ns := harness.Namespace(t)
	harness.Deployment(t, ns, "web", 2)
	before := available(t, ns, "web", 2)
	oldPods := podNames(t, ns)
	start := time.Now()
	k := execute(t, ns, "restart-web", v1alpha1.KubernetesExecutionSpec{Action: "restart", Target: target(ns, "web")}, v1alpha1.PhaseCompleted)
	require.Equal(t, v1alpha1.PhaseCompleted, k.Status.Phase, "%s: %s", k.Status.Reason, k.Status.Message)
	after := available(t, ns, "web", 2)
	t.Logf("restart run and rollout done in %.1fs", time.Since(start).Seconds())
	assert.Greater(t, after.Generation, before.Generation)
	newPods := podNames(t, ns)
	require.Eventually(t, func() bool { newPods = podNames(t, ns); return len(newPods) == 2 }, runTimeout, 200*time.Millisecond)
	for name := range newPods {
		assert.False(t, oldPods[name], "pod %s survived the restart", name)
	}
}
