package node

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	kv1 "github.com/remedy-dev/remedy/api/kausality/v1alpha1"
	"github.com/remedy-dev/remedy/test/harness"
)

// TestDriftTraceFollowsARealRollout: the Deployment controller writes the
// ReplicaSet, the ReplicaSet controller writes the Pods and the kubelet their
// status, through the drift webhook, and the Deployment becomes available.
// Each running Pod's trace has both hops (Deployment -> ReplicaSet -> Pod).
//
// A later rollout (a restart) is not asserted here: with real Pods the
// webhook judges the Deployment controller's ReplicaSet writes during it as
// drift (its new ReplicaSet starts a new origin, and enforced, the old one's
// scale-down is denied and the rollout stalls), which is an open issue.
func TestDriftTraceFollowsARealRollout(t *testing.T) {
	ns := harness.Namespace(t)
	dep := harness.Deployment(t, ns, "web", 2)
	available(t, ns, "web", 2)
	traces := runningTraces(t, ns, dep, 2)
	assert.Len(t, traces, 2)
}

// runningTraces waits until ns holds at least n running Pods of dep (any
// number when 0) and returns their traces, after checking each has the two
// hops the controllers wrote.
func runningTraces(t *testing.T, ns string, dep *appsv1.Deployment, n int) map[string]kv1.Trace {
	t.Helper()
	traces := map[string]kv1.Trace{}
	require.Eventually(t, func() bool {
		var pods corev1.PodList
		require.NoError(t, harness.Kube().List(context.Background(), &pods, ctrlclient.InNamespace(ns)))
		clear(traces)
		for _, p := range pods.Items {
			if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
				continue
			}
			trace, err := kv1.ParseTrace(p.Annotations[kv1.AnnotationTrace])
			require.NoError(t, err)
			require.Len(t, trace, 3, "origin, ReplicaSet hop, Pod hop of %s: %s", p.Name, p.Annotations[kv1.AnnotationTrace])
			assert.Equal(t, []string{"Deployment", "ReplicaSet", "Pod"}, []string{trace[0].Kind, trace[1].Kind, trace[2].Kind})
			assert.Equal(t, dep.Name, trace[0].Name)
			owner := metav1.GetControllerOf(&p)
			require.NotNil(t, owner)
			assert.Equal(t, owner.Name, trace[1].Name, "the ReplicaSet hop is the Pod's owner")
			assert.True(t, strings.Contains(trace[1].User, "deployment-controller"), trace[1].User)
			assert.True(t, strings.Contains(trace[2].User, "replicaset-controller"), trace[2].User)
			traces[p.Name] = trace
		}
		return len(traces) >= n
	}, runTimeout, 200*time.Millisecond, "%d running pods in %s", n, ns)
	return traces
}
