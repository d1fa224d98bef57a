package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	sdkworker "go.temporal.io/sdk/worker"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/devenv"
	"github.com/remedy-dev/remedy/internal/metrics"
	"github.com/remedy-dev/remedy/test/harness"
	"github.com/remedy-dev/remedy/worker"
	"github.com/remedy-dev/remedy/workflows"
)

const reloadTimeout = 30 * time.Second

// reloadPolicy selects ConfigMaps and Deployments labelled reload=true, scoped by env.
func reloadPolicy(t testing.TB, ns string, debounce time.Duration) *v1alpha1.ConfigReloadPolicy {
	t.Helper()
	p := &v1alpha1.ConfigReloadPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "reload", Namespace: ns},
		Spec: v1alpha1.ConfigReloadPolicySpec{
			ConfigMapSelector: metav1.LabelSelector{MatchLabels: map[string]string{"reload": "true"}},
			WorkloadSelector:  metav1.LabelSelector{MatchLabels: map[string]string{"reload": "true"}},
			Debounce:          v1alpha1.DurationOf(debounce),
			Retry:             &v1alpha1.RetrySpec{InitialInterval: v1alpha1.DurationOf(time.Second), MaxInterval: v1alpha1.DurationOf(4 * time.Second)},
		},
	}
	require.NoError(t, harness.Kube().Create(context.Background(), p))
	return p
}

// reloadDeployment creates a Deployment labelled for reloadPolicy; mutate
// changes it before it is created.
func reloadDeployment(t testing.TB, ns, name, env string, mutate ...func(*appsv1.Deployment)) *appsv1.Deployment {
	t.Helper()
	sel := map[string]string{"app": name}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app": name, "reload": "true", "env": env}},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](0),
			Selector: &metav1.LabelSelector{MatchLabels: sel},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: sel},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{harness.DemoContainer(name)}},
			},
		},
	}
	for _, m := range mutate {
		m(d)
	}
	require.NoError(t, harness.Kube().Create(context.Background(), d))
	return d
}

func reloadConfigMap(t testing.TB, ns, name, env, value string) *corev1.ConfigMap {
	t.Helper()
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"reload": "true", "env": env}},
		Data:       map[string]string{"value": value},
	}
	require.NoError(t, harness.Kube().Create(context.Background(), cm))
	return cm
}

func setData(t testing.TB, cm *corev1.ConfigMap, value string) {
	t.Helper()
	cm.Data = map[string]string{"value": value}
	require.NoError(t, harness.Kube().Update(context.Background(), cm))
}

func hashKey(cm string) string { return v1alpha1.ConfigHashAnnotation(cm) }

// waitBaseline waits until the operator recorded a baseline for cm and returns the generation then.
func waitBaseline(t testing.TB, d *appsv1.Deployment, cm string) int64 {
	t.Helper()
	d = harness.Eventually(t, d, reloadTimeout, func(d *appsv1.Deployment) bool { return d.Annotations[hashKey(cm)] != "" })
	return d.Generation
}

// waitTemplateHash waits until the pod template carries the wanted hash of cm.
func waitTemplateHash(t testing.TB, d *appsv1.Deployment, cm, hash string) *appsv1.Deployment {
	t.Helper()
	return harness.Eventually(t, d, reloadTimeout, func(d *appsv1.Deployment) bool {
		return d.Spec.Template.Annotations[hashKey(cm)] == hash
	})
}

// openWindow restarts d with a first edit of cm, which the leading edge
// applies at once, so edits right after it fall within its debounce window;
// it returns the generation after that restart.
func openWindow(t testing.TB, d *appsv1.Deployment, cm *corev1.ConfigMap, value string) int64 {
	t.Helper()
	before := currentHash(t, d, cm.Name)
	setData(t, cm, value)
	d = harness.Eventually(t, d, reloadTimeout, func(d *appsv1.Deployment) bool {
		h := d.Spec.Template.Annotations[hashKey(cm.Name)]
		return h != "" && h != before
	})
	return d.Generation
}

// stableGeneration asserts the generation stays at want for a while, so a late second rollout would show.
func stableGeneration(t testing.TB, d *appsv1.Deployment, want int64, for_ time.Duration) {
	t.Helper()
	deadline := time.Now().Add(for_)
	for time.Now().Before(deadline) {
		require.NoError(t, harness.Kube().Get(context.Background(), ctrlclient.ObjectKeyFromObject(d), d))
		require.Equal(t, want, d.Generation, "%s/%s pod template changed unexpectedly: %v", d.Namespace, d.Name, d.Spec.Template.Annotations)
		time.Sleep(100 * time.Millisecond)
	}
}

