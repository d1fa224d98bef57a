package drift

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	kv1 "github.com/remedy-dev/remedy/api/kausality/v1alpha1"
	"github.com/remedy-dev/remedy/internal/metrics"
	"github.com/remedy-dev/remedy/test/harness"
	"github.com/remedy-dev/remedy/webhook"
)

// family is a Deployment whose controller (kube-controller-manager's
// Deployment controller) is known to the webhook, and its ReplicaSet.
type family struct {
	ns  string
	dep *appsv1.Deployment
	rs  *appsv1.ReplicaSet
}

// newFamily waits until the Deployment is initialized, its controller is
// recorded on it and its ReplicaSet names that controller as its updater.
func newFamily(t *testing.T, mode kv1.Mode) family {
	t.Helper()
	return newNamedFamily(t, mode, "web")
}

// newNamedFamily is newFamily with the Deployment called name: the
// collector finds reports by child name, and ReplicaSets of equal
// Deployments in other namespaces share it.
func newNamedFamily(t *testing.T, mode kv1.Mode, name string) family {
	t.Helper()
	ctx := context.Background()
	f := family{ns: harness.Namespace(t)}
	if mode != "" {
		patchAnnotations(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.ns}}, map[string]any{kv1.AnnotationMode: string(mode)})
	}
	f.dep = harness.Deployment(t, f.ns, name, 0)
	f.dep = harness.Eventually(t, f.dep, 30*time.Second, func(d *appsv1.Deployment) bool {
		a := d.Annotations
		return d.Status.ObservedGeneration == d.Generation && a[kv1.AnnotationControllers] != "" && a[kv1.AnnotationPhase] == kv1.PhaseInitialized
	})
	require.Eventually(t, func() bool {
		var list appsv1.ReplicaSetList
		require.NoError(t, harness.Kube().List(ctx, &list, ctrlclient.InNamespace(f.ns)))
		for i := range list.Items {
			if metav1.IsControlledBy(&list.Items[i], f.dep) {
				f.rs = &list.Items[i]
				return f.rs.Annotations[kv1.AnnotationUpdaters] != ""
			}
		}
		return false
	}, 30*time.Second, 50*time.Millisecond, "no ReplicaSet with recorded updaters")
	return f
}

// scale sets the ReplicaSet's replicas as the test's own user, a person.
func (f family) scale(t *testing.T, replicas int32) (*appsv1.ReplicaSet, error) {
	t.Helper()
	rs := f.rs.DeepCopy()
	patch := []byte(fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas))
	err := harness.Kube().Patch(context.Background(), rs, ctrlclient.RawPatch(types.MergePatchType, patch))
	return rs, err
}

func (f family) replicas(t *testing.T) int32 {
	t.Helper()
	rs := &appsv1.ReplicaSet{}
	require.NoError(t, harness.Kube().Get(context.Background(), ctrlclient.ObjectKeyFromObject(f.rs), rs))
	return *rs.Spec.Replicas
}

func patchAnnotations(t *testing.T, obj ctrlclient.Object, ann map[string]any) {
	t.Helper()
	require.NoError(t, tryPatchAnnotations(obj, ann))
}

// tryPatchAnnotations merge-patches annotations (nil removes one).
func tryPatchAnnotations(obj ctrlclient.Object, ann map[string]any) error {
	patch := map[string]any{"metadata": map[string]any{"annotations": ann}}
	return harness.Kube().Patch(context.Background(), obj, ctrlclient.RawPatch(types.MergePatchType, mustJSON(patch)))
}

func decisions(result string) float64 {
	return testutil.ToFloat64(metrics.DriftDecisions.WithLabelValues(result))
}

// deniedAgain waits until the Deployment controller's retried revert is
// denied once more, then checks the ReplicaSet still has the replicas a
// person gave it: the retry that a broken decision would let through was made.
func (f family) deniedAgain(t *testing.T, replicas int32, msg string) {
	t.Helper()
	waitDecision(t, "drift-denied", decisions("drift-denied"))
	require.Equal(t, replicas, f.replicas(t), msg)
}

// waitDecision waits until the webhook has made one more decision of result than before.
func waitDecision(t *testing.T, result string, before float64) {
	t.Helper()
	require.Eventually(t, func() bool { return decisions(result) > before }, 30*time.Second, 50*time.Millisecond,
		"no %s decision", result)
}

