package faults

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
	"k8s.io/apimachinery/pkg/types"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/test/harness"
	"github.com/remedy-dev/remedy/test/procs"
)

// driftOpen: in an enforce namespace a person scales a Deployment's
// ReplicaSet and the Deployment controller's revert is denied as drift,
// which opens the parent's drift workflow. The process is killed while it
// is open and brought back; a once approval then lets exactly one revert through.
func driftOpen(t *testing.T, p *parts, what string) string {
	ctx := context.Background()
	ns := harness.Namespace(t)
	require.NoError(t, harness.Kube().Patch(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		ctrlclient.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"kausality.io/mode":"enforce"}}}`))))
	dep := harness.Deployment(t, ns, "web", 0)
	var rs appsv1.ReplicaSet
	require.Eventually(t, func() bool {
		var list appsv1.ReplicaSetList
		if harness.Kube().List(ctx, &list, ctrlclient.InNamespace(ns)) != nil || len(list.Items) != 1 {
			return false
		}
		rs = list.Items[0]
		// The webhook must know the Deployment's controller before the person's
		// scale: otherwise the ReplicaSet then has two updaters and neither is
		// known to be the controller, so the revert is no drift.
		d := deployment(t, ns, "web")
		return rs.Annotations["kausality.io/updaters"] != "" && d.Status.ObservedGeneration == d.Generation &&
			d.Annotations["kausality.io/controllers"] != "" && d.Annotations["kausality.io/phase"] == "initialized"
	}, time.Minute, 200*time.Millisecond, "the Deployment controller made a traced ReplicaSet and the webhook knows it")
	rsGen := rs.Generation
	require.NoError(t, harness.Kube().Patch(ctx, &rs, ctrlclient.RawPatch(types.MergePatchType, []byte(`{"spec":{"replicas":2}}`))))
	id := v1alpha1.DriftWorkflowID(string(dep.UID))
	require.Eventually(t, func() bool {
		d, err := procs.Env().Temporal.DescribeWorkflowExecution(ctx, id, "")
		return err == nil && d.WorkflowExecutionInfo.GetCloseTime() == nil && p.callbacks.count(string(dep.UID), "Detected") == 1
	}, 2*time.Minute, 200*time.Millisecond, "the revert was judged drift and reported")

	p.kill(t, what)
	time.Sleep(down[what]) // the fault itself: the part stays down; asserts nothing
	p.restart(t, what)

	require.NoError(t, harness.Kube().Patch(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}},
		ctrlclient.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"kausality.io/approvals":"[{\"apiVersion\":\"apps/v1\",\"kind\":\"ReplicaSet\",\"name\":\"*\",\"mode\":\"once\"}]"}}}`))))
	// A touch of the ReplicaSet wakes the controller from its backoff.
	require.NoError(t, harness.Kube().Patch(ctx, &rs, ctrlclient.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"touched":"yes"}}}`))))
	got := harness.Eventually(t, &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: rs.Name}}, 3*time.Minute,
		func(r *appsv1.ReplicaSet) bool { return *r.Spec.Replicas == 0 })
	harness.WaitClosed(t, id, time.Minute)
	// The run has closed: every report it sent was answered before its activity completed.
	require.Eventually(t, func() bool { return p.callbacks.count(string(dep.UID), "Resolved") >= 1 }, time.Minute, 200*time.Millisecond)
	assert.Equal(t, rsGen+2, got.Generation, "the person's scale and one revert")
	assert.Equal(t, 1, p.callbacks.count(string(dep.UID), "Detected"), "one Detected report")
	assert.Equal(t, 1, p.callbacks.count(string(dep.UID), "Resolved"), "one Resolved report")
	return fmt.Sprintf("ReplicaSet generation +%d (scale, one revert); reports Detected %d, Resolved %d; workflow closed",
		got.Generation-rsGen, p.callbacks.count(string(dep.UID), "Detected"), p.callbacks.count(string(dep.UID), "Resolved"))
}