// currentHash is the hash the operator computes, read back from a workload it restarted or baselined.
func currentHash(t testing.TB, d *appsv1.Deployment, cm string) string {
	t.Helper()
	require.NoError(t, harness.Kube().Get(context.Background(), ctrlclient.ObjectKeyFromObject(d), d))
	return d.Annotations[hashKey(cm)]
}

func TestReloadCoalescesBurstIntoOneRolloutPerWorkload(t *testing.T) {
	ctx := context.Background()
	ns := harness.Namespace(t)
	web, api := reloadDeployment(t, ns, "web", "prod"), reloadDeployment(t, ns, "api", "prod")
	batch := reloadDeployment(t, ns, "batch", "test")
	cm := reloadConfigMap(t, ns, "app", "prod", "v0")
	reloadConfigMap(t, ns, "app-test", "test", "v0")
	reloadPolicy(t, ns, 5*time.Second)
	gens := map[*appsv1.Deployment]int64{web: waitBaseline(t, web, "app"), api: waitBaseline(t, api, "app"), batch: waitBaseline(t, batch, "app-test")}
	// The first edit restarts at once (the leading edge); the burst after it falls within its window.
	openWindow(t, web, cm, "v0.1")
	first := waitTemplateHash(t, api, "app", currentHash(t, web, "app")).Spec.Template.Annotations[hashKey("app")]
	baselineHash := currentHash(t, web, "app")
	restarts := counterValue(metrics.ReloadRestarts.WithLabelValues("prod"))
	debounced := counterValue(metrics.ReloadDebounced.WithLabelValues("prod"))

	for i := 1; i <= 20; i++ {
		setData(t, cm, fmt.Sprintf("v%d", i))
		time.Sleep(30 * time.Millisecond)
	}

	// The last edit's hash reaches both prod workloads, in one pod-template change each.
	web = harness.Eventually(t, web, reloadTimeout, func(d *appsv1.Deployment) bool {
		return d.Spec.Template.Annotations[hashKey("app")] != "" && d.Annotations[hashKey("app")] != baselineHash
	})
	final := web.Spec.Template.Annotations[hashKey("app")]
	waitTemplateHash(t, api, "app", final)
	time.Sleep(6 * time.Second)
	for d, g := range gens {
		want := g + 2 // the first edit at once, the burst once when its window closed
		if d == batch {
			want = g // another scope
		}
		stableGeneration(t, d, want, 500*time.Millisecond)
	}
	assert.Equal(t, final, currentHash(t, api, "app"), "baseline follows the restart")
	assert.NotEmpty(t, web.Spec.Template.Annotations[v1alpha1.RestartedAtAnnotation])
	assert.GreaterOrEqual(t, counterValue(metrics.ReloadRestarts.WithLabelValues("prod"))-restarts, 2.0)
	assert.Greater(t, counterValue(metrics.ReloadDebounced.WithLabelValues("prod")), debounced, "edits folded into the restart are counted")

	// One Event per restart names the ConfigMap and its hash.
	var evs eventsv1.EventList
	require.NoError(t, harness.Kube().List(ctx, &evs, ctrlclient.InNamespace(ns)))
	var notes []string
	for _, e := range evs.Items {
		if e.Reason == "ConfigReloaded" && e.Regarding.Name == "web" {
			notes = append(notes, e.Note)
		}
	}
	require.Len(t, notes, 2)
	assert.ElementsMatch(t, []bool{true, true}, []bool{
		strings.Contains(notes[0], "app="+final) || strings.Contains(notes[1], "app="+final),
		strings.Contains(notes[0], "app="+first) || strings.Contains(notes[1], "app="+first)})

	// The policy's status lists what it watches and the last restart.
	p := harness.Eventually(t, &v1alpha1.ConfigReloadPolicy{ObjectMeta: metav1.ObjectMeta{Name: "reload", Namespace: ns}}, reloadTimeout,
		func(p *v1alpha1.ConfigReloadPolicy) bool {
			for _, w := range p.Status.Workloads {
				if w.Name == "web" && w.LastRestart != nil && w.ConfigHash == final {
					return true
				}
			}
			return false
		})
	assert.Equal(t, []string{"app", "app-test"}, p.Status.WatchedConfigMaps)
	assert.True(t, meta.IsStatusConditionTrue(p.Status.Conditions, v1alpha1.ConditionReady))

	harness.ReplayHistory(t, v1alpha1.ReloadWorkflowID(ns, "Deployment", "web"), "reload-coalesced.json")
}

