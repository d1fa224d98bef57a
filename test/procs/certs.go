package procs

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/remedy-dev/remedy/internal/pki"
)

// certificate is the part of a cert-manager Certificate the test issues from.
type certificate struct {
	Metadata metav1.ObjectMeta `json:"metadata"`
	Spec     struct {
		SecretName string   `json:"secretName"`
		DNSNames   []string `json:"dnsNames"`
		IssuerRef  struct {
			Name string `json:"name"`
			Kind string `json:"kind"`
		} `json:"issuerRef"`
	} `json:"spec"`
}

// IssueCertificates does cert-manager's part for deploy/manager: each
// Certificate's Secret (tls.crt, tls.key, ca.crt) for its dnsNames from its
// selfSigned Issuer. It returns each Certificate's CA by namespace/name.
func IssueCertificates(t testing.TB) map[string][]byte {
	t.Helper()
	objs := Manifests(t, filepath.Join("deploy", "manager", "certificate.yaml"))
	selfSigned := map[string]bool{}
	for _, o := range objs {
		if o["kind"] == "Issuer" {
			spec, _ := o["spec"].(map[string]any)
			_, ok := spec["selfSigned"]
			selfSigned[o["metadata"].(map[string]any)["name"].(string)] = ok
		}
	}
	cas := map[string][]byte{}
	cs := Clientset(t)
	for _, o := range objs {
		if o["kind"] != "Certificate" {
			continue
		}
		var c certificate
		require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(o, &c))
		require.True(t, selfSigned[c.Spec.IssuerRef.Name], "%s: issuer %s is a selfSigned Issuer beside it", c.Metadata.Name, c.Spec.IssuerRef.Name)
		pair, err := pki.SelfSigned(c.Spec.DNSNames[0], c.Spec.DNSNames)
		require.NoError(t, err)
		sec := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: c.Spec.SecretName, Namespace: c.Metadata.Namespace},
			Type:       corev1.SecretTypeTLS,
			Data:       map[string][]byte{"tls.crt": pair.CertPEM, "tls.key": pair.KeyPEM, "ca.crt": pair.CertPEM},
		}
		_, err = cs.CoreV1().Secrets(sec.Namespace).Create(context.Background(), sec, metav1.CreateOptions{})
		require.NoError(t, err)
		cas[c.Metadata.Namespace+"/"+c.Metadata.Name] = pair.CertPEM
	}
	require.NotEmpty(t, cas)
	return cas
}

// InjectCABundles does cert-manager's cainjector's part for the webhook
// configurations the install doc's procedure applied from deploy/webhook: each gets
// the CA of the Certificate its inject-ca-from names.
func InjectCABundles(t testing.TB, cas map[string][]byte) {
	t.Helper()
	mwcs := Clientset(t).AdmissionregistrationV1().MutatingWebhookConfigurations()
	for _, o := range Manifests(t, filepath.Join("deploy", "webhook", "*.yaml")) {
		if o["kind"] != "MutatingWebhookConfiguration" {
			continue
		}
		name := o["metadata"].(map[string]any)["name"].(string)
		mwc, err := mwcs.Get(context.Background(), name, metav1.GetOptions{})
		require.NoError(t, err, "the install doc's procedure installed %s", name)
		from := mwc.Annotations["cert-manager.io/inject-ca-from"]
		require.Contains(t, cas, from, "%s: inject-ca-from names a Certificate of deploy/manager", mwc.Name)
		for i := range mwc.Webhooks {
			require.NotNil(t, mwc.Webhooks[i].ClientConfig.Service, "%s calls a Service", mwc.Name)
			mwc.Webhooks[i].ClientConfig.CABundle = cas[from]
		}
		_, err = mwcs.Update(context.Background(), mwc, metav1.UpdateOptions{})
		require.NoError(t, err, mwc.Name)
	}
}
