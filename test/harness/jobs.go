package harness

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/activities"
	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/devenv"
)

// No kubelet runs here: these helpers play it for the job executor's pods.

// PendingPod plays the scheduler's absence: it waits for the Job controller
// to create a pod of job that has not finished yet.
func PendingPod(t testing.TB, job string) *corev1.Pod {
	t.Helper()
	cs := admin(t)
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		pods, err := cs.CoreV1().Pods(devenv.Namespace).List(context.Background(), metav1.ListOptions{LabelSelector: "job-name=" + job})
		require.NoError(t, err)
		for i := range pods.Items {
			if p := &pods.Items[i]; p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed && p.DeletionTimestamp == nil {
				return p
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	require.FailNow(t, "no pending pod", "job %s", job)
	return nil
}

// FinishPod plays the kubelet: the container terminated with exitCode and
// wrote msg to its termination log.
func FinishPod(t testing.TB, pod *corev1.Pod, exitCode int32, msg string) {
	t.Helper()
	pods := admin(t).CoreV1().Pods(pod.Namespace)
	phase := corev1.PodSucceeded
	if exitCode != 0 {
		phase = corev1.PodFailed
	}
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p, err := pods.Get(context.Background(), pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		now := metav1.Now()
		p.Status.Phase = phase
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{
			Name: "exec", Image: p.Spec.Containers[0].Image,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: exitCode, Message: msg, StartedAt: now, FinishedAt: now,
			}},
		}}
		_, err = pods.UpdateStatus(context.Background(), p, metav1.UpdateOptions{})
		return err
	}))
}

// JobsOf lists the Jobs of execution k.
func JobsOf(t testing.TB, k *v1alpha1.KubernetesExecution) []batchv1.Job {
	t.Helper()
	var jobs batchv1.JobList
	require.NoError(t, kube.List(context.Background(), &jobs, ctrlclient.InNamespace(devenv.Namespace),
		ctrlclient.MatchingLabels{activities.LabelExecutionUID: string(k.UID)}))
	return jobs.Items
}

// RecordedJobUID is the Job UID the run's pending step recorded with the server.
func RecordedJobUID(t testing.TB, id string) string {
	t.Helper()
	desc, err := env.Temporal.DescribeWorkflowExecution(context.Background(), id, "")
	require.NoError(t, err)
	for _, a := range desc.PendingActivities {
		var progress struct {
			UID string `json:"uid"`
		}
		if a.HeartbeatDetails != nil && converter.GetDefaultDataConverter().FromPayloads(a.HeartbeatDetails, &progress) == nil {
			return progress.UID
		}
	}
	return ""
}

func admin(t testing.TB) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(env.Config)
	require.NoError(t, err)
	return cs
}
