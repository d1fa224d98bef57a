package monitoring

import (
	"context"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/test/harness"
)

// A Pod on the real node whose container exits at once crash-loops;
// kube-state-metrics reports it waiting in CrashLoopBackOff, Prometheus's
// KubePodCrashLooping fires (with the short `for:`), and Alertmanager holds
// it with the labels Remedy's rules match on.
func TestCrashLoopingPodFiresKubePodCrashLooping(t *testing.T) {
	ns := harness.Namespace(t)
	c := harness.DemoContainer("web")
	c.Args = []string{"demo-app", "--no-such-flag"} // exits non-zero on start
	c.ReadinessProbe = nil
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "crasher", Namespace: ns},
		Spec: corev1.PodSpec{Containers: []corev1.Container{c}}}
	require.NoError(t, harness.Kube().Create(context.Background(), pod))
	states := watchStates(t, ns)

	// The fact behind the alert first: the kubelet backs off restarting it.
	harness.Eventually(t, pod, 2*time.Minute, func(p *corev1.Pod) bool {
		for _, s := range p.Status.ContainerStatuses {
			if s.State.Waiting != nil && s.State.Waiting.Reason == "CrashLoopBackOff" {
				return true
			}
		}
		return false
	})
	want := map[string]string{"alertname": "KubePodCrashLooping", "namespace": ns, "pod": "crasher", "container": "web",
		"reason": "CrashLoopBackOff", "severity": "warning", "job": "kube-state-metrics"}
	var firing []harness.PrometheusAlert
	defer func() {
		if t.Failed() {
			t.Log("targets:", harness.PrometheusGet(t, "/api/v1/targets?state=active"))
			t.Log("series:", harness.PrometheusGet(t, "/api/v1/query?query=kube_pod_container_status_waiting_reason"))
			if resp, err := http.Get(harness.Monitoring().KubeStateMetricsURL + "/metrics"); err == nil {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				for _, l := range strings.Split(string(b), "\n") {
					if strings.Contains(l, ns) && strings.Contains(l, "kube_pod_container") {
						t.Log("ksm:", l)
					}
				}
			}
			_ = harness.Kube().Get(context.Background(), ctrlclient.ObjectKeyFromObject(pod), pod)
			t.Logf("pod: rv %s status %+v", pod.ResourceVersion, pod.Status.ContainerStatuses)
			t.Log("states:", states())
			t.Log("kube-state-metrics series:", harness.PrometheusGet(t, "/api/v1/query?query=count+by+(__name__)({job=%22kube-state-metrics%22})"))
			t.Log("rules:", harness.PrometheusGet(t, "/api/v1/rules"))
		}
	}()
	require.Eventually(t, func() bool {
		firing = nil
		for _, a := range harness.PrometheusAlerts(t) {
			if a.Labels["namespace"] == ns && a.State == "firing" {
				firing = append(firing, a)
			}
		}
		return len(firing) > 0
	}, 3*time.Minute, 200*time.Millisecond, "Prometheus fires KubePodCrashLooping for %s/crasher", ns)
	require.Len(t, firing, 1)
	for k, v := range want {
		assert.Equal(t, v, firing[0].Labels[k], k)
	}
	assert.Equal(t, "https://runbooks.prometheus-operator.dev/runbooks/kubernetes/kubepodcrashlooping", firing[0].Annotations["runbook_url"])

	var active *harness.AlertmanagerAlert
	require.Eventually(t, func() bool {
		for _, a := range harness.AlertmanagerAlerts(t) {
			if a.Labels["namespace"] == ns && a.Labels["alertname"] == "KubePodCrashLooping" && a.Status.State == "active" {
				active = &a
				return true
			}
		}
		return false
	}, time.Minute, 200*time.Millisecond, "Alertmanager holds the alert")
	for k, v := range want {
		assert.Equal(t, v, active.Labels[k], k)
	}
	assert.NotEmpty(t, active.Annotations["summary"])
}

// watchStates records each state the Pods of ns report for their containers,
// with when it was seen, for a failing test's message.
func watchStates(t *testing.T, ns string) func() []string {
	cs, err := kubernetes.NewForConfig(harness.Config())
	require.NoError(t, err)
	w, err := cs.CoreV1().Pods(ns).Watch(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	t.Cleanup(w.Stop)
	var mu sync.Mutex
	var seen []string
	go func() {
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			for _, s := range p.Status.ContainerStatuses {
				state := "running"
				switch {
				case s.State.Waiting != nil:
					state = "waiting " + s.State.Waiting.Reason
				case s.State.Terminated != nil:
					state = "terminated " + s.State.Terminated.Reason
				}
				mu.Lock()
				seen = append(seen, time.Now().Format("15:04:05.000")+" rv "+p.ResourceVersion+" "+state)
				mu.Unlock()
			}
		}
	}()
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(seen)
	}
}
