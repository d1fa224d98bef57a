package node

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/internal/devenv"
	"github.com/remedy-dev/remedy/test/harness"
)

// outside is a documentation address (TEST-NET-3): only routes are looked
// up for it, no packet is ever sent.
const outside = "203.0.113.7"

// TestNothingLeavesTheMachine checks, while a Pod runs, that the host drops
// every forwarded Pod packet not bound for the Pod bridge and every packet to
// a Service IP, before anything else in FORWARD; that a Pod's only route out
// is through the node (so through those rules); and that Service IPs route to
// the node's own link, never the default route. It sends nothing.
func TestNothingLeavesTheMachine(t *testing.T) {
	ns := harness.Namespace(t)
	d := harness.Deployment(t, ns, "web", 1)
	harness.Eventually(t, d, 90*time.Second, func(d *appsv1.Deployment) bool { return d.Status.AvailableReplicas == 1 })

	forward := strings.Split(strings.TrimSpace(sh(t, "iptables", "-w", "-S", "FORWARD")), "\n")
	require.GreaterOrEqual(t, len(forward), 2)
	assert.Equal(t, "-A FORWARD -j REMEDY-NODE-EGRESS", forward[1], "the egress rules come first")
	for _, rule := range devenv.EgressRules() {
		sh(t, "iptables", append([]string{"-w", "-C", "REMEDY-NODE-EGRESS"}, rule...)...)
	}

	pod := onePod(t, ns)
	inPod := sh(t, "nsenter", "-t", podPID(t, pod), "-n", "ip", "route", "get", outside)
	assert.Contains(t, inPod, "via 10.244.0.1 dev eth0", "a Pod reaches nothing but through the node")
	assert.Contains(t, sh(t, "ip", "route", "get", "10.96.0.10"), "dev remedy-node0", "Service IPs stay on the node's link")
}

// TestAnImageNotImportedFailsAtOnce: containerd asks no registry but a
// refused local address, so a Pod of an image the node lacks fails its pull
// within seconds.
func TestAnImageNotImportedFailsAtOnce(t *testing.T) {
	ns := harness.Namespace(t)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "absent", Namespace: ns},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.example.com/absent:1.0"}}},
	}
	require.Eventually(t, func() bool { return harness.Kube().Create(context.Background(), pod) == nil }, 30*time.Second, 200*time.Millisecond,
		"create a Pod (the namespace's default ServiceAccount comes first)")
	start := time.Now()
	harness.Eventually(t, pod, 20*time.Second, func(p *corev1.Pod) bool {
		for _, c := range p.Status.ContainerStatuses {
			if w := c.State.Waiting; w != nil && (w.Reason == "ErrImagePull" || w.Reason == "ImagePullBackOff") {
				return true
			}
		}
		return false
	})
	t.Logf("ErrImagePull after %.1fs: %s", time.Since(start).Seconds(), pod.Status.ContainerStatuses[0].State.Waiting.Message)
	assert.Contains(t, pod.Status.ContainerStatuses[0].State.Waiting.Message, "127.0.0.1:1", "the pull went to the refused local address")
}

func onePod(t *testing.T, ns string) *corev1.Pod {
	t.Helper()
	pods := &corev1.PodList{}
	require.NoError(t, harness.Kube().List(context.Background(), pods, ctrlclient.InNamespace(ns)))
	for i := range pods.Items {
		if pods.Items[i].Status.PodIP != "" {
			return &pods.Items[i]
		}
	}
	require.FailNow(t, "no running pod", "in %s", ns)
	return nil
}

// podPID is a process of pod, found in its kubepods cgroup.
func podPID(t *testing.T, pod *corev1.Pod) string {
	t.Helper()
	var pid string
	_ = filepath.WalkDir("/sys/fs/cgroup/pids/kubepods", func(path string, d os.DirEntry, err error) error {
		if err != nil || pid != "" || d.Name() != "cgroup.procs" || !strings.Contains(path, string(pod.UID)) {
			return nil
		}
		b, _ := os.ReadFile(path)
		if f := strings.Fields(string(b)); len(f) > 0 {
			pid = f[0]
		}
		return nil
	})
	require.NotEmpty(t, pid, "no process of pod %s", pod.Name)
	return pid
}

func sh(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	require.NoError(t, err, "%s %s: %s", name, strings.Join(args, " "), out)
	return string(out)
}