func TestPersonIsNewOriginAndControllerRevertIsLoggedDrift(t *testing.T) {
	f := newFamily(t, kv1.ModeLog)
	logged := decisions("drift-logged")

	rs, err := f.scale(t, 2)
	require.NoError(t, err, "a person's change is a new origin and allowed")
	trace, err := kv1.ParseTrace(rs.Annotations[kv1.AnnotationTrace])
	require.NoError(t, err)
	require.Len(t, trace, 1, "a new origin starts a one-hop trace")
	assert.Equal(t, "ReplicaSet", trace[0].Kind)
	assert.NotContains(t, trace[0].User, "deployment-controller")
	assert.Contains(t, rs.Annotations[kv1.AnnotationUpdaters], kv1.UserHash(trace[0].User, ""))

	// The Deployment controller puts replicas back while the Deployment's
	// spec is unchanged: drift, which log mode lets through.
	waitDecision(t, "drift-logged", logged)
	require.Eventually(t, func() bool { return f.replicas(t) == 0 }, 30*time.Second, 50*time.Millisecond)

	// The drift workflow reports it to the callback URL.
	require.Eventually(t, func() bool { return len(reports.find(f.rs, kv1.DriftReportDetected)) > 0 }, 30*time.Second, 100*time.Millisecond,
		"no DriftReport for %s", f.rs.Name)
	rep := reports.find(f.rs, kv1.DriftReportDetected)[0]
	assert.Equal(t, kv1.DriftReportKind, rep.Kind)
	assert.Equal(t, "web", rep.Spec.Parent.Name)
	assert.Equal(t, "UPDATE", rep.Spec.Request.Operation)
	assert.Contains(t, rep.Spec.Request.User, "deployment-controller")
	assert.Len(t, rep.Spec.ID, 16)
	// kausality's detection context travels with the report.
	assert.Equal(t, kv1.LifecycleInitialized, rep.Spec.Parent.LifecyclePhase)
	// generation is that of the parent's last spec change; observedGeneration
	// is the Deployment's own, which annotation edits also bump.
	assert.GreaterOrEqual(t, rep.Spec.Parent.ObservedGeneration, rep.Spec.Parent.Generation, "drift: the parent's controller had caught up")
	assert.NotEmpty(t, rep.Spec.Request.UID)
	assert.False(t, rep.Spec.Request.DryRun)
	assert.Positive(t, rep.Spec.Child.Generation)
}

func TestEnforceDeniesRevertAndOnceApprovalLetsExactlyOneThrough(t *testing.T) {
	f := newFamily(t, kv1.ModeEnforce)
	denied := decisions("drift-denied")
	_, err := f.scale(t, 2)
	require.NoError(t, err)
	waitDecision(t, "drift-denied", denied)
	f.deniedAgain(t, 2, "enforce mode let the revert through")

	approved := decisions("drift-approved")
	approval := kv1.FormatApprovals([]kv1.Approval{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: f.rs.Name, Mode: kv1.ApprovalOnce}})
	patchAnnotations(t, f.dep, map[string]any{kv1.AnnotationApprovals: approval})
	require.Eventually(t, func() bool { return f.replicas(t) == 0 }, 30*time.Second, 50*time.Millisecond, "the approved revert did not land")
	assert.Equal(t, approved+1, decisions("drift-approved"), "one approval, one change")
	harness.Eventually(t, f.dep, 10*time.Second, func(d *appsv1.Deployment) bool { return d.Annotations[kv1.AnnotationApprovals] == "" })

	denied = decisions("drift-denied")
	_, err = f.scale(t, 3)
	require.NoError(t, err)
	waitDecision(t, "drift-denied", denied)
	f.deniedAgain(t, 3, "a used once approval let a second change through")
}

