package integration

import (
	"crypto/tls"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/test/harness"
)

// A review sent straight to the operator's admission webhook port, not
// through the API server, is read only with the API server's client
// certificate. (The approval tests prove the API server presents it.)
func TestOperatorWebhookNeedsTheAPIServersCertificate(t *testing.T) {
	rar := &v1alpha1.RemediationApprovalRequest{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "RemediationApprovalRequest"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "payments", Name: "forged"},
	}
	raw, err := json.Marshal(rar)
	require.NoError(t, err)
	review := &admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:  "forged-approval",
			Kind: metav1.GroupVersionKind{Group: v1alpha1.GroupVersion.Group, Version: v1alpha1.GroupVersion.Version, Kind: "RemediationApprovalRequest"},
			Resource: metav1.GroupVersionResource{Group: v1alpha1.GroupVersion.Group, Version: v1alpha1.GroupVersion.Version,
				Resource: "remediationapprovalrequests"},
			SubResource: "status", Namespace: "payments", Name: "forged", Operation: admissionv1.Update,
			UserInfo: authenticationv1.UserInfo{Username: "mallory"},
			Object:   runtime.RawExtension{Raw: raw}, OldObject: runtime.RawExtension{Raw: raw},
		},
	}
	url, caBundle := harness.MutatingWebhook(t, "remedy-approval")

	foreign := harness.ForeignClientCert(t)
	for name, cert := range map[string]*tls.Certificate{"no certificate": nil, "another CA's certificate": &foreign} {
		_, err := harness.PostAdmissionReview(url, caBundle, cert, review)
		require.Error(t, err, "%s was answered", name)
	}
	own := harness.APIServerClientCert(t)
	resp, err := harness.PostAdmissionReview(url, caBundle, &own, review)
	require.NoError(t, err)
	require.NotNil(t, resp.Response)
	assert.Equal(t, review.Request.UID, resp.Response.UID)
	// Answered on its merits: a person's status update that changes nothing
	// is refused (a field typo the API server dropped, issue 22 item 4).
	require.False(t, resp.Response.Allowed, "an unchanged status from a person is refused")
	assert.Contains(t, resp.Response.Result.Message, "changes nothing")
}
