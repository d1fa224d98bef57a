package integration

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/activities/execution"
	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/actions"
	"github.com/remedy-dev/remedy/internal/devenv"
	"github.com/remedy-dev/remedy/test/harness"
)

// The scale action's ServiceAccount is deleted: a Job's pod could never be
// created, so validation refuses the run at once, Forbidden, naming the
// account, and no Job is made (it used to end at ExecutionTimeout).
func TestMissingActionAccountFailsForbidden(t *testing.T) {
	ctx := context.Background()
	name := actions.ServiceAccountName("scale")
	var sa corev1.ServiceAccount
	require.NoError(t, harness.Kube().Get(ctx, ctrlclient.ObjectKey{Namespace: devenv.Namespace, Name: name}, &sa))
	require.NoError(t, harness.Kube().Delete(ctx, &sa))
	t.Cleanup(func() {
		restored := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: sa.Namespace, Name: sa.Name, Labels: sa.Labels, Annotations: sa.Annotations}}
		require.NoError(t, harness.Kube().Create(ctx, restored))
	})

	ns := harness.Namespace(t)
	harness.Deployment(t, ns, "web", 1)
	spec := scaleSpec(ns, "web", 3)
	spec.Executor = v1alpha1.ExecutorJob
	start := time.Now()
	k := createExecution(t, ns, "scale-no-account", spec)
	k = waitPhase(t, k, v1alpha1.PhaseFailed)
	t.Logf("refused %v after create", time.Since(start).Round(time.Millisecond))
	assert.Equal(t, "Forbidden", k.Status.Reason)
	assert.Equal(t, "ServiceAccount remedy-system/remedy-action-scale does not exist: the scale action runs as it; install deploy/actions/scale.yaml", k.Status.Message)
	assert.Equal(t, ptr.To(false), k.Status.ValidationResults.RBACValidation)
	assert.Nil(t, k.Status.ValidationResults.ResourceExists, "validation stopped before reading the target")

	var jobs batchv1.JobList
	require.NoError(t, harness.Kube().List(ctx, &jobs, ctrlclient.InNamespace(devenv.Namespace), ctrlclient.MatchingLabels{execution.LabelExecutionName: "scale-no-account"}))
	assert.Empty(t, jobs.Items, "no Job was created")
	assert.Equal(t, int32(1), replicasOf(t, ns, "web"))
}