func TestReloadTwoConfigMapsEditedTogetherGiveOneRollout(t *testing.T) {
	ns := harness.Namespace(t)
	web := reloadDeployment(t, ns, "web", "prod")
	app, flags := reloadConfigMap(t, ns, "app", "prod", "a0"), reloadConfigMap(t, ns, "flags", "prod", "f0")
	reloadPolicy(t, ns, 5*time.Second)
	waitBaseline(t, web, "app")
	waitBaseline(t, web, "flags")
	gen := openWindow(t, web, app, "a0.1")
	oldApp, oldFlags := currentHash(t, web, "app"), currentHash(t, web, "flags")

	setData(t, app, "a1")
	time.Sleep(200 * time.Millisecond)
	setData(t, flags, "f1")

	web = harness.Eventually(t, web, reloadTimeout, func(d *appsv1.Deployment) bool {
		a, f := d.Spec.Template.Annotations[hashKey("app")], d.Spec.Template.Annotations[hashKey("flags")]
		return a != "" && a != oldApp && f != "" && f != oldFlags
	})
	time.Sleep(6 * time.Second)
	stableGeneration(t, web, gen+1, 500*time.Millisecond)
}

func TestReloadNoRolloutWithoutDataChange(t *testing.T) {
	ctx := context.Background()
	ns := harness.Namespace(t)
	web := reloadDeployment(t, ns, "web", "prod")
	other := reloadDeployment(t, ns, "other", "staging")
	cm := reloadConfigMap(t, ns, "app", "prod", "v0")
	reloadPolicy(t, ns, time.Second)
	gen := waitBaseline(t, web, "app")
	otherGen := other.Generation

	tests := []struct {
		name string
		edit func(t *testing.T)
	}{
		{"metadata-only edit", func(t *testing.T) {
			cm.Annotations = map[string]string{"touched": time.Now().String()}
			require.NoError(t, harness.Kube().Update(ctx, cm))
		}},
		{"identical re-apply", func(t *testing.T) { setData(t, cm, "v0") }},
		{"operator restart with unchanged data", func(t *testing.T) {
			// A second operator starting from scratch lists everything again, as after a restart or leader change.
			runPrivateReloadOperator(t)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.edit(t)
			stableGeneration(t, web, gen, 3*time.Second)
			stableGeneration(t, other, otherGen, 100*time.Millisecond)
		})
	}
	assert.Empty(t, other.Spec.Template.Annotations, "a workload in another scope is never touched")
}

// runPrivateReloadOperator runs a second, reload-only operator as cluster-admin until the test ends.
func runPrivateReloadOperator(t *testing.T) {
	t.Cleanup(startReloadOperator(t))
}

// startReloadOperator starts a reload-only operator as cluster-admin and
// returns the function that stops it.
func startReloadOperator(t testing.TB) (stop func()) {
	return harness.StartReloadOperator(t, harness.Config())
}

// denyRestarts installs a ValidatingAdmissionPolicy that rejects any
// Deployment update in ns carrying the restartedAt annotation, and waits
// until the API server enforces it. It returns a function that lifts it.
func denyRestarts(t *testing.T, ns string) (lift func()) {
	ctx := context.Background()
	lift = denyInNamespace(t, ns, "deny-restarts-"+ns, []admissionv1.OperationType{admissionv1.Update},
		admissionv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments"}},
		`!has(object.spec.template.metadata.annotations) || !('`+v1alpha1.RestartedAtAnnotation+`' in object.spec.template.metadata.annotations)`,
		"restarts are frozen")

	probe := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns}}
	patch := ctrlclient.RawPatch(types.MergePatchType, []byte(`{"spec":{"template":{"metadata":{"annotations":{"`+v1alpha1.RestartedAtAnnotation+`":"probe"}}}}}`))
	deadline := time.Now().Add(reloadTimeout)
	for harness.Kube().Patch(ctx, probe, patch, ctrlclient.DryRunAll) == nil {
		require.True(t, time.Now().Before(deadline), "admission policy never enforced")
		time.Sleep(100 * time.Millisecond)
	}
	return lift
}

// denyInNamespace installs a ValidatingAdmissionPolicy, bound to ns, that
// refuses ops on rule's resources wherever expression is false, with message.
// It returns the function that lifts it, which also runs when the test ends;
// the caller waits until the API server enforces it.
func denyInNamespace(t *testing.T, ns, name string, ops []admissionv1.OperationType, rule admissionv1.Rule, expression, message string) (lift func()) {
	ctx := context.Background()
	vap := &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionv1.Fail),
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionv1.RuleWithOperations{Operations: ops, Rule: rule},
			}}},
			Validations: []admissionv1.Validation{{Expression: expression, Message: message}},
		},
	}
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        name,
			ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny},
			MatchResources: &admissionv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}}},
		},
	}
	require.NoError(t, harness.Kube().Create(ctx, vap))
	require.NoError(t, harness.Kube().Create(ctx, binding))
	lift = func() {
		_ = harness.Kube().Delete(ctx, binding)
		_ = harness.Kube().Delete(ctx, vap)
	}
	t.Cleanup(lift)
	return lift
}

