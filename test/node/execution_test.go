package node

import (
	"context"
	"strings"
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
// image in the Job's Pod, as the action's ServiceAccount, asks the worker's
// exec gate, then reaches the API server through the kubernetes Service;
// the run completes and the new replicas become available.
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
	assert.Equal(t, "replicas: 1", k.Status.ExecutionResults.ResourcesAffected[0].Before)
	assert.Contains(t, k.Status.ExecutionResults.Logs, "scaled "+ns+"/Deployment/web", "the Pod's log, served by the kubelet")
	assert.Contains(t, k.Status.ExecutionResults.Logs, "the exec gate passed scale "+ns+"/Deployment/web", "the Pod asked the gate before its write")
	available(t, ns, "web", 3)
	harness.ReplayHistory(t, k.Status.WorkflowID, "execution-job.json")
}

// TestJobExecutorPodFailureFailsTheRun: the target is deleted while the
// Job's Pod waits to be scheduled; the Pod's `remedy exec` exits non-zero and
// the run fails with the Pod's termination message in its status.
func TestJobExecutorPodFailureFailsTheRun(t *testing.T) {
	ns := harness.Namespace(t)
	d := harness.Deployment(t, ns, "web", 1)
	uncordon := cordon(t)
	k := &v1alpha1.KubernetesExecution{ObjectMeta: metav1.ObjectMeta{Name: "scale-by-job", Namespace: ns}, Spec: v1alpha1.KubernetesExecutionSpec{
		Action: "scale", Target: target(ns, "web"), Executor: v1alpha1.ExecutorJob, MaxRetries: ptr.To[int32](0),
		Parameters: &v1alpha1.ActionParameters{Replicas: ptr.To[int32](3)}, RollbackWindow: v1alpha1.DurationOf(0),
	}}
	require.NoError(t, harness.Kube().Create(context.Background(), k))
	require.Eventually(t, func() bool { return len(harness.JobsOf(t, k)) == 1 }, runTimeout, 100*time.Millisecond, "the run creates its Job")
	require.NoError(t, harness.Kube().Delete(context.Background(), d))
	uncordon()

	k = harness.Eventually(t, k, runTimeout, func(k *v1alpha1.KubernetesExecution) bool { return k.Status.Phase.Terminal() })
	require.Equal(t, v1alpha1.PhaseFailed, k.Status.Phase, "%s: %s", k.Status.Reason, k.Status.Message)
	assert.Equal(t, v1alpha1.ReasonExecutionFailed, k.Status.Reason)
	assert.Contains(t, k.Status.Message, `scale `+ns+`/Deployment/web: deployments.apps "web" not found`, "the Pod's termination message")
	pods := jobPods(t, harness.JobsOf(t, k)[0].Name, 1, corev1.PodFailed)
	assert.NotZero(t, terminated(t, pods[0]).ExitCode)
}

// rolledOut holds once the Deployment's controller has observed its latest
// spec and every replica is updated and available, as the kubelet reports them.
const rolledOut = `package post.rolledout

pass if {
	input.target.status.observedGeneration == input.target.metadata.generation
	input.target.status.replicas == input.target.spec.replicas
	input.target.status.updatedReplicas == input.target.spec.replicas
	input.target.status.availableReplicas == input.target.spec.replicas
}
`

// TestAvailabilityPostconditionMetByARealRollout: a restart whose required
// postcondition is a completed rollout completes once the kubelet has
// replaced every Pod with a ready one.
func TestAvailabilityPostconditionMetByARealRollout(t *testing.T) {
	ns := harness.Namespace(t)
	harness.Deployment(t, ns, "web", 2)
	available(t, ns, "web", 2)
	oldPods := podNames(t, ns)
	k := execute(t, ns, "restart-web", v1alpha1.KubernetesExecutionSpec{
		Action: "restart", Target: target(ns, "web"), RollbackWindow: v1alpha1.DurationOf(0),
		PostConditions: []v1alpha1.Condition{{Name: "rolled-out", Rego: rolledOut, Required: true, Timeout: v1alpha1.DurationOf(runTimeout)}},
	}, v1alpha1.PhaseCompleted)
	require.Equal(t, v1alpha1.PhaseCompleted, k.Status.Phase, "%s: %s", k.Status.Reason, k.Status.Message)
	res := k.Status.ValidationResults.PostConditionResults
	require.Len(t, res, 1)
	assert.True(t, res[0].Passed)
	t.Logf("postcondition held after %d attempts", res[0].Attempts)
	d := available(t, ns, "web", 2)
	assert.Equal(t, int32(2), d.Status.AvailableReplicas)
	for name := range podNames(t, ns) {
		assert.False(t, oldPods[name], "pod %s survived the restart", name)
	}
}

// TestAvailabilityPostconditionFailsOnAStuckRollout: a set-image to an image
// the node cannot pull leaves the new Pod in ErrImagePull; the rollout never
// completes, the required postcondition fails and so does the run, while the
// old Pod keeps serving.
func TestAvailabilityPostconditionFailsOnAStuckRollout(t *testing.T) {
	ns := harness.Namespace(t)
	harness.Deployment(t, ns, "web", 1)
	available(t, ns, "web", 1)
	k := execute(t, ns, "bad-image", v1alpha1.KubernetesExecutionSpec{
		Action: "set-image", Target: target(ns, "web"), RollbackWindow: v1alpha1.DurationOf(0),
		Parameters:     &v1alpha1.ActionParameters{Container: "web", Image: "remedy.local/absent:1.0"},
		PostConditions: []v1alpha1.Condition{{Name: "rolled-out", Rego: rolledOut, Required: true, Timeout: v1alpha1.DurationOf(10 * time.Second)}},
	}, v1alpha1.PhaseFailed)
	require.Equal(t, v1alpha1.PhaseFailed, k.Status.Phase, "%s: %s", k.Status.Reason, k.Status.Message)
	assert.Equal(t, v1alpha1.ReasonPostConditionFailed, k.Status.Reason)
	assert.True(t, strings.HasPrefix(k.Status.Message, "required postcondition rolled-out failed; the change was kept ("), k.Status.Message)
	res := k.Status.ValidationResults.PostConditionResults
	require.Len(t, res, 1)
	assert.False(t, res[0].Passed)
	assert.GreaterOrEqual(t, res[0].Attempts, int32(2), "retried until its timeout")

	var pods corev1.PodList
	require.NoError(t, harness.Kube().List(context.Background(), &pods, ctrlclient.InNamespace(ns)))
	pulling := 0
	for _, p := range pods.Items {
		for _, c := range p.Status.ContainerStatuses {
			if w := c.State.Waiting; w != nil && (w.Reason == "ErrImagePull" || w.Reason == "ImagePullBackOff") {
				pulling++
			}
		}
	}
	assert.Equal(t, 1, pulling, "the new Pod cannot pull its image")
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}
	require.NoError(t, harness.Kube().Get(context.Background(), ctrlclient.ObjectKeyFromObject(d), d))
	assert.Equal(t, int32(1), d.Status.AvailableReplicas, "the old Pod keeps serving")
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