func TestFreezeBlocksExpectedChangesAndDeletingAllowsCleanup(t *testing.T) {
	f := newFamily(t, kv1.ModeLog)
	at := time.Now().UTC().Truncate(time.Second)
	freeze := kv1.FormatFreeze(&kv1.Freeze{User: "oncall", Message: "incident 42", At: at})
	patchAnnotations(t, f.dep, map[string]any{kv1.AnnotationFreeze: freeze})
	harness.Eventually(t, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "web"}}, 10*time.Second,
		func(d *appsv1.Deployment) bool { return d.Status.ObservedGeneration == d.Generation })

	// A person's change to the child is refused with the freeze's message
	// and time, but not who froze it (as kausality: docs/drift.md).
	_, err := f.scale(t, 1)
	require.Error(t, err)
	require.True(t, apierrors.IsForbidden(err), "want 403, got %v", err)
	assert.NotContains(t, err.Error(), "oncall")
	assert.Contains(t, err.Error(), "incident 42")
	assert.Contains(t, err.Error(), at.Format(time.RFC3339))

	// A rollout is an expected change, and frozen all the same: the new ReplicaSet is never admitted.
	frozen := decisions("frozen")
	patch := map[string]any{"spec": map[string]any{"template": map[string]any{"metadata": map[string]any{"labels": map[string]any{"rev": "2"}}}}}
	require.NoError(t, harness.Kube().Patch(context.Background(), f.dep, ctrlclient.RawPatch(types.MergePatchType, mustJSON(patch))))
	waitDecision(t, "frozen", frozen)
	// The Deployment controller retried its rollout, and was frozen again.
	waitDecision(t, "frozen", decisions("frozen"))
	assert.Len(t, replicaSets(t, f.ns), 1, "a frozen Deployment rolled out")

	// Deleting the frozen parent lets the garbage collector remove the child.
	fg := metav1.DeletePropagationForeground
	require.NoError(t, harness.Kube().Delete(context.Background(), f.dep, &ctrlclient.DeleteOptions{PropagationPolicy: &fg}))
	require.Eventually(t, func() bool { return len(replicaSets(t, f.ns)) == 0 }, 30*time.Second, 100*time.Millisecond, "the child was not cleaned up")
	require.Eventually(t, func() bool {
		return apierrors.IsNotFound(harness.Kube().Get(context.Background(), ctrlclient.ObjectKeyFromObject(f.dep), &appsv1.Deployment{}))
	}, 30*time.Second, 100*time.Millisecond, "the parent was not deleted")
}

func TestUnparseableAnnotationIsRefused(t *testing.T) {
	f := newFamily(t, kv1.ModeLog)
	for key, value := range map[string]string{
		kv1.AnnotationApprovals:  `[{"kind":`,
		kv1.AnnotationRejections: `{"not":"an array"}`,
		kv1.AnnotationFreeze:     `maybe`,
		kv1.AnnotationSnooze:     `tomorrow`,
		kv1.AnnotationMode:       `strict`,
	} {
		err := tryPatchAnnotations(f.dep, map[string]any{key: value})
		require.Error(t, err, key)
		assert.True(t, apierrors.IsBadRequest(err), "%s: want 400, got %v", key, err)
		assert.Contains(t, err.Error(), key)
	}
	dep := &appsv1.Deployment{}
	require.NoError(t, harness.Kube().Get(context.Background(), ctrlclient.ObjectKeyFromObject(f.dep), dep))
	assert.Empty(t, dep.Annotations[kv1.AnnotationApprovals], "a refused annotation was stored")
}

func replicaSets(t *testing.T, ns string) []appsv1.ReplicaSet {
	t.Helper()
	var list appsv1.ReplicaSetList
	require.NoError(t, harness.Kube().List(context.Background(), &list, ctrlclient.InNamespace(ns)))
	return list.Items
}

// assertStays fails unless cond holds for the whole period. Only for a path
// that should not exist at all, which leaves no later fact to wait for.
func assertStays(t *testing.T, period time.Duration, cond func() bool, msg string) {
	t.Helper()
	for end := time.Now().Add(period); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		require.True(t, cond(), msg)
	}
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("encode %v: %v", v, err))
	}
	return b
}

// Two webhook replicas that both decided on one `once` approval: exactly one
// spends it, the other must decide again without it.
func TestOnceApprovalIsSpentExactlyOnceAcrossReplicas(t *testing.T) {
	f := newFamily(t, kv1.ModeEnforce)
	a := kv1.Approval{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: f.rs.Name, Mode: kv1.ApprovalOnce}
	value := kv1.FormatApprovals([]kv1.Approval{a})
	patchAnnotations(t, f.dep, map[string]any{kv1.AnnotationApprovals: value})

	dyn, err := dynamic.NewForConfig(harness.Config())
	require.NoError(t, err)
	mapper, err := apiutil.NewDynamicRESTMapper(harness.Config(), mustHTTPClient(t))
	require.NoError(t, err)
	ref := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "Deployment", Name: f.dep.Name, UID: f.dep.UID}
	replicas := []*webhook.ParentUpdater{webhook.NewParentUpdater(dyn, mapper, 1), webhook.NewParentUpdater(dyn, mapper, 1)}
	won := 0
	for _, r := range replicas {
		ok, err := r.ConsumeNow(context.Background(), ref, f.ns, value, a)
		require.NoError(t, err)
		if ok {
			won++
		}
	}
	assert.Equal(t, 1, won)
	dep := &appsv1.Deployment{}
	require.NoError(t, harness.Kube().Get(context.Background(), ctrlclient.ObjectKeyFromObject(f.dep), dep))
	assert.Empty(t, dep.Annotations[kv1.AnnotationApprovals])
}

func mustHTTPClient(t *testing.T) *http.Client {
	t.Helper()
	hc, err := rest.HTTPClientFor(harness.Config())
	require.NoError(t, err)
	return hc
}
