package procs

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/remedy-dev/remedy/internal/devenv"
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

// ClientCASecret is what README's procedure creates: the CA that signs the
// API server's webhook client certificate.
func ClientCASecret(t testing.TB) {
	t.Helper()
	ca, err := os.ReadFile(env.WebhookClientCA)
	require.NoError(t, err)
	_, err = Clientset(t).CoreV1().Secrets(devenv.Namespace).Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "remedy-webhook-client-ca", Namespace: devenv.Namespace},
		Data:       map[string][]byte{"ca.crt": ca},
	}, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
}

// InstallWebhooks applies deploy/webhook's configurations as written, with
// the caBundle cert-manager's cainjector would set from inject-ca-from.
func InstallWebhooks(t testing.TB, cas map[string][]byte) {
	t.Helper()
	cs := Clientset(t)
	for _, o := range Manifests(t, filepath.Join("deploy", "webhook", "*.yaml")) {
		if o["kind"] != "MutatingWebhookConfiguration" {
			continue
		}
		var mwc admissionregistrationv1.MutatingWebhookConfiguration
		require.NoError(t, Convert(o, &mwc))
		from := mwc.Annotations["cert-manager.io/inject-ca-from"]
		require.Contains(t, cas, from, "%s: inject-ca-from names a Certificate of deploy/manager", mwc.Name)
		for i := range mwc.Webhooks {
			require.NotNil(t, mwc.Webhooks[i].ClientConfig.Service, "%s calls a Service", mwc.Name)
			mwc.Webhooks[i].ClientConfig.CABundle = cas[from]
		}
		_, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(context.Background(), &mwc, metav1.CreateOptions{})
		require.NoError(t, err, mwc.Name)
	}
	require.NoError(t, devenv.Install(context.Background(), env.Config, filepath.Join(Root, "deploy", "webhook", "drift-policy.yaml")))
}
