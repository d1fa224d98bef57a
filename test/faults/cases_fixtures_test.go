package faults

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/test/harness"
	"github.com/remedy-dev/remedy/test/procs"
)

func deployment(t *testing.T, ns, name string) *appsv1.Deployment {
	t.Helper()
	var d appsv1.Deployment
	require.Eventually(t, func() bool {
		return harness.Kube().Get(context.Background(), ctrlclient.ObjectKey{Namespace: ns, Name: name}, &d) == nil
	}, time.Minute, 100*time.Millisecond)
	return &d
}

func generation(t *testing.T, ns, name string) int64 { return deployment(t, ns, name).Generation }

// Deployments bump metadata.generation on annotation changes too, and three
// writers besides Remedy annotate them: the drift webhook (kausality.io/phase
// and kausality.io/controllers, once each while the Deployment becomes
// available), the Deployment controller (deployment.kubernetes.io/revision,
// once per rollout) and, for reloads, the baseline's hash annotations. So a
// case counts from a settled Deployment, and a rollout is two generations:
// the template change and the controller's revision annotation.

// settled waits until those writers are done with the Deployment and
// returns its generation.
func settled(t *testing.T, ns, name string) int64 {
	t.Helper()
	var last int64
	since := time.Now()
	harness.Eventually(t, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}, 2*time.Minute, func(d *appsv1.Deployment) bool {
		if d.Generation != last {
			last, since = d.Generation, time.Now()
		}
		return d.Annotations["kausality.io/phase"] == "initialized" && d.Annotations["kausality.io/controllers"] != "" &&
			d.Status.ObservedGeneration == d.Generation && time.Since(since) > time.Second
	})
	return last
}

// whole waits until a new Deployment settles: the API server, the
// Deployment controller and the drift webhook all answer again.
func whole(t *testing.T) {
	t.Helper()
	ns := harness.Namespace(t)
	harness.Deployment(t, ns, "web", 0)
	settled(t, ns, "web")
}

// target creates a Deployment of no replicas, so it is available at once
// without a kubelet, and returns its settled generation.
func target(t *testing.T, ns string) int64 {
	t.Helper()
	harness.Deployment(t, ns, "web", 0)
	return settled(t, ns, "web")
}

// replicaSets counts the ReplicaSets of the Deployment: one per pod template it rolled out.
func replicaSets(t *testing.T, ns, app string) int {
	t.Helper()
	var list appsv1.ReplicaSetList
	require.NoError(t, harness.Kube().List(context.Background(), &list, ctrlclient.InNamespace(ns), ctrlclient.MatchingLabels{"app": app}))
	return len(list.Items)
}

// settledReplicaSets waits until the Deployment controller has caught up
// with the Deployment and counts its ReplicaSets. After kube-apiserver was
// killed, kube-controller-manager was once seen to take more than a minute
// to catch up (its status write 40s after the last change still named the
// generation before), so it gets three.
func settledReplicaSets(t *testing.T, ns, name string) int {
	t.Helper()
	harness.Eventually(t, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}, 3*time.Minute,
		func(d *appsv1.Deployment) bool { return d.Status.ObservedGeneration == d.Generation })
	return replicaSets(t, ns, name)
}

// stays checks that the Deployment's generation stays at want while a part
// is down for d: the claim is about that window, so it watches all of it.
func stays(t *testing.T, ns, name string, want int64, d time.Duration, msg string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		var dep appsv1.Deployment
		if harness.Kube().Get(context.Background(), ctrlclient.ObjectKey{Namespace: ns, Name: name}, &dep) == nil {
			require.Equal(t, want, dep.Generation, msg)
		}
		time.Sleep(200 * time.Millisecond) // polls through the fault window, which is the claim
	}
}

func create(t *testing.T, obj ctrlclient.Object) {
	t.Helper()
	require.NoError(t, harness.Kube().Create(context.Background(), obj))
}

func scaleSpec(ns string, replicas int32) v1alpha1.KubernetesExecutionSpec {
	return v1alpha1.KubernetesExecutionSpec{
		Action:         "scale",
		Target:         v1alpha1.ObjectRef{APIVersion: "apps/v1", Kind: "Deployment", Namespace: ns, Name: "web"},
		Parameters:     &v1alpha1.ActionParameters{Replicas: ptr.To(replicas)},
		RollbackWindow: v1alpha1.DurationOf(time.Second),
		Timeout:        v1alpha1.DurationOf(2 * time.Minute),
	}
}

func execution(t *testing.T, ns, name string, spec v1alpha1.KubernetesExecutionSpec) *v1alpha1.KubernetesExecution {
	t.Helper()
	k := &v1alpha1.KubernetesExecution{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: spec}
	create(t, k)
	return k
}

// settle waits for the execution to reach phase, or to end elsewhere.
func settle(t *testing.T, k *v1alpha1.KubernetesExecution, phase v1alpha1.Phase, timeout time.Duration) *v1alpha1.KubernetesExecution {
	t.Helper()
	k = harness.Eventually(t, k, timeout, func(k *v1alpha1.KubernetesExecution) bool {
		return k.Status.Phase == phase || k.Status.Phase.Terminal()
	})
	require.Equal(t, phase, k.Status.Phase, "reason %s: %s", k.Status.Reason, k.Status.Message)
	return k
}

// signal sends a signal, retrying while Temporal comes back.
func signal(t *testing.T, id, name string, arg any) {
	t.Helper()
	var err error
	require.Eventually(t, func() bool {
		err = procs.Env().Temporal.SignalWorkflow(context.Background(), id, "", name, arg)
		return err == nil
	}, time.Minute, 200*time.Millisecond, "signal %s: %v", name, err)
}
