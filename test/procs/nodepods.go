package procs

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/remedy-dev/remedy/internal/devenv"
	steps "github.com/remedy-dev/remedy/internal/install"
	"github.com/remedy-dev/remedy/internal/release"
)

// InstalledDeployments are the Deployments the install procedure applies
// (internal/install renders its steps), as declared.
func InstalledDeployments(t testing.TB) []appsv1.Deployment {
	t.Helper()
	var out []appsv1.Deployment
	for _, part := range steps.Parts {
		objs, err := steps.Render(Root, part)
		require.NoError(t, err)
		for _, o := range objs {
			if o["kind"] != "Deployment" {
				continue
			}
			var d appsv1.Deployment
			require.NoError(t, Convert(o, &d))
			out = append(out, d)
		}
	}
	return out
}

// RolledOut: every replica runs the current template and is Ready.
func RolledOut(d *appsv1.Deployment) bool {
	want := *d.Spec.Replicas
	return d.Status.ObservedGeneration == d.Generation && d.Status.Replicas == want &&
		d.Status.UpdatedReplicas == want && d.Status.ReadyReplicas == want && d.Status.AvailableReplicas == want
}

// RunningPods are d's live Pods.
func RunningPods(t testing.TB, d appsv1.Deployment) []corev1.Pod {
	t.Helper()
	pods, err := Clientset(t).CoreV1().Pods(d.Namespace).List(context.Background(), metav1.ListOptions{LabelSelector: labels.SelectorFromSet(d.Spec.Selector.MatchLabels).String()})
	require.NoError(t, err)
	var out []corev1.Pod
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// ReadyTimeout bounds how long the installed Deployments take to become
// Ready once their certificates exist; they take seconds.
const ReadyTimeout = 3 * time.Minute

// WaitRolledOut waits until every Deployment of ds is rolled out as Pods of
// this tree's image on the node, and logs how long each took since since,
// and each Pod from creation to Ready.
func WaitRolledOut(t testing.TB, ds []appsv1.Deployment, since time.Time) {
	t.Helper()
	ctx := context.Background()
	cs := Clientset(t)
	pending := map[string]bool{}
	for _, d := range ds {
		pending[d.Name] = true
	}
	var last string
	require.Eventually(t, func() bool {
		for name := range pending {
			d, err := cs.AppsV1().Deployments(devenv.Namespace).Get(ctx, name, metav1.GetOptions{})
			if err != nil || !RolledOut(d) {
				last = describe(ctx, t, name)
				continue
			}
			delete(pending, name)
			t.Logf("%s: %d/%d Ready after %.1fs", name, d.Status.ReadyReplicas, *d.Spec.Replicas, time.Since(since).Seconds())
		}
		return len(pending) == 0
	}, ReadyTimeout, 250*time.Millisecond, "not Ready: %v; last seen:\n%s", pending, last)
	for _, d := range ds {
		for _, p := range RunningPods(t, d) {
			t.Logf("%s: created to Ready in %s", p.Name, podReadyAfter(p))
			assert.Equal(t, devenv.NodeName, p.Spec.NodeName)
			assert.Equal(t, release.Image(), p.Spec.Containers[0].Image, "the image built from this tree, imported, never pulled")
		}
	}
}

// podReadyAfter is how long p took from creation to Ready, by the API's timestamps (seconds).
func podReadyAfter(p corev1.Pod) time.Duration {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return c.LastTransitionTime.Sub(p.CreationTimestamp.Time)
		}
	}
	return -1
}

// describe says where name's Pods are, for a failure message.
func describe(ctx context.Context, t testing.TB, name string) string {
	pods, err := Clientset(t).CoreV1().Pods(devenv.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=" + name})
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, p := range pods.Items {
		fmt.Fprintf(&b, "%s %s %+v\n", p.Name, p.Status.Phase, p.Status.ContainerStatuses)
	}
	return b.String()
}

// DemoDeployment is the demo app from the image, with its readiness probe.
func DemoDeployment(ns, name string, replicas int) string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: %[1]s, namespace: %[2]s, labels: {app: %[1]s}}
spec:
  replicas: %[3]d
  selector: {matchLabels: {app: %[1]s}}
  template:
    metadata: {labels: {app: %[1]s}}
    spec:
      containers:
        - name: %[1]s
          image: %[4]s
          args: [demo-app]
          ports: [{name: http, containerPort: 8080}]
          readinessProbe: {httpGet: {path: /readyz, port: http}, periodSeconds: 1}
`, name, ns, replicas, release.Image())
}

// WaitAvailable waits until ns/name has replicas, all of them available.
func WaitAvailable(t testing.TB, ns, name string, replicas int32) {
	t.Helper()
	cs := Clientset(t)
	require.Eventually(t, func() bool {
		d, err := cs.AppsV1().Deployments(ns).Get(context.Background(), name, metav1.GetOptions{})
		return err == nil && *d.Spec.Replicas == replicas && RolledOut(d)
	}, 90*time.Second, 200*time.Millisecond, "%s/%s never had %d available replicas", ns, name, replicas)
}

// Scale runs a KubernetesExecution that scales ns/web to replicas with
// executor, and waits until it completed and the replicas are available.
func Scale(t testing.TB, kubectl Kubectl, ns, name, executor string, replicas int32) {
	t.Helper()
	start := time.Now()
	kubectl.Apply(t, fmt.Sprintf(`apiVersion: remedy.dev/v1alpha1
kind: KubernetesExecution
metadata: {name: %s, namespace: %s}
spec:
  action: scale
  executor: %s
  target: {apiVersion: apps/v1, kind: Deployment, namespace: %s, name: web}
  parameters: {replicas: %d}
  rollbackWindow: 1s
`, name, ns, executor, ns, replicas))
	kubectl.WaitPhase(t, ns, name, "Completed", "Failed")
	phase := kubectl.Run(t, "get", "kubernetesexecution", name, "-n", ns, "-o", "jsonpath={.status.phase} {.status.reason}: {.status.message}")
	require.True(t, strings.HasPrefix(phase, "Completed"), phase)
	WaitAvailable(t, ns, "web", replicas)
	t.Logf("%s run completed and rolled out in %.1fs", executor, time.Since(start).Seconds())
}
