package drift

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	kv1 "github.com/remedy-dev/remedy/api/kausality/v1alpha1"
	"github.com/remedy-dev/remedy/internal/release"
	"github.com/remedy-dev/remedy/test/harness"
)

var widgets = schema.GroupVersionResource{Group: "test.remedy.dev", Version: "v1", Resource: "widgets"}

// TestCrossplaneConditionsGiveTheParentsObservedGeneration: a Widget reports
// its observedGeneration only on its Synced and Ready conditions, as
// Crossplane's managed resources do. Its controller's change to its
// ReplicaSet is drift (denied in enforce mode) when Ready, or else Synced,
// has caught up with the Widget's generation, and expected while Synced lags
// even though Ready has caught up: Synced is read first.
func TestCrossplaneConditionsGiveTheParentsObservedGeneration(t *testing.T) {
	ctx := context.Background()
	grantWebhook(t, widgets)
	ns := harness.Namespace(t)
	patchAnnotations(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, map[string]any{kv1.AnnotationMode: string(kv1.ModeEnforce)})

	admin := dynamic.NewForConfigOrDie(harness.Config()).Resource(widgets).Namespace(ns)
	w, err := admin.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "test.remedy.dev/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "w"}, "spec": map[string]any{"size": int64(1)},
	}}, metav1.CreateOptions{})
	require.NoError(t, err)

	// The Widget's controller, a user of its own.
	const controllerUser = "system:serviceaccount:crossplane-system:widget-controller"
	cfg := rest.CopyConfig(harness.Config())
	cfg.Impersonate = rest.ImpersonationConfig{UserName: controllerUser, Groups: []string{"system:masters", "system:authenticated"}}
	controller := kubernetes.NewForConfigOrDie(cfg).AppsV1().ReplicaSets(ns)

	labels := map[string]string{"app": "w"}
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "w", OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "test.remedy.dev/v1", Kind: "Widget", Name: "w", UID: w.GetUID(), Controller: ptr.To(true)}}},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To(int32(0)), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "w", Image: release.Image()}}}}},
	}
	// The Widget has no status yet: it is initializing, so its controller creates freely.
	rs, err = controller.Create(ctx, rs, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Equal(t, kv1.UserHash(controllerUser, ""), rs.Annotations[kv1.AnnotationUpdaters])
	// The webhook does not see Widget status updates (not a configured
	// kind), so the controller is recorded on the Widget by hand.
	_, err = admin.Patch(ctx, "w", types.MergePatchType,
		mustJSON(map[string]any{"metadata": map[string]any{"annotations": map[string]string{kv1.AnnotationControllers: kv1.UserHash(controllerUser, "")}}}),
		metav1.PatchOptions{})
	require.NoError(t, err)

	setConditions := func(conds ...map[string]any) {
		t.Helper()
		patch := map[string]any{"status": map[string]any{"conditions": conds}}
		_, err := admin.Patch(ctx, "w", types.MergePatchType, mustJSON(patch), metav1.PatchOptions{}, "status")
		require.NoError(t, err)
	}
	cond := func(typ string, og int64) map[string]any {
		return map[string]any{"type": typ, "status": "True", "observedGeneration": og}
	}
	replicas := int32(0)
	// expect waits until the controller's next change to the ReplicaSet is
	// denied as drift (or allowed), as the webhook's cache catches up.
	expect := func(drift bool, why string) {
		t.Helper()
		var last error
		require.Eventually(t, func() bool {
			replicas++
			_, last = controller.Patch(ctx, "w", types.MergePatchType, fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, replicas), metav1.PatchOptions{})
			if drift {
				return apierrors.IsForbidden(last) && strings.Contains(last.Error(), "drift")
			}
			return last == nil
		}, 30*time.Second, 200*time.Millisecond, "%s (last: %v)", why, last)
	}

	setConditions(cond("Ready", 1))
	expect(true, "Ready observed generation 1 of 1: the Widget is stable, its controller's change is drift")

	_, err = admin.Patch(ctx, "w", types.MergePatchType, []byte(`{"spec":{"size":2}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	setConditions(cond("Synced", 1), cond("Ready", 2))
	expect(false, "Synced observed generation 1 of 2: the controller is reconciling, whatever Ready says")

	setConditions(cond("Synced", 2), cond("Ready", 2))
	expect(true, "Synced observed generation 2 of 2: stable again")
}
