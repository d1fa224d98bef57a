package harness

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/internal/devenv"
	"github.com/remedy-dev/remedy/internal/pki"
)

// MutatingWebhook returns the URL and caBundle the API server uses to call
// the first webhook of the named MutatingWebhookConfiguration.
func MutatingWebhook(t testing.TB, name string) (url string, caBundle []byte) {
	t.Helper()
	var mwc admissionregistrationv1.MutatingWebhookConfiguration
	require.NoError(t, kube.Get(context.Background(), ctrlclient.ObjectKey{Name: name}, &mwc))
	require.NotEmpty(t, mwc.Webhooks)
	cc := mwc.Webhooks[0].ClientConfig
	require.NotNil(t, cc.URL, "webhook %s is not served at a URL", name)
	return *cc.URL, cc.CABundle
}

// APIServerClientCert is the client certificate the API server presents to
// admission webhooks.
func APIServerClientCert(t testing.TB) tls.Certificate {
	t.Helper()
	c, err := tls.LoadX509KeyPair(env.WebhookClientCert, env.WebhookClientKey)
	require.NoError(t, err)
	return c
}

// ForeignClientCert carries the API server's name but is signed by a CA no
// webhook trusts.
func ForeignClientCert(t testing.TB) tls.Certificate {
	t.Helper()
	ca, err := pki.NewCA("not-the-cluster-ca")
	require.NoError(t, err)
	p, err := ca.Client(devenv.APIServerClientName)
	require.NoError(t, err)
	c, err := p.TLS()
	require.NoError(t, err)
	return c
}

// PostAdmissionReview sends review straight to a webhook's url, as the API
// server would but presenting cert (nil: no certificate, whatever the
// server asks for), and returns the webhook's answer.
func PostAdmissionReview(url string, caBundle []byte, cert *tls.Certificate, review *admissionv1.AdmissionReview) (*admissionv1.AdmissionReview, error) {
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caBundle)
	cfg := &tls.Config{RootCAs: roots}
	if cert != nil {
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return cert, nil }
	}
	body, err := json.Marshal(review)
	if err != nil {
		return nil, fmt.Errorf("encode review: %w", err)
	}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg, DisableKeepAlives: true}}
	resp, err := hc.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("post review: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("post review: status %s", resp.Status)
	}
	var out admissionv1.AdmissionReview
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return nil, fmt.Errorf("decode answer: %w", err)
	}
	return &out, nil
}
