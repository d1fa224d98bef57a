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
	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/test/harness"
)

// TestDriftTraceFollowsARealRollout: the Deployment controller writes the
// ReplicaSet, the ReplicaSet controller writes the Pods and the kubelet their
// status, through the drift webhook, and the Deployment becomes available.
// Each running Pod's trace has both hops (Deployment -> ReplicaSet -> Pod).
// A restart rolls out a new ReplicaSet whose new Pods' traces name it.
//
// The namespace keeps the default mode, log: enforced, the webhook denies
// the Deployment controller's scale-down of the old ReplicaSet in the middle
// of the rollout (the Deployment's observedGeneration has caught up by then,
// so the change counts as drift) and the rollout stalls with the old Pods.
func TestDriftTraceFollowsARealRollout(t *testing.T) {
	ns := harness.Namespace(t)
	dep := harness.Deployment(t, ns, "web", 2)
	available(t, ns, "web", 2)
	first := runningTraces(t, ns, dep, 2)

	k := execute(t, ns, "restart-web", v1alpha1.KubernetesExecutionSpec{Action: "restart", Target: target(ns, "web"), RollbackWindow: v1alpha1.DurationOf(0)}, v1alpha1.PhaseCompleted)
	require.Equal(t, v1alpha1.PhaseCompleted, k.Status.Phase, "%s: %s", k.Status.Reason, k.Status.Message)
	available(t, ns, "web", 2)
	var second map[string]kv1.Trace
	require.Eventually(t, func() bool {
		second = runningTraces(t, ns, dep, 0)
		for name := range second {
			if _, old := first[name]; old {
				return false
			}
		}
		return len(second) == 2
	}, runTimeout, 200*time.Millisecond, "two new Pods run, no old one")
	for name, trace := range second {
		assert.NotEqual(t, firstOf(first)[1].Name, trace[1].Name, "pod %s's trace names the new ReplicaSet", name)
	}
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

func firstOf(m map[string]kv1.Trace) kv1.Trace {
	for _, t := range m {
		return t
	}
	return nil
}
