package devcompose

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	kv1 "github.com/remedy-dev/remedy/api/kausality/v1alpha1"
	"github.com/remedy-dev/remedy/internal/devenv"
	"github.com/remedy-dev/remedy/internal/pki"
	"github.com/remedy-dev/remedy/webhook"
)

// DriftWebhookOptions configure the drift webhook RunDriftWebhook starts.
type DriftWebhookOptions struct {
	// Manifest is deploy/webhook/drift.yaml; the default policy,
	// drift-policy.yaml, is installed from the same directory.
	Manifest    string
	DefaultMode kv1.Mode
}

// RunDriftWebhook serves the drift webhook in-process as the remedy-webhook
// ServiceAccount with a fresh self-signed certificate for 127.0.0.1, then
// installs the MutatingWebhookConfiguration pointing at it with that caBundle.
func RunDriftWebhook(ctx context.Context, e *devenv.Env, o DriftWebhookOptions) (done <-chan error, err error) {
	certFile, keyFile, caPEM, err := selfSignedPair(e.TempDir())
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	cfg, err := devenv.ServiceAccountConfig(ctx, e.Config, devenv.Namespace, "remedy-webhook")
	if err != nil {
		return nil, err
	}
	done, err = webhook.RunDrift(ctx, webhook.DriftOptions{
		Kube: cfg, Temporal: e.Temporal, Host: "127.0.0.1", Port: port, CertFile: certFile, KeyFile: keyFile, ClientAuth: clientAuth(e),
		DefaultMode: o.DefaultMode, QueueSize: 1024,
		WebhookConfiguration: webhook.DriftWebhookConfiguration,
	})
	if err != nil {
		return nil, err
	}
	url := "https://127.0.0.1:" + strconv.Itoa(port) + webhook.DriftPath
	if err := installDriftConfiguration(ctx, e, o.Manifest, url, caPEM); err != nil {
		return nil, err
	}
	if err := devenv.Install(ctx, e.Config, filepath.Join(filepath.Dir(o.Manifest), "drift-policy.yaml")); err != nil {
		return nil, fmt.Errorf("install the default drift policy: %w", err)
	}
	if err := waitDriftRules(ctx, e); err != nil {
		return nil, err
	}
	return done, nil
}

// waitDriftRules waits until the webhook has written the policies' rules
// into its configuration, so nothing created next goes unseen.
func waitDriftRules(ctx context.Context, e *devenv.Env) error {
	cs, err := kubernetes.NewForConfig(e.Config)
	if err != nil {
		return fmt.Errorf("build clientset: %w", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		mwc, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, webhook.DriftWebhookConfiguration, metav1.GetOptions{})
		if err == nil && len(mwc.Webhooks) > 0 && len(mwc.Webhooks[0].Rules) > 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("drift webhook configuration has no rules after 30s (last error: %v)", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func installDriftConfiguration(ctx context.Context, e *devenv.Env, manifest, url string, caPEM []byte) error {
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
	mwcs := cs.AdmissionregistrationV1().MutatingWebhookConfigurations()
	_, err = mwcs.Create(ctx, &mwc, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		// A resumed state directory holds the last run's, with its old URL
		// and CA, and the rules the webhook (already running) keeps in it.
		err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
			old, err := mwcs.Get(ctx, mwc.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			for i := range old.Webhooks {
				old.Webhooks[i].ClientConfig = admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: caPEM}
			}
			_, err = mwcs.Update(ctx, old, metav1.UpdateOptions{})
			return err
		})
	}
	if err != nil {
		return fmt.Errorf("install drift webhook configuration: %w", err)
	}
	return nil
}

// selfSignedPair writes a serving certificate for 127.0.0.1 and its key
// into dir, returning their paths and the CA that signed it as caBundle.
func selfSignedPair(dir string) (certFile, keyFile string, caPEM []byte, err error) {
	ca, err := pki.NewCA("remedy-drift-webhook-ca")
	if err != nil {
		return "", "", nil, err
	}
	srv, err := ca.Server("remedy-drift-webhook")
	if err != nil {
		return "", "", nil, err
	}
	certFile, keyFile = filepath.Join(dir, "drift-tls.crt"), filepath.Join(dir, "drift-tls.key")
	for path, content := range map[string][]byte{certFile: srv.CertPEM, keyFile: srv.KeyPEM} {
		if err := os.WriteFile(path, content, 0o600); err != nil {
			return "", "", nil, fmt.Errorf("write %s: %w", path, err)
		}
	}
	return certFile, keyFile, ca.CertPEM, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
