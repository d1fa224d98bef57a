package node

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/test/harness"
)

// TestDemoAppServesFromAPod: a Deployment of the demo app from the imported
// image becomes Available, and its Pod answers on its Pod IP.
func TestDemoAppServesFromAPod(t *testing.T) {
	ns := harness.Namespace(t)
	d := harness.Deployment(t, ns, "web", 2)
	start := time.Now()
	t.Cleanup(func() { describePods(t, ns) })
	harness.Eventually(t, d, 90*time.Second, func(d *appsv1.Deployment) bool { return d.Status.AvailableReplicas == 2 })
	t.Logf("2 replicas Available in %.1fs", time.Since(start).Seconds())
	pods := &corev1.PodList{}
	require.NoError(t, harness.Kube().List(context.Background(), pods, ctrlclient.InNamespace(ns)))
	require.Len(t, pods.Items, 2)
	body := get(t, fmt.Sprintf("http://%s:8080/", pods.Items[0].Status.PodIP))
	assert.Contains(t, body, "demo-app on "+pods.Items[0].Name)
}

// describePods logs the Pods of ns when the test failed.
func describePods(t *testing.T, ns string) {
	if !t.Failed() {
		return
	}
	pods := &corev1.PodList{}
	if err := harness.Kube().List(context.Background(), pods, ctrlclient.InNamespace(ns)); err != nil {
		t.Logf("list pods: %v", err)
		return
	}
	for _, p := range pods.Items {
		t.Logf("pod %s: node %q phase %s conditions %+v containers %+v", p.Name, p.Spec.NodeName, p.Status.Phase, p.Status.Conditions, p.Status.ContainerStatuses)
	}
}

func get(t *testing.T, url string) string {
	t.Helper()
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}
