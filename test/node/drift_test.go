package node

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	kv1 "github.com/remedy-dev/remedy/api/kausality/v1alpha1"
	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/metrics"
	"github.com/remedy-dev/remedy/test/harness"
)

// TestDriftTraceFollowsARealRollout: the Deployment controller writes the
// ReplicaSet, the ReplicaSet controller writes the Pods and the kubelet their
// status, through the drift webhook, and the Deployment becomes available.
// Each running Pod's trace has both hops (Deployment -> ReplicaSet -> Pod).
//
// Then, with the namespace enforced, a restart rolls out: the Deployment
// controller's many ReplicaSet writes after observedGeneration caught up
// are not drift (issue 23: the old ReplicaSet's scale-down was denied and
// the rollout stalled), and the new Pods continue the restart's origin. A
// real drift is still caught: the controller putting back a person's scale
// of the settled Deployment's ReplicaSet is denied.
func TestDriftTraceFollowsARealRollout(t *testing.T) {
	ctx := context.Background()
	ns := harness.Namespace(t)
	dep := harness.Deployment(t, ns, "web", 2)
	available(t, ns, "web", 2)
	traces := runningTraces(t, ns, dep, 2)
	assert.Len(t, traces, 2)

	require.NoError(t, harness.Kube().Patch(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		ctrlclient.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"`+kv1.AnnotationMode+`":"enforce"}}}`))))
	restart := []byte(`{"spec":{"template":{"metadata":{"annotations":{"kubectl.kubernetes.io/restartedAt":"` + time.Now().UTC().Format(time.RFC3339) + `"}}}}}`)
	require.NoError(t, harness.Kube().Patch(ctx, dep, ctrlclient.RawPatch(types.MergePatchType, restart)))
	dep = available(t, ns, "web", 2)
	origin, err := kv1.ParseTrace(dep.Annotations[kv1.AnnotationTrace])
	require.NoError(t, err)
	require.NotEmpty(t, origin)

	after := runningTraces(t, ns, dep, 2)
	require.Eventually(t, func() bool {
		after = runningTraces(t, ns, dep, 2)
		return len(after) == 2 && !sharesPod(after, traces)
	}, runTimeout, 200*time.Millisecond, "the old Pods are still running")
	rs := newReplicaSet(t, dep)
	for pod, trace := range after {
		assert.Equal(t, origin[0], trace[0], "%s continues the restart's origin", pod)
		assert.Equal(t, rs.Name, trace[1].Name, "%s is of the new ReplicaSet", pod)
	}
	assert.Empty(t, driftDenied(t, ns), "controller writes of the rollout were denied as drift")

	// A person scales the settled Deployment's ReplicaSet: a new origin;
	// the controller putting it back, with nothing changed, is drift.
	require.NoError(t, harness.Kube().Patch(ctx, rs, ctrlclient.RawPatch(types.MergePatchType, []byte(`{"spec":{"replicas":3}}`))))
	require.Eventually(t, func() bool { return len(driftDenied(t, ns)) > 0 }, runTimeout, 100*time.Millisecond, "no DriftDenied Event")
	assert.Contains(t, driftDenied(t, ns)[0].Message, "ReplicaSet "+rs.Name)
	// The controller retried its revert and was denied again: the retry a
	// broken decision would let through was made.
	denied := testutil.ToFloat64(metrics.DriftDecisions.WithLabelValues("drift-denied"))
	require.Eventually(t, func() bool {
		return testutil.ToFloat64(metrics.DriftDecisions.WithLabelValues("drift-denied")) > denied
	},
		runTimeout, 50*time.Millisecond, "the Deployment controller did not retry its revert")
	require.NoError(t, harness.Kube().Get(ctx, ctrlclient.ObjectKeyFromObject(rs), rs))
	require.Equal(t, int32(3), *rs.Spec.Replicas, "enforce mode let the drift through")
}

func sharesPod(a, b map[string]kv1.Trace) bool {
	for p := range a {
		if _, ok := b[p]; ok {
			return true
		}
	}
	return false
}

// newReplicaSet is dep's ReplicaSet with its replicas.
func newReplicaSet(t *testing.T, dep *appsv1.Deployment) *appsv1.ReplicaSet {
	t.Helper()
	var list appsv1.ReplicaSetList
	require.NoError(t, harness.Kube().List(context.Background(), &list, ctrlclient.InNamespace(dep.Namespace)))
	for i := range list.Items {
		if rs := &list.Items[i]; metav1.IsControlledBy(rs, dep) && rs.Spec.Replicas != nil && *rs.Spec.Replicas > 0 {
			return rs
		}
	}
	require.Fail(t, "no scaled ReplicaSet of "+dep.Name)
	return nil
}

// driftDenied lists the DriftDenied Events in ns.
func driftDenied(t *testing.T, ns string) []corev1.Event {
	t.Helper()
	var list corev1.EventList
	require.NoError(t, harness.Kube().List(context.Background(), &list, ctrlclient.InNamespace(ns)))
	var out []corev1.Event
	for _, e := range list.Items {
		if e.Reason == v1alpha1.ReasonDriftDenied {
			out = append(out, e)
		}
	}
	return out
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