// waitFailedAttempts waits until the workflow's restart activity has failed at least n times.
func waitFailedAttempts(t *testing.T, id string, n int32) {
	t.Helper()
	deadline := time.Now().Add(reloadTimeout)
	for {
		// The operator may not have signalled yet: not found is retried too.
		d, err := harness.Temporal().DescribeWorkflowExecution(context.Background(), id, "")
		if pa := d.GetPendingActivities(); err == nil && len(pa) == 1 && pa[0].GetAttempt() > n {
			assert.Contains(t, harness.FailureMessage(pa[0].GetLastFailure()), "restarts are frozen")
			return
		}
		require.True(t, time.Now().Before(deadline), "restart was not retried %d times", n)
		time.Sleep(200 * time.Millisecond)
	}
}

func TestReloadRetriesTransientFailureWithBackoff(t *testing.T) {
	tests := []struct {
		name      string
		supersede bool
		history   string
	}{
		{"denied patch is retried until admitted", false, "reload-retried.json"},
		{"newer change supersedes a failing intent", true, "reload-superseded.json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns := harness.Namespace(t)
			env := "retry-" + ns
			web := reloadDeployment(t, ns, "web", env)
			cm := reloadConfigMap(t, ns, "app", env, "v0")
			reloadPolicy(t, ns, time.Second)
			gen := waitBaseline(t, web, "app")
			baseline := currentHash(t, web, "app")
			lift := denyRestarts(t, ns)

			setData(t, cm, "v1")
			id := v1alpha1.ReloadWorkflowID(ns, "Deployment", "web")
			waitFailedAttempts(t, id, 2)
			stableGeneration(t, web, gen, 100*time.Millisecond)
			assert.GreaterOrEqual(t, counterValue(metrics.ReloadErrors.WithLabelValues(env)), 2.0)
			assert.GreaterOrEqual(t, counterValue(metrics.ReloadRetries.WithLabelValues(env)), 1.0)
			if tt.supersede {
				var stale workflows.ReloadStatus
				require.NoError(t, queryReload(id, &stale))
				require.Len(t, stale.Pending, 1)
				setData(t, cm, "v2")
				waitPending(t, id, func(st workflows.ReloadStatus) bool {
					return len(st.Pending) == 1 && st.Pending[0].Hash != stale.Pending[0].Hash
				})
			}
			lift()

			web = harness.Eventually(t, web, reloadTimeout, func(d *appsv1.Deployment) bool {
				h := d.Spec.Template.Annotations[hashKey("app")]
				return h != "" && h != baseline
			})
			final := web.Spec.Template.Annotations[hashKey("app")]
			time.Sleep(2 * time.Second)
			stableGeneration(t, web, gen+1, 500*time.Millisecond)
			harness.ReplayHistory(t, id, tt.history)
			if tt.supersede {
				// The applied hash is the newest one: the stale intent never landed.
				cmHash := currentHash(t, web, "app")
				assert.Equal(t, final, cmHash)
				var st workflows.ReloadStatus
				require.NoError(t, queryReload(id, &st))
				assert.Equal(t, 1, st.TotalRestarts)
			}
		})
	}
}

func waitPending(t *testing.T, id string, cond func(workflows.ReloadStatus) bool) {
	t.Helper()
	deadline := time.Now().Add(reloadTimeout)
	for {
		var st workflows.ReloadStatus
		if err := queryReload(id, &st); err == nil && cond(st) {
			return
		}
		require.True(t, time.Now().Before(deadline), "reload workflow %s never reached the expected state", id)
		time.Sleep(100 * time.Millisecond)
	}
}

func queryReload(id string, st *workflows.ReloadStatus) error {
	v, err := harness.Temporal().QueryWorkflow(context.Background(), id, "", workflows.QueryStatus)
	if err != nil {
		return fmt.Errorf("query %s: %w", id, err)
	}
	return v.Get(st)
}

// counterValue reads a counter of the in-process worker.
func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return -1
	}
	return m.GetCounter().GetValue()
}

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
	stableGeneration(t, web, gen, 100*time.Millisecond)
	w.Stop()
	sdkworker.PurgeStickyWorkflowCache()
	w = startWorker()
	t.Cleanup(w.Stop)

	harness.Eventually(t, web, reloadTimeout, func(d *appsv1.Deployment) bool {
		h := d.Spec.Template.Annotations[hashKey("app")]
		return h != "" && h != baseline
	})
	time.Sleep(2 * time.Second)
	stableGeneration(t, web, gen+1, 500*time.Millisecond)
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
	time.Sleep(2 * time.Second)
	stableGeneration(t, web, gen+1, 500*time.Millisecond)
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
