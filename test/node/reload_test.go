package node

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
)

// TestReloadIsACompletedRollout: a ConfigMap edit reloads the Deployment
// that mounts it; the rollout completes with new Pods, which serve the new
// config, and no old Pod is left.
func TestReloadIsACompletedRollout(t *testing.T) {
	ctx := context.Background()
	ns := harness.Namespace(t)
	require.NoError(t, harness.Kube().Create(ctx, &v1alpha1.ConfigReloadPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "reload", Namespace: ns},
		Spec: v1alpha1.ConfigReloadPolicySpec{
			ConfigMapSelector: metav1.LabelSelector{MatchLabels: map[string]string{"reload": "true"}},
			WorkloadSelector:  metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Debounce:          v1alpha1.DurationOf(2 * time.Second),
		},
	}))
	cm := &corev1.ConfigMap{
		// The policy's scope label: a ConfigMap applies to the workloads of its env.
		ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: ns, Labels: map[string]string{"reload": "true", "env": "prod"}},
		Data:       map[string]string{"mode": "a"},
	}
	require.NoError(t, harness.Kube().Create(ctx, cm))
	c := harness.DemoContainer("web")
	c.VolumeMounts = []corev1.VolumeMount{{Name: "settings", MountPath: "/etc/demo"}}
	labels := map[string]string{"app": "web"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns, Labels: map[string]string{"app": "web", "env": "prod"}},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{c}, Volumes: []corev1.Volume{{Name: "settings", VolumeSource: corev1.VolumeSource{
					ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}},
				}}}},
			},
		},
	}
	require.NoError(t, harness.Kube().Create(ctx, d))
	hash := v1alpha1.ConfigHashAnnotation("settings")
	harness.Eventually(t, d, runTimeout, func(d *appsv1.Deployment) bool { return d.Annotations[hash] != "" })
	before := available(t, ns, "web", 2)
	oldPods := podNames(t, ns)
	for name := range oldPods {
		assert.Contains(t, serve(t, ns, name), "mode: a")
	}

	start := time.Now()
	cm.Data = map[string]string{"mode": "b"}
	require.NoError(t, harness.Kube().Update(ctx, cm))
	harness.Eventually(t, d, runTimeout, func(d *appsv1.Deployment) bool {
		return d.Generation > before.Generation && d.Spec.Template.Annotations[hash] != ""
	})
	after := available(t, ns, "web", 2)
	var newPods map[string]bool
	require.Eventually(t, func() bool { newPods = podNames(t, ns); return len(newPods) == 2 }, runTimeout, 200*time.Millisecond, "the old Pods are gone")
	t.Logf("edit to a completed rollout in %.1fs", time.Since(start).Seconds())
	assert.Greater(t, after.Generation, before.Generation)
	for name := range newPods {
		assert.False(t, oldPods[name], "pod %s survived the reload", name)
		assert.Contains(t, serve(t, ns, name), "mode: b", "pod %s serves the new config", name)
	}
}

// serve is what the demo app of Pod ns/name answers.
func serve(t *testing.T, ns, name string) string {
	t.Helper()
	pod := &corev1.Pod{}
	require.NoError(t, harness.Kube().Get(context.Background(), ctrlclient.ObjectKey{Namespace: ns, Name: name}, pod))
	return get(t, fmt.Sprintf("http://%s:8080/", pod.Status.PodIP))
}
