package procs

import (
	"context"
	"net"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/remedy-dev/remedy/internal/pki"
)

// certificate is the part of a cert-manager Certificate the test issues from.
type certificate struct {
	Metadata metav1.ObjectMeta `json:"metadata"`
	Spec     struct {
		SecretName  string   `json:"secretName"`
		DNSNames    []string `json:"dnsNames"`
		IPAddresses []string `json:"ipAddresses"`
		IssuerRef   struct {
			Name string `json:"name"`
			Kind string `json:"kind"`
		} `json:"issuerRef"`
	} `json:"spec"`
}

// IssueCertificates does cert-manager's part for deploy/manager: each
// Certificate's Secret (tls.crt, tls.key, ca.crt) for its dnsNames and
// ipAddresses from its selfSigned Issuer, as the install stored it (an
// overlay may have added addresses). It returns each Certificate's CA by
// namespace/name.
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
	dyn, err := dynamic.NewForConfig(env.Config)
	require.NoError(t, err)
	certificates := dyn.Resource(schema.GroupVersionResource{Group: "cert-manager.io", Version: "v1", Resource: "certificates"})
	for _, o := range objs {
		if o["kind"] != "Certificate" {
			continue
		}
		meta := o["metadata"].(map[string]any)
		stored, err := certificates.Namespace(meta["namespace"].(string)).Get(context.Background(), meta["name"].(string), metav1.GetOptions{})
		require.NoError(t, err, "the install stored Certificate %s", meta["name"])
		var c certificate
		require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(stored.Object, &c))
		require.True(t, selfSigned[c.Spec.IssuerRef.Name], "%s: issuer %s is a selfSigned Issuer beside it", c.Metadata.Name, c.Spec.IssuerRef.Name)
		var ips []net.IP
		for _, a := range c.Spec.IPAddresses {
			ip := net.ParseIP(a)
			require.NotNil(t, ip, "%s: ipAddresses %q", c.Metadata.Name, a)
			ips = append(ips, ip)
		}
		pair, err := pki.SelfSigned(c.Spec.DNSNames[0], c.Spec.DNSNames, ips...)
		require.NoError(t, err)
		sec := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: c.Spec.SecretName, Namespace: c.Metadata.Namespace},
			Type:       corev1.SecretTypeTLS,
			Data:       map[string][]byte{"tls.crt": pair.CertPEM, "tls.key": pair.KeyPEM, "ca.crt": pair.CertPEM},
		}
		_, err = cs.CoreV1().Secrets(sec.Namespace).Create(context.Background(), sec, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			// An earlier test of the package issued it: renew it, as cert-manager would.
			_, err = cs.CoreV1().Secrets(sec.Namespace).Update(context.Background(), sec, metav1.UpdateOptions{})
		}
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
	ctx := context.Background()
	mwcs := Clientset(t).AdmissionregistrationV1().MutatingWebhookConfigurations()
	vwcs := Clientset(t).AdmissionregistrationV1().ValidatingWebhookConfigurations()
	for _, o := range Manifests(t, filepath.Join("deploy", "webhook", "*.yaml")) {
		meta, _ := o["metadata"].(map[string]any) // the Kustomization has none
		name, _ := meta["name"].(string)
		switch o["kind"] {
		case "MutatingWebhookConfiguration":
			mwc, err := mwcs.Get(ctx, name, metav1.GetOptions{})
			require.NoError(t, err, "the install doc's procedure installed %s", name)
			for i := range mwc.Webhooks {
				mwc.Webhooks[i].ClientConfig.CABundle = caBundle(t, cas, mwc.Annotations, name, mwc.Webhooks[i].ClientConfig)
			}
			_, err = mwcs.Update(ctx, mwc, metav1.UpdateOptions{})
			require.NoError(t, err, name)
		case "ValidatingWebhookConfiguration":
			vwc, err := vwcs.Get(ctx, name, metav1.GetOptions{})
			require.NoError(t, err, "the install doc's procedure installed %s", name)
			for i := range vwc.Webhooks {
				vwc.Webhooks[i].ClientConfig.CABundle = caBundle(t, cas, vwc.Annotations, name, vwc.Webhooks[i].ClientConfig)
			}
			_, err = vwcs.Update(ctx, vwc, metav1.UpdateOptions{})
			require.NoError(t, err, name)
		}
	}
}

// caBundle is the CA of the Certificate a webhook configuration's
// inject-ca-from names.
func caBundle(t testing.TB, cas map[string][]byte, annotations map[string]string, name string, cc admissionregistrationv1.WebhookClientConfig) []byte {
	t.Helper()
	from := annotations["cert-manager.io/inject-ca-from"]
	require.Contains(t, cas, from, "%s: inject-ca-from names a Certificate of deploy/manager", name)
	require.NotNil(t, cc.Service, "%s calls a Service", name)
	return cas[from]
}
