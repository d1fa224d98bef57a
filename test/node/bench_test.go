package node

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/test/harness"
)

const (
	// costWindow is how long each cost is measured.
	costWindow = 20 * time.Second
	// manyPods is the node's load: 100 demo app replicas (the kubelet's
	// maxPods is 110).
	manyPods = 100
	// scaleTo is the size of the scale whose Pods' readiness is timed, in
	// scaleRounds rounds per iteration (make bench runs one).
	scaleTo     = 10
	scaleRounds = 5
)

// BenchmarkNodeIdleCost measures, over the same window with no Pod of its
// own running, the CPU and resident memory of the node's daemons
// (containerd, kube-scheduler, the kubelet) and of the control plane that
// runs without a node (etcd, kube-apiserver, kube-controller-manager), and
// reports the node's as a ratio to the control plane's.
func BenchmarkNodeIdleCost(b *testing.B) {
	harness.ReportCost(b, harness.MeasureIdleCost(b, costWindow), harness.NodeDaemons)
}

// BenchmarkNode100PodsCost is the same with manyPods demo app replicas
// Ready on the node: the node's cost counts its daemons, the Pods' shims and
// the containers' processes (pause and the demo app), each also reported
// alone.
func BenchmarkNode100PodsCost(b *testing.B) {
	sum := harness.MeasurePodsCost(b, manyPods, costWindow)
	node := sum[harness.NodeDaemons]
	for _, g := range []harness.CostGroup{harness.Shims, harness.PodProcesses} {
		node.Cores += sum[g].Cores
		node.RSSMB += sum[g].RSSMB
		node.Procs += sum[g].Procs
	}
	sum["node+pods"] = node
	harness.ReportCost(b, sum, "node+pods")
	for _, g := range []harness.CostGroup{harness.NodeDaemons, harness.Shims, harness.PodProcesses} {
		b.ReportMetric(sum[g].Cores/float64(b.N), string(g)+"-cores")
		b.ReportMetric(sum[g].RSSMB/float64(b.N), string(g)+"-rss-MB")
	}
}

// BenchmarkPodReadyAfterScale times a scale of the demo app from 0 to
// scaleTo until every Pod is Ready (the mean of scaleRounds), against the same scale of a Deployment
// whose Pods no node takes (a nodeSelector nothing matches) until the
// control plane has created them all: what the node adds to a scale.
func BenchmarkPodReadyAfterScale(b *testing.B) {
	ns := harness.Namespace(b)
	ready := harness.Deployment(b, ns, "ready", 0)
	created := harness.Deployment(b, ns, "created", 0)
	patch := ctrlclient.RawPatch(types.MergePatchType, []byte(`{"spec":{"template":{"spec":{"nodeSelector":{"remedy.dev/bench":"no-such-node"}}}}}`))
	require.NoError(b, harness.Kube().Patch(context.Background(), created, patch))
	var readyTime, createdTime time.Duration
	rounds := b.N * scaleRounds
	b.ResetTimer()
	for range rounds {
		createdTime += scale(b, created, scaleTo, func(d *appsv1.Deployment) bool { return d.Status.Replicas == scaleTo })
		readyTime += scale(b, ready, scaleTo, func(d *appsv1.Deployment) bool { return d.Status.ReadyReplicas == scaleTo })
		b.StopTimer()
		scale(b, created, 0, func(d *appsv1.Deployment) bool { return d.Status.Replicas == 0 })
		scale(b, ready, 0, func(d *appsv1.Deployment) bool { return d.Status.Replicas == 0 })
		require.Eventually(b, func() bool { return podCount(b, ns) == 0 }, 2*time.Minute, 100*time.Millisecond, "the Pods did not go")
		b.StartTimer()
	}
	n := float64(rounds)
	b.ReportMetric(readyTime.Seconds()*1000/n, "ready-ms")
	b.ReportMetric(createdTime.Seconds()*1000/n, "control-plane-ms")
	b.ReportMetric(readyTime.Seconds()/createdTime.Seconds(), "x-control-plane")
}

// scale sets d's replicas and returns how long until done holds.
func scale(b *testing.B, d *appsv1.Deployment, replicas int32, done func(*appsv1.Deployment) bool) time.Duration {
	patch := ctrlclient.RawPatch(types.MergePatchType, []byte(fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas)))
	start := time.Now()
	require.NoError(b, harness.Kube().Patch(context.Background(), d, patch))
	harness.Eventually(b, d, 5*time.Minute, func(d *appsv1.Deployment) bool {
		return d.Status.ObservedGeneration == d.Generation && done(d)
	})
	return time.Since(start)
}

// removeDeployment deletes d and waits until the kubelet has stopped its
// Pods (they are gone from the API server), so the next benchmark starts
// from an idle node. (The harness runs no namespace controller: deleting the
// namespace would leave its Pods running.)
func podCount(b *testing.B, ns string) int {
	var pods corev1.PodList
	require.NoError(b, harness.Kube().List(context.Background(), &pods, ctrlclient.InNamespace(ns)))
	return len(pods.Items)
}
