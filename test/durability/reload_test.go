package durability

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	sdkworker "go.temporal.io/sdk/worker"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/devenv"
	"github.com/remedy-dev/remedy/test/harness"
	"github.com/remedy-dev/remedy/worker"
	"github.com/remedy-dev/remedy/workflows"
)

const debounce = 5 * time.Second

// startOperator runs the reload reconciler as remedy-operator until stop is called.
func startOperator(t *testing.T) (stop func()) {
	t.Helper()
	cfg, err := devenv.ServiceAccountConfig(context.Background(), harness.Config(), devenv.Namespace, "remedy-operator")
	require.NoError(t, err)
	return harness.StartReloadOperator(t, cfg)
}

// startWorker runs a worker as remedy-worker until stop is called; stopping
// also drops the process's cached workflow state, as a crash would.
func startWorker(t *testing.T) (stop func()) {
	t.Helper()
	cfg, err := devenv.ServiceAccountConfig(context.Background(), harness.Config(), devenv.Namespace, "remedy-worker")
	require.NoError(t, err)
	w, err := worker.New(worker.Options{Temporal: harness.Temporal(), PayloadKeys: harness.Keys(), Kube: cfg, ActionNamespace: devenv.Namespace})
	require.NoError(t, err)
	require.NoError(t, w.Start())
	return func() { w.Stop(); sdkworker.PurgeStickyWorkflowCache() }
}

type fixture struct {
	ns  string
	cm  *corev1.ConfigMap
	dep *appsv1.Deployment
}

func setup(t *testing.T) fixture { return setupWith(t, debounce) }

func setupWith(t *testing.T, debounce time.Duration) fixture {
	t.Helper()
	ctx := context.Background()
	f := fixture{ns: harness.Namespace(t)}
	// The operator's requester webhook stamps the policy's author; the test
	// runs its own reload reconciler, so the whole operator runs only for
	// the create, before there is anything to reload.
	stopOperator := harness.StartOperator(t)
	require.NoError(t, harness.Kube().Create(ctx, &v1alpha1.ConfigReloadPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "reload", Namespace: f.ns},
		Spec: v1alpha1.ConfigReloadPolicySpec{
			ConfigMapSelector: metav1.LabelSelector{MatchLabels: map[string]string{"reload": "true"}},
			WorkloadSelector:  metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Debounce:          v1alpha1.DurationOf(debounce),
		},
	}))
	stopOperator()
	f.cm = &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: f.ns, Labels: map[string]string{"reload": "true", "env": "prod"}},
		Data:       map[string]string{"mode": "a"},
	}
	require.NoError(t, harness.Kube().Create(ctx, f.cm))
	labels := map[string]string{"app": "web", "env": "prod"}
	f.dep = &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: f.ns, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{harness.DemoContainer("web")}},
			},
		},
	}
	require.NoError(t, harness.Kube().Create(ctx, f.dep))
	return f
}

func (f fixture) generation(t *testing.T) int64 {
	t.Helper()
	var d appsv1.Deployment
	require.NoError(t, harness.Kube().Get(context.Background(), ctrlclient.ObjectKeyFromObject(f.dep), &d))
	return d.Generation
}

func (f fixture) waitBaseline(t *testing.T) {
	t.Helper()
	harness.Eventually(t, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: f.ns}}, 20*time.Second,
		func(d *appsv1.Deployment) bool { return d.Annotations["remedy.dev/config-hash-settings"] != "" })
}

func (f fixture) edit(t *testing.T, value string) {
	t.Helper()
	f.cm.Data["mode"] = value
	require.NoError(t, harness.Kube().Update(context.Background(), f.cm))
}

// expectOneRollout waits for exactly one pod-template change after gen, then
// checks that no second one follows: the reload run closes only once nothing
// is pending and the window after its restart has passed.
func (f fixture) expectOneRollout(t *testing.T, gen int64) {
	t.Helper()
	f.waitRollout(t, gen)
	harness.WaitClosed(t, f.workflowID(), 30*time.Second)
	assert.Equal(t, gen+1, f.generation(t), "exactly one rollout")
}

func (f fixture) workflowID() string { return v1alpha1.ReloadWorkflowID(f.ns, "Deployment", "web") }

// waitRollout waits for a pod-template change after gen and returns the generation.
func (f fixture) waitRollout(t *testing.T, gen int64) int64 {
	t.Helper()
	d := harness.Eventually(t, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: f.ns}}, 30*time.Second,
		func(d *appsv1.Deployment) bool { return d.Generation > gen })
	return d.Generation
}

// A ConfigMap edited while no operator runs is noticed when one starts, from
// the state alone, and rolls the workload exactly once.
func TestChangeWhileOperatorIsDownRollsOnceAfterStart(t *testing.T) {
	defer startWorker(t)()
	f := setup(t)
	stopOperator := startOperator(t)
	f.waitBaseline(t)
	gen := f.generation(t)
	stopOperator()

	f.edit(t, "b")
	// Only a reload run restarts, and only the operator starts one.
	_, err := harness.Temporal().DescribeWorkflowExecution(context.Background(), f.workflowID(), "")
	var notFound *serviceerror.NotFound
	require.ErrorAs(t, err, &notFound, "no reload run while the operator is down")
	assert.Equal(t, gen, f.generation(t), "nothing rolls while the operator is down")

	defer startOperator(t)()
	f.expectOneRollout(t, gen)
}

