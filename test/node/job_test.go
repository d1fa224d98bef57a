package node

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/activities"
	"github.com/remedy-dev/remedy/activities/actions"
	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/devenv"
	"github.com/remedy-dev/remedy/internal/release"
	"github.com/remedy-dev/remedy/test/harness"
)

// allowAll stands in for the write gate: these tests are about the Pod.
type allowAll struct{}

func (allowAll) Check(context.Context, activities.Write) error { return nil }

// runJob runs the job executor's activity as the worker's ServiceAccount
// with image, for a scale of ns/name, and returns its error.
func runJob(t *testing.T, image, ns, name string, timeout time.Duration) (activities.ExecuteResult, error) {
	t.Helper()
	cfg, err := devenv.ServiceAccountConfig(context.Background(), harness.Config(), devenv.Namespace, "remedy-worker")
	require.NoError(t, err)
	cs, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	jobs := &activities.Jobs{Client: cs, Namespace: devenv.Namespace, Image: image, HeartbeatEvery: time.Second, Gate: allowAll{}}
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	env.RegisterActivity(jobs)
	in := activities.JobInput{
		ExecutionNamespace: ns, ExecutionName: "scale-" + name, ExecutionUID: string(uuid.NewUUID()),
		Request: actions.Request{Action: "scale", Target: target(ns, name), Params: v1alpha1.ActionParameters{Replicas: ptr.To[int32](2)}},
		Timeout: timeout,
	}
	var res activities.ExecuteResult
	val, err := env.ExecuteActivity(jobs.RunJob, in)
	if err == nil {
		err = val.Get(&res)
	}
	return res, err
}

func appError(t *testing.T, err error) *temporal.ApplicationError {
	t.Helper()
	var app *temporal.ApplicationError
	require.True(t, errors.As(err, &app), "want an ApplicationError, got %v", err)
	return app
}

// TestJobPodFailureCarriesItsMessage: `remedy exec` in the Pod fails (the
// Deployment does not exist) and exits non-zero; the run's error is the
// Pod's own termination message.
func TestJobPodFailureCarriesItsMessage(t *testing.T) {
	ns := harness.Namespace(t)
	_, err := runJob(t, release.Image(), ns, "missing", time.Minute)
	require.Error(t, err)
	app := appError(t, err)
	assert.Equal(t, activities.ReasonExecutionFailed, app.Type(), app.Error())
	assert.Contains(t, app.Error(), `"missing" not found`)
}

// TestJobPodTimeout: a Pod that cannot start (the node is cordoned; the
// admission policy admits no other image to make it hang) runs into the
// Job's deadline, and the run fails ExecutionTimeout.
func TestJobPodTimeout(t *testing.T) {
	ns := harness.Namespace(t)
	harness.Deployment(t, ns, "web", 1)
	cordon(t, true)
	t.Cleanup(func() { cordon(t, false) })
	start := time.Now()
	_, err := runJob(t, release.Image(), ns, "web", 3*time.Second)
	require.Error(t, err)
	assert.Equal(t, activities.ReasonExecutionTimeout, appError(t, err).Type(), err.Error())
	t.Logf("timed out after %.1fs", time.Since(start).Seconds())
}

func cordon(t *testing.T, unschedulable bool) {
	t.Helper()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: devenv.NodeName}}
	patch := []byte(fmt.Sprintf(`{"spec":{"unschedulable":%t}}`, unschedulable))
	require.NoError(t, harness.Kube().Patch(context.Background(), node, ctrlclient.RawPatch(types.MergePatchType, patch)))
}
