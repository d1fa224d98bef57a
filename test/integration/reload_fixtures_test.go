package integration

import (
	"context"
	"crypto/rand"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/test/harness"
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

// requireGeneration asserts d's generation is want now. The caller first
// waits for the fact that proves no write is still coming (the reload run
// closed, an approval pending, a restart refused).
func requireGeneration(t testing.TB, d *appsv1.Deployment, want int64) {
	t.Helper()
	require.NoError(t, harness.Kube().Get(context.Background(), ctrlclient.ObjectKeyFromObject(d), d))
	require.Equal(t, want, d.Generation, "%s/%s pod template changed unexpectedly: %v", d.Namespace, d.Name, d.Spec.Template.Annotations)
}

// settledGeneration waits until d's reload run has closed, which it does
// only once nothing is pending and the window after its last restart has
// passed (a later change starts a new run), then asserts the generation is
// want: a late second rollout would have come from that run.
func settledGeneration(t testing.TB, d *appsv1.Deployment, want int64) {
	t.Helper()
	harness.WaitClosed(t, v1alpha1.ReloadWorkflowID(d.Namespace, "Deployment", d.Name), reloadTimeout)
	requireGeneration(t, d, want)
}

// reconciledAfter creates a ConfigMap the policy selects and waits until
// the policy's status lists it. The operator signals before it writes the
// status, from a cache that saw every earlier edit first; so from then on,
// any restart those edits asked for has been signalled.
func reconciledAfter(t testing.TB, ns, policy, env string) {
	t.Helper()
	probe := reloadConfigMap(t, ns, "probe-"+strings.ToLower(rand.Text()[:6]), env, "p")
	harness.Eventually(t, &v1alpha1.ConfigReloadPolicy{ObjectMeta: metav1.ObjectMeta{Name: policy, Namespace: ns}}, reloadTimeout,
		func(p *v1alpha1.ConfigReloadPolicy) bool {
			return slices.Contains(p.Status.WatchedConfigMaps, probe.Name)
		})
}

// currentHash is the hash the operator computes, read back from a workload it restarted or baselined.
func currentHash(t testing.TB, d *appsv1.Deployment, cm string) string {
	t.Helper()
	require.NoError(t, harness.Kube().Get(context.Background(), ctrlclient.ObjectKeyFromObject(d), d))
	return d.Annotations[hashKey(cm)]
}

func waitPending(t *testing.T, id string, cond func(workflows.ReloadStatus) bool) {
	t.Helper()
	require.Eventually(t, func() bool {
		var st workflows.ReloadStatus
		return queryReload(id, &st) == nil && cond(st)
	}, reloadTimeout, 100*time.Millisecond, "reload workflow %s never reached the expected state", id)
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

// runPrivateReloadOperator runs a second, reload-only operator as cluster-admin until the test ends.
func runPrivateReloadOperator(t *testing.T) {
	t.Cleanup(startReloadOperator(t))
}

// startReloadOperator starts a reload-only operator as cluster-admin and
// returns the function that stops it.
func startReloadOperator(t testing.TB) (stop func()) {
	return harness.StartReloadOperator(t, harness.Config())
}
