package drift

import (
	"crypto/tls"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	kv1 "github.com/remedy-dev/remedy/api/kausality/v1alpha1"
	"github.com/remedy-dev/remedy/test/harness"
)

const deploymentController = "system:serviceaccount:kube-system:deployment-controller"

// Reviews sent straight to the drift webhook's port, not through the API
// server: one claims "mallory" updated the Deployment's status (which
// would add her to its kausality.io/controllers), the other that the
// Deployment controller scaled the ReplicaSet (drift, which would start a
// drift workflow and its callback). Only the API server's client
// certificate gets them read.
func TestForgedReviewsNeedTheAPIServersCertificate(t *testing.T) {
	f := newFamily(t, kv1.ModeLog)
	require.Contains(t, kv1.ParseUserHashes(f.rs.Annotations[kv1.AnnotationUpdaters]), kv1.UserHash(deploymentController, ""),
		"the forged scale must come from the ReplicaSet's controller to be drift")
	mallory := kv1.UserHash("mallory", "")
	dep := f.dep.DeepCopy()
	dep.APIVersion, dep.Kind = "apps/v1", "Deployment"
	rs := f.rs.DeepCopy()
	rs.APIVersion, rs.Kind = "apps/v1", "ReplicaSet"
	scaled := rs.DeepCopy()
	scaled.Spec.Replicas = ptr.To[int32](3)
	reviews := []*admissionv1.AdmissionReview{
		review("deployments", "status", "mallory", dep, dep),
		review("replicasets", "", deploymentController, rs, scaled),
	}
	url, caBundle := harness.MutatingWebhook(t, "remedy-drift")
	controllers := func() string {
		d := &appsv1.Deployment{}
		require.NoError(t, harness.Kube().Get(t.Context(), types.NamespacedName{Namespace: f.ns, Name: f.dep.Name}, d))
		return d.Annotations[kv1.AnnotationControllers]
	}

	foreign := harness.ForeignClientCert(t)
	for name, cert := range map[string]*tls.Certificate{"no certificate": nil, "another CA's certificate": &foreign} {
		for _, r := range reviews {
			_, err := harness.PostAdmissionReview(url, caBundle, cert, r)
			require.Error(t, err, "%s: %s/%s was answered", name, r.Request.Resource.Resource, r.Request.SubResource)
		}
	}
	assertStays(t, 3*time.Second, func() bool {
		return !slices.Contains(kv1.ParseUserHashes(controllers()), mallory) && len(reports.find(f.rs, kv1.DriftReportDetected)) == 0
	}, "a refused review recorded a controller or started a drift workflow")

	// The API server's certificate is answered, and the same reviews take
	// effect: the checks above can fail.
	own := harness.APIServerClientCert(t)
	for _, r := range reviews {
		resp, err := harness.PostAdmissionReview(url, caBundle, &own, r)
		require.NoError(t, err)
		require.NotNil(t, resp.Response)
		assert.Equal(t, r.Request.UID, resp.Response.UID)
		assert.True(t, resp.Response.Allowed, "log mode admits: %+v", resp.Response.Result)
	}
	require.Eventually(t, func() bool { return len(reports.find(f.rs, kv1.DriftReportDetected)) > 0 }, 30*time.Second, 100*time.Millisecond,
		"the authenticated drift review started no drift workflow")
	require.Eventually(t, func() bool { return slices.Contains(kv1.ParseUserHashes(controllers()), mallory) }, 10*time.Second, 100*time.Millisecond,
		"the authenticated status review recorded no controller")
}

// review is an UPDATE of resource/subResource by user from old to cur.
func review(resource, subResource, user string, old, cur runtime.Object) *admissionv1.AdmissionReview {
	meta := cur.(metav1.Object)
	gvk := cur.GetObjectKind().GroupVersionKind()
	return &admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:         types.UID("forged-" + resource + "-" + subResource),
			Kind:        metav1.GroupVersionKind{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind},
			Resource:    metav1.GroupVersionResource{Group: gvk.Group, Version: gvk.Version, Resource: resource},
			SubResource: subResource,
			Namespace:   meta.GetNamespace(), Name: meta.GetName(),
			Operation: admissionv1.Update,
			UserInfo:  authenticationv1.UserInfo{Username: user},
			Object:    runtime.RawExtension{Raw: mustJSON(cur)},
			OldObject: runtime.RawExtension{Raw: mustJSON(old)},
		},
	}
}
