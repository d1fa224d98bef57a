package faults

import (
	"context"
	"fmt"
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
	"github.com/remedy-dev/remedy/test/procs"
	"github.com/remedy-dev/remedy/workflows"
)

const debounce = 5 * time.Second

// reloadDebounce: a ConfigMap edit restarts at once and opens the window; a
// second edit inside it waits for it to close; the process is killed inside
// the window and stays down past it. The second edit rolls exactly once.
// The operator is down for an edit too, which rolls once when it is back.
func reloadDebounce(t *testing.T, p *parts, what string) string {
	ns, edit := reloadTarget(t)
	gen := settled(t, ns, "web")
	edit("b") // the leading edge: restarts at once
	harness.Eventually(t, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns}}, time.Minute,
		func(d *appsv1.Deployment) bool { return d.Generation > gen })
	rolled := settled(t, ns, "web")
	require.Equal(t, gen+rollout, rolled, "the leading edge rolled once")
	edit("c")
	id := v1alpha1.ReloadWorkflowID(ns, "Deployment", "web")
	waitReloadPending(t, p, what, id)

	p.kill(t, what)
	want, note := reloadWhileDown(t, what, ns, id, rolled, edit)
	p.restart(t, what)

	harness.Eventually(t, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns}}, 2*time.Minute,
		func(d *appsv1.Deployment) bool { return d.Generation >= want })
	// The run closes once nothing is pending and the window after its last restart has passed.
	harness.WaitClosed(t, id, 2*time.Minute)
	require.Equal(t, want, generation(t, ns, "web"), "exactly one rollout per window")
	d := deployment(t, ns, "web")
	assert.Equal(t, d.Annotations[configHash], d.Spec.Template.Annotations[configHash], "the last rollout applied the newest data")
	rs := settledReplicaSets(t, ns, "web")
	assert.Equal(t, int(want-gen)/rollout+1, rs, "one ReplicaSet per rollout, and the first")
	return fmt.Sprintf("%s; generation +%d; %d ReplicaSets", note, d.Generation-gen, rs)
}

const (
	configHash = "remedy.dev/config-hash-settings"
	// rollout is a rollout's generations: the template change, with the hash annotations in the same write.
	rollout = 1
)

// reloadTarget creates a policy, its ConfigMap and Deployment web, waits
// for the baseline and returns the namespace and a function that edits the
// ConfigMap's data, retrying while a part comes back.
func reloadTarget(t *testing.T) (string, func(string)) {
	ctx := context.Background()
	ns := harness.Namespace(t)
	create(t, &v1alpha1.ConfigReloadPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "reload", Namespace: ns},
		Spec: v1alpha1.ConfigReloadPolicySpec{
			ConfigMapSelector: metav1.LabelSelector{MatchLabels: map[string]string{"reload": "true"}},
			WorkloadSelector:  metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Debounce:          v1alpha1.DurationOf(debounce),
		},
	})
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: ns, Labels: map[string]string{"reload": "true", "env": "prod"}},
		Data:       map[string]string{"mode": "a"},
	}
	create(t, cm)
	labels := map[string]string{"app": "web", "env": "prod"}
	create(t, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](0),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{harness.DemoContainer("web")}},
			},
		},
	})
	harness.Eventually(t, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns}}, time.Minute,
		func(d *appsv1.Deployment) bool { return d.Annotations[configHash] != "" })
	edit := func(v string) {
		t.Helper()
		require.Eventually(t, func() bool {
			var cur corev1.ConfigMap
			if harness.Kube().Get(ctx, ctrlclient.ObjectKeyFromObject(cm), &cur) != nil {
				return false
			}
			cur.Data["mode"] = v
			return harness.Kube().Update(ctx, &cur) == nil
		}, time.Minute, 200*time.Millisecond)
	}
	return ns, edit
}

// waitReloadPending waits until the run holds the change made inside its window.
func waitReloadPending(t *testing.T, p *parts, what, id string) {
	t.Helper()
	require.Eventually(t, func() bool {
		var st workflows.ReloadStatus
		tc := procs.Env().Temporal
		if what == upgraded {
			// The previous release answers unsealed, as it sealed nothing.
			tc = p.upgrade.previous
		}
		v, err := tc.QueryWorkflow(context.Background(), id, "", workflows.QueryStatus)
		return err == nil && v.Get(&st) == nil && len(st.Pending) == 1 && st.DueAt != ""
	}, 20*time.Second, 20*time.Millisecond, "the change within the window waits for it to close")
}

// reloadWhileDown checks what happens while what is down, and returns the
// generation the workload ends at and what the case showed.
func reloadWhileDown(t *testing.T, what, ns, id string, rolled int64, edit func(string)) (int64, string) {
	t.Helper()
	switch what {
	case operator:
		// The pending change is Temporal's: it rolls with the operator down.
		harness.Eventually(t, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns}}, time.Minute,
			func(d *appsv1.Deployment) bool { return d.Generation > rolled })
		require.Equal(t, rolled+rollout, settled(t, ns, "web"))
		edit("d")
		// The run closes a window after that restart; only the operator starts another.
		harness.WaitClosed(t, id, time.Minute)
		require.Equal(t, rolled+rollout, generation(t, ns, "web"), "nothing rolls for an edit while the operator is down")
		return rolled + 2*rollout, "edit inside the window rolled once while the operator was down; an edit while down rolled once after its restart"
	case apiserver:
		time.Sleep(down[what]) // the fault itself: the part stays down; asserts nothing
	default:
		stays(t, ns, "web", rolled, 2*debounce, "nothing rolls while "+what+" is down")
	}
	return rolled + rollout, "edit inside the window rolled once"
}
