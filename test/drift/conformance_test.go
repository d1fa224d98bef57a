package drift

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	kv1 "github.com/remedy-dev/remedy/api/kausality/v1alpha1"
	"github.com/remedy-dev/remedy/test/harness"
)

// The behaviours where Remedy was checked against kausality's semantics;
// docs/drift.md, "Departures from kausality", has the reasons.

// TestEmptyTraceLabelKeyIsLeftToTheAPIServer: as kausality, the webhook
// ignores a trace label annotation without a key; the API server refuses
// the key itself (422 with its field path), and the labels with a key
// still reach the trace.
func TestEmptyTraceLabelKeyIsLeftToTheAPIServer(t *testing.T) {
	f := newFamily(t, kv1.ModeLog)
	patch := func(ann map[string]any) error {
		p := map[string]any{"metadata": map[string]any{"annotations": ann}, "spec": map[string]any{"replicas": 1}}
		return harness.Kube().Patch(context.Background(), f.rs.DeepCopy(), ctrlclient.RawPatch(types.MergePatchType, mustJSON(p)))
	}
	err := patch(map[string]any{kv1.TraceLabelPrefix: "no key", kv1.TraceLabelPrefix + "ticket": "T-1"})
	require.Error(t, err)
	assert.True(t, apierrors.IsInvalid(err), "want the API server's 422, got %v", err)
	assert.Contains(t, err.Error(), "metadata.annotations")

	require.NoError(t, patch(map[string]any{kv1.TraceLabelPrefix + "ticket": "T-1"}))
	rs := harness.Eventually(t, f.rs.DeepCopy(), 10*time.Second, func(r *appsv1.ReplicaSet) bool { return *r.Spec.Replicas == 1 })
	tr := mustTrace(t, rs.Annotations[kv1.AnnotationTrace])
	require.NotEmpty(t, tr)
	assert.Equal(t, map[string]string{"ticket": "T-1"}, tr[len(tr)-1].Labels)
}

// TestFreezeIsLiftedByRemovingIt: departure. kausality keeps every stored
// kausality annotation on a change without a spec change, whoever makes it,
// so a freeze could not be removed with kubectl annotate. Remedy lets a
// person remove it, and keeps the controller's copy of it off the child.
func TestFreezeIsLiftedByRemovingIt(t *testing.T) {
	f := newFamily(t, kv1.ModeLog)
	patchAnnotations(t, f.dep, map[string]any{kv1.AnnotationFreeze: `{"message":"incident 7"}`, "example.com/note": "frozen"})
	dep := harness.Eventually(t, f.dep.DeepCopy(), 10*time.Second, func(d *appsv1.Deployment) bool { return d.Annotations[kv1.AnnotationFreeze] != "" })

	// The Deployment controller copies the Deployment's annotations onto its
	// ReplicaSet (the note shows it did); the freeze is kept off it.
	rs := harness.Eventually(t, f.rs.DeepCopy(), 30*time.Second, func(r *appsv1.ReplicaSet) bool { return r.Annotations["example.com/note"] == "frozen" })
	assert.NotContains(t, rs.Annotations, kv1.AnnotationFreeze, "the controller's copy of the freeze reached the child")
	_, err := f.scale(t, 1)
	require.True(t, apierrors.IsForbidden(err), "want 403, got %v", err)

	patchAnnotations(t, dep, map[string]any{kv1.AnnotationFreeze: nil})
	require.NoError(t, harness.Kube().Get(context.Background(), ctrlclient.ObjectKeyFromObject(dep), dep))
	assert.NotContains(t, dep.Annotations, kv1.AnnotationFreeze, "the freeze was restored")
	require.Eventually(t, func() bool { _, err := f.scale(t, 1); return err == nil }, 10*time.Second, 100*time.Millisecond,
		"a person's change is still refused after the freeze was removed")
}
