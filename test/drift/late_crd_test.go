package drift

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensions "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
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
	"github.com/remedy-dev/remedy/internal/devenv"
	"github.com/remedy-dev/remedy/internal/release"
	"github.com/remedy-dev/remedy/test/harness"
)

// TestParentOfAKindInstalledAfterTheWebhook: a CRD installed while the
// webhook runs is a parent like any other: its controller creates children
// (a webhook that cannot map the kind refuses them) and its change to a
// stable Gizmo's ReplicaSet is drift.
func TestParentOfAKindInstalledAfterTheWebhook(t *testing.T) {
	ctx := context.Background()
	// A Deployment's family first: the webhook has mapped parents before the CRD exists.
	newFamily(t, kv1.ModeLog)
	gizmos := schema.GroupVersionResource{Group: "late.remedy.dev", Version: "v1", Resource: "gizmos"}
	installGizmoCRD(t, gizmos)
	grantWebhook(t, gizmos)
	ns := harness.Namespace(t)
	patchAnnotations(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, map[string]any{kv1.AnnotationMode: string(kv1.ModeEnforce)})

	admin := dynamic.NewForConfigOrDie(harness.Config()).Resource(gizmos).Namespace(ns)
	var g *unstructured.Unstructured
	require.Eventually(t, func() bool { // until the new resource is served
		var err error
		g, err = admin.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "late.remedy.dev/v1", "kind": "Gizmo",
			"metadata": map[string]any{"name": "g"}, "spec": map[string]any{"size": int64(1)},
		}}, metav1.CreateOptions{})
		return err == nil
	}, 30*time.Second, 200*time.Millisecond)

	const controllerUser = "system:serviceaccount:gizmo-system:gizmo-controller"
	cfg := rest.CopyConfig(harness.Config())
	cfg.Impersonate = rest.ImpersonationConfig{UserName: controllerUser, Groups: []string{"system:masters", "system:authenticated"}}
	controller := kubernetes.NewForConfigOrDie(cfg).AppsV1().ReplicaSets(ns)
	labels := map[string]string{"app": "g"}
	_, err := controller.Create(ctx, &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "g", OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "late.remedy.dev/v1", Kind: "Gizmo", Name: "g", UID: g.GetUID(), Controller: ptr.To(true)}}},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To(int32(0)), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "g", Image: release.Image()}}}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = admin.Patch(ctx, "g", types.MergePatchType,
		mustJSON(map[string]any{"metadata": map[string]any{"annotations": map[string]string{kv1.AnnotationControllers: kv1.UserHash(controllerUser, "")}}}),
		metav1.PatchOptions{})
	require.NoError(t, err)
	_, err = admin.Patch(ctx, "g", types.MergePatchType, []byte(`{"status":{"observedGeneration":1,"conditions":[{"type":"Ready","status":"True"}]}}`), metav1.PatchOptions{}, "status")
	require.NoError(t, err)

	replicas, last := 0, error(nil)
	require.Eventually(t, func() bool {
		replicas++
		_, last = controller.Patch(ctx, "g", types.MergePatchType, fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, replicas), metav1.PatchOptions{})
		return apierrors.IsForbidden(last) && strings.Contains(last.Error(), "drift")
	}, 30*time.Second, 200*time.Millisecond, "the stable Gizmo's controller changing its ReplicaSet is drift (last: %v)", last)
}

func installGizmoCRD(t *testing.T, gvr schema.GroupVersionResource) {
	t.Helper()
	preserve := true
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: gvr.Resource + "." + gvr.Group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: gvr.Group, Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: "Gizmo", ListKind: "GizmoList", Plural: gvr.Resource, Singular: "gizmo"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: gvr.Version, Served: true, Storage: true,
				Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"spec":   {Type: "object", XPreserveUnknownFields: &preserve},
						"status": {Type: "object", XPreserveUnknownFields: &preserve},
					}}},
			}},
		},
	}
	_, err := apiextensions.NewForConfigOrDie(harness.Config()).ApiextensionsV1().CustomResourceDefinitions().Create(context.Background(), crd, metav1.CreateOptions{})
	require.NoError(t, err)
}

// grantWebhook gives the drift webhook the verbs on gvr it has on the
// default parent kinds, and the worker get, with the two labelled
// ClusterRoles docs/drift.md tells a site adding a kind to write; ClusterRole
// aggregation does the rest.
func grantWebhook(t *testing.T, gvr schema.GroupVersionResource) {
	t.Helper()
	ctx := context.Background()
	cs := kubernetes.NewForConfigOrDie(harness.Config())
	for label, verbs := range map[string][]string{
		"remedy.dev/aggregate-to-drift-webhook": {"get", "list", "watch", "update", "patch"},
		"remedy.dev/aggregate-to-drift-reader":  {"get"},
	} {
		role := &rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: "test-" + gvr.Resource + "-" + strings.TrimPrefix(label, "remedy.dev/"), Labels: map[string]string{label: "true"}},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{gvr.Group}, Resources: []string{gvr.Resource}, Verbs: verbs}},
		}
		if _, err := cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
			require.NoError(t, err)
		}
	}
	for account, verb := range map[string]string{"remedy-webhook": "patch", "remedy-worker": "get"} {
		user := "system:serviceaccount:" + devenv.Namespace + ":" + account
		require.Eventually(t, func() bool {
			r, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
				User: user, Groups: []string{"system:serviceaccounts"},
				ResourceAttributes: &authorizationv1.ResourceAttributes{Group: gvr.Group, Resource: gvr.Resource, Verb: verb},
			}}, metav1.CreateOptions{})
			return err == nil && r.Status.Allowed
		}, 30*time.Second, 200*time.Millisecond, "%s may %s %s through the aggregated ClusterRole", account, verb, gvr.Resource)
	}
	// The worker may read the kind, and nothing more.
	r, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:               "system:serviceaccount:" + devenv.Namespace + ":remedy-worker",
		ResourceAttributes: &authorizationv1.ResourceAttributes{Group: gvr.Group, Resource: gvr.Resource, Verb: "patch"},
	}}, metav1.CreateOptions{})
	require.NoError(t, err)
	assert.False(t, r.Status.Allowed, "the worker may not patch %s", gvr.Resource)
}
