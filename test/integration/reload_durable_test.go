package integration

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	sdkworker "go.temporal.io/sdk/worker"
	appsv1 "k8s.io/api/apps/v1"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/devenv"
	"github.com/remedy-dev/remedy/test/harness"
	"github.com/remedy-dev/remedy/worker"
	"github.com/remedy-dev/remedy/workflows"
)

// TestReloadSurvivesWorkerLossDuringDebounce stops a worker polling the
// remedy task queue in the middle of the debounce window and purges every
// cached workflow in this process (what a crash loses), then starts a worker
// again. The package's shared worker keeps polling too, so this does not
// show a period with no worker at all; it shows that the pending restart is
// held by Temporal (timer and signals in history), not by worker memory:
// whichever worker handles the timer rebuilds the state by replay and
// restarts exactly once.
func TestReloadSurvivesWorkerLossDuringDebounce(t *testing.T) {
	ctx := context.Background()
	ns := harness.Namespace(t)
	web := reloadDeployment(t, ns, "web", "prod")
	cm := reloadConfigMap(t, ns, "app", "prod", "v0")
	reloadPolicy(t, ns, 10*time.Second)
	waitBaseline(t, web, "app")
	gen := openWindow(t, web, cm, "v0.1")
	baseline := currentHash(t, web, "app")
	cfg, err := devenv.ServiceAccountConfig(ctx, harness.Config(), devenv.Namespace, "remedy-worker")
	require.NoError(t, err)
	startWorker := func() sdkworker.Worker {
		w, err := worker.New(worker.Options{Temporal: harness.Temporal(), PayloadKeys: harness.Keys(), Kube: cfg, ActionNamespace: devenv.Namespace})
		require.NoError(t, err)
		require.NoError(t, w.Start())
		return w
	}
	w := startWorker()

	setData(t, cm, "v1")
	id := v1alpha1.ReloadWorkflowID(ns, "Deployment", "web")
	waitPending(t, id, func(st workflows.ReloadStatus) bool { return st.DueAt != "" && len(st.Pending) == 1 })
	requireGeneration(t, web, gen)
	w.Stop()
	sdkworker.PurgeStickyWorkflowCache()
	w = startWorker()
	t.Cleanup(w.Stop)

	harness.Eventually(t, web, reloadTimeout, func(d *appsv1.Deployment) bool {
		h := d.Spec.Template.Annotations[hashKey("app")]
		return h != "" && h != baseline
	})
	settledGeneration(t, web, gen+1)
	require.NoError(t, harness.Temporal().GetWorkflow(ctx, id, "").Get(ctx, nil))
	iter := harness.Temporal().GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	scheduled := 0
	for iter.HasNext() {
		e, err := iter.Next()
		require.NoError(t, err)
		if e.GetEventType() == enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED {
			scheduled++
		}
	}
	assert.Equal(t, 2, scheduled, "one restart intent across the worker loss, after the one that opened the window")
}

// TestReloadTwoOperatorsGiveOneRollout runs a second operator beside the
// shared one, as during a leader handoff: both see the change and signal the
// same workflow ID, and the workload still rolls once.
func TestReloadTwoOperatorsGiveOneRollout(t *testing.T) {
	ns := harness.Namespace(t)
	web := reloadDeployment(t, ns, "web", "prod")
	cm := reloadConfigMap(t, ns, "app", "prod", "v0")
	reloadPolicy(t, ns, time.Second)
	gen := waitBaseline(t, web, "app")
	baseline := currentHash(t, web, "app")
	runPrivateReloadOperator(t)

	setData(t, cm, "v1")
	harness.Eventually(t, web, reloadTimeout, func(d *appsv1.Deployment) bool {
		h := d.Spec.Template.Annotations[hashKey("app")]
		return h != "" && h != baseline
	})
	settledGeneration(t, web, gen+1)
}

// A workload deleted while a change waits for its window to close: the
// restart finds it gone, and the run drops the change and ends without failing.
func TestReloadOfADeletedWorkloadDropsItsChange(t *testing.T) {
	ctx := context.Background()
	ns, web, cm, _ := reloadedDeployment(t, 3*time.Second)
	waitBaseline(t, web, "app")
	openWindow(t, web, cm, "v0.1")
	setData(t, cm, "v1")
	id := v1alpha1.ReloadWorkflowID(ns, "Deployment", "web")
	waitPending(t, id, func(st workflows.ReloadStatus) bool { return len(st.Pending) == 1 && st.DueAt != "" })
	require.NoError(t, harness.Kube().Delete(ctx, web))

	harness.WaitClosed(t, id, reloadTimeout)
	var res workflows.ReloadResult
	require.NoError(t, harness.Temporal().GetWorkflow(ctx, id, "").Get(ctx, &res))
	assert.Empty(t, res.Status.Pending)
	assert.Contains(t, res.Status.LastError, `"web" not found`)
	assert.Equal(t, 1, res.Status.TotalRestarts, "only the restart that opened the window")
	harness.ReplayHistory(t, id, "reload-workload-gone.json")
}