// The worker dies inside the debounce window and stays down past it: the
// pending restart lives in Temporal, and happens exactly once when a worker
// is back.
func TestWorkerDownDuringDebounceRestartsOnceWhenBack(t *testing.T) {
	defer startOperator(t)()
	f := setup(t)
	stopWorker := startWorker(t)
	f.waitBaseline(t)
	// The first edit restarts at once (the leading edge) and opens a window.
	f.edit(t, "b")
	gen := f.waitRollout(t, f.generation(t))

	f.edit(t, "c")
	id := v1alpha1.ReloadWorkflowID(f.ns, "Deployment", "web")
	require.Eventually(t, func() bool {
		var st workflows.ReloadStatus
		v, err := harness.Temporal().QueryWorkflow(context.Background(), id, "", workflows.QueryStatus)
		return err == nil && v.Get(&st) == nil && len(st.Pending) == 1 && st.DueAt != ""
	}, 10*time.Second, 20*time.Millisecond, "the change within the window waits for it to close")
	fired := harness.Events(t, id, enumspb.EVENT_TYPE_TIMER_FIRED)
	stopWorker()

	// The window's timer fires, and the workflow task it calls for waits:
	// no worker takes it, so nothing can restart.
	harness.WaitEvents(t, id, enumspb.EVENT_TYPE_TIMER_FIRED, fired+1, 30*time.Second)
	d, err := harness.Temporal().DescribeWorkflowExecution(context.Background(), id, "")
	require.NoError(t, err)
	require.NotNil(t, d.GetPendingWorkflowTask(), "the fired timer waits for a worker")
	assert.Equal(t, gen, f.generation(t), "no worker, no restart")

	defer startWorker(t)()
	f.expectOneRollout(t, gen)
}

// A ConfigMap edited far faster than its debounce, for longer than one run's
// signal budget, continues as new inside the window and still restarts
// exactly once, a window after the last edit, with the newest data.
func TestEditsFasterThanTheDebounceContinueAsNewAndStillRestart(t *testing.T) {
	defer startOperator(t)()
	defer startWorker(t)()
	const window = 40 * time.Second
	f := setupWith(t, window)
	f.waitBaseline(t)
	f.edit(t, "b")
	gen := f.waitRollout(t, f.generation(t))
	ctx := context.Background()
	id := v1alpha1.ReloadWorkflowID(f.ns, "Deployment", "web")
	d, err := harness.Temporal().DescribeWorkflowExecution(ctx, id, "")
	require.NoError(t, err)
	firstRun := d.GetWorkflowExecutionInfo().GetExecution().GetRunId()

	continued, last := false, ""
	deadline := time.Now().Add(window - 10*time.Second)
	for i := 0; !continued && time.Now().Before(deadline); i++ {
		last = fmt.Sprintf("edit-%d", i)
		f.edit(t, last)
		if i%20 == 0 {
			d, err := harness.Temporal().DescribeWorkflowExecution(ctx, id, "")
			require.NoError(t, err)
			continued = d.GetWorkflowExecutionInfo().GetExecution().GetRunId() != firstRun
		}
	}
	require.True(t, continued, "the run continued as new inside the window")
	assert.Equal(t, gen, f.generation(t), "nothing restarts within the window")
	first, err := harness.Temporal().DescribeWorkflowExecution(ctx, id, firstRun)
	require.NoError(t, err)
	assert.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW, first.GetWorkflowExecutionInfo().GetStatus())
	t.Logf("first run: %d events", first.GetWorkflowExecutionInfo().GetHistoryLength())

	// Each edit pushed the restart to a window after itself (well within
	// maxWait), and the run that continued as new carries that due time.
	got := harness.Eventually(t, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: f.ns}}, window+10*time.Second,
		func(d *appsv1.Deployment) bool { return d.Generation > gen }).Generation
	assert.Equal(t, gen+1, got)
	harness.WaitClosed(t, id, window+10*time.Second)
	assert.Equal(t, gen+1, f.generation(t), "exactly one restart for every edit in the window")
	var dep appsv1.Deployment
	require.NoError(t, harness.Kube().Get(ctx, ctrlclient.ObjectKeyFromObject(f.dep), &dep))
	var cm corev1.ConfigMap
	require.NoError(t, harness.Kube().Get(ctx, ctrlclient.ObjectKeyFromObject(f.cm), &cm))
	assert.Equal(t, last, cm.Data["mode"])
	assert.Equal(t, dep.Annotations["remedy.dev/config-hash-settings"], dep.Spec.Template.Annotations["remedy.dev/config-hash-settings"],
		"the restart applied the newest data")
	// The run that continued as new (the next one only waits out the window).
	harness.ReplayRun(t, id, firstRun, "reload-continued-as-new.json")
}
