package devenv

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"

	kv1 "github.com/remedy-dev/remedy/api/kausality/v1alpha1"
	"github.com/remedy-dev/remedy/webhook"
)

// DriftWebhookOptions configure the drift webhook RunDriftWebhook starts.
type DriftWebhookOptions struct {
	// Manifest is deploy/webhook/drift.yaml.
	Manifest        string
	DefaultMode     kv1.Mode
	CallbackURLs    []string
	RequestApproval bool
}

// RunDriftWebhook serves the drift webhook in-process as the remedy-webhook
// ServiceAccount with a fresh self-signed certificate for 127.0.0.1, then
// installs the MutatingWebhookConfiguration pointing at it with that caBundle.
func (e *Env) RunDriftWebhook(ctx context.Context, o DriftWebhookOptions) (done <-chan error, err error) {
	certFile, keyFile, caPEM, err := selfSignedPair(e.tmpDir)
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	cfg, err := ServiceAccountConfig(ctx, e.Config, Namespace, "remedy-webhook")
	if err != nil {
		return nil, err
	}
	done, err = webhook.RunDrift(ctx, webhook.DriftOptions{
		Kube: cfg, Temporal: e.Temporal, Host: "127.0.0.1", Port: port, CertFile: certFile, KeyFile: keyFile,
		DefaultMode: o.DefaultMode, CallbackURLs: o.CallbackURLs, RequestApproval: o.RequestApproval, QueueSize: 1024,
	})
	if err != nil {
		return nil, err
	}
	url := "https://127.0.0.1:" + strconv.Itoa(port) + webhook.DriftPath
	if err := installDriftConfiguration(ctx, e, o.Manifest, url, caPEM); err != nil {
		return nil, err
	}
	return done, nil
}

func installDriftConfiguration(ctx context.Context, e *Env, manifest, url string, caPEM []byte) error {
	raw, err := os.ReadFile(manifest)
	if err != nil {
		return fmt.Errorf("read %s: %w", manifest, err)
	}
	var mwc admissionregistrationv1.MutatingWebhookConfiguration
	if err := yaml.Unmarshal(raw, &mwc); err != nil {
		return fmt.Errorf("decode %s: %w", manifest, err)
	}
	for i := range mwc.Webhooks {
		mwc.Webhooks[i].ClientConfig = admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: caPEM}
	}
	cs, err := kubernetes.NewForConfig(e.Config)
	if err != nil {
		return fmt.Errorf("build clientset: %w", err)
	}
	if _, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, &mwc, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("install drift webhook configuration: %w", err)
	}
	return nil
}

// selfSignedPair writes a self-signed ECDSA certificate for 127.0.0.1 and
// its key into dir, returning their paths and the certificate as caBundle.
func selfSignedPair(dir string) (certFile, keyFile string, certPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", nil, fmt.Errorf("generate key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: "remedy-drift-webhook"},
		NotBefore:    time.Now().Add(-time.Minute), NotAfter: time.Now().Add(7 * 24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return "", "", nil, fmt.Errorf("sign certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return "", "", nil, fmt.Errorf("encode key: %w", err)
	}
	certPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	certFile, keyFile = filepath.Join(dir, "drift-tls.crt"), filepath.Join(dir, "drift-tls.key")
	if err := os.WriteFile(certFile, certPEM, 0o600); err != nil {
		return "", "", nil, fmt.Errorf("write certificate: %w", err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return "", "", nil, fmt.Errorf("write key: %w", err)
	}
	return certFile, keyFile, certPEM, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
