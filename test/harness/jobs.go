package harness

import (
	"context"
	"fmt"
	"testing"

	failurepb "go.temporal.io/api/failure/v1"

	"github.com/stretchr/testify/require"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/activities/execution"
	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/devenv"
	"github.com/remedy-dev/remedy/internal/seal"
)

// JobsOf lists the Jobs of execution k.
func JobsOf(t testing.TB, k *v1alpha1.KubernetesExecution) []batchv1.Job {
	t.Helper()
	var jobs batchv1.JobList
	require.NoError(t, kube.List(context.Background(), &jobs, ctrlclient.InNamespace(devenv.Namespace),
		ctrlclient.MatchingLabels{execution.LabelExecutionUID: string(k.UID)}))
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
		if a.HeartbeatDetails != nil && seal.DataConverter(env.Keys).FromPayloads(a.HeartbeatDetails, &progress) == nil {
			return progress.UID
		}
	}
	return ""
}

// Cordon marks the node unschedulable (or schedulable again), so a Job's Pod
// waits unscheduled until the test lets it run.
func Cordon(t testing.TB, unschedulable bool) {
	t.Helper()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: devenv.NodeName}}
	patch := []byte(fmt.Sprintf(`{"spec":{"unschedulable":%t}}`, unschedulable))
	require.NoError(t, kube.Patch(context.Background(), node, ctrlclient.RawPatch(types.MergePatchType, patch)))
}

// FailureMessage is what a failure Temporal holds says, opened with the
// keys: Remedy seals failures' messages too.
func FailureMessage(f *failurepb.Failure) string {
	if f == nil {
		return ""
	}
	return seal.FailureConverter(seal.DataConverter(env.Keys)).FailureToError(f).Error()
}
