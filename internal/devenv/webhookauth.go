package devenv

import (
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/remedy-dev/remedy/internal/pki"
)

// APIServerClientName is the CommonName of the client certificate the API
// server presents to admission webhooks; the webhooks require it.
const APIServerClientName = "kube-apiserver"

// admissionConfig points both webhook admission plugins at a kubeconfig, as
// a cluster administrator would with --admission-control-config-file.
const admissionConfig = `apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
  - name: ValidatingAdmissionWebhook
    configuration:
      apiVersion: apiserver.config.k8s.io/v1
      kind: WebhookAdmissionConfiguration
      kubeConfigFile: %[1]q
  - name: MutatingAdmissionWebhook
    configuration:
      apiVersion: apiserver.config.k8s.io/v1
      kind: WebhookAdmissionConfiguration
      kubeConfigFile: %[1]q
`

// configureWebhookClientCert makes a client CA and a certificate it signs
// for the API server, and configures the API server, before it starts, to
// present that certificate to every admission webhook: the kubeconfig's
// user "*" matches any webhook host, since the webhooks' ports are only
// chosen later.
func (e *Env) configureWebhookClientCert() error {
	ca, err := pki.NewCA("remedy-dev-webhook-client-ca")
	if err != nil {
		return err
	}
	client, err := ca.Client(APIServerClientName)
	if err != nil {
		return err
	}
	e.WebhookClientCA = filepath.Join(e.tmpDir, "webhook-client-ca.crt")
	e.WebhookClientCert = filepath.Join(e.tmpDir, "webhook-client.crt")
	e.WebhookClientKey = filepath.Join(e.tmpDir, "webhook-client.key")
	kubeconfig := filepath.Join(e.tmpDir, "admission-webhooks.kubeconfig")
	config := filepath.Join(e.tmpDir, "admission-config.yaml")
	if err := writeFiles(map[string][]byte{
		e.WebhookClientCA: ca.CertPEM, e.WebhookClientCert: client.CertPEM, e.WebhookClientKey: client.KeyPEM,
		config: fmt.Appendf(nil, admissionConfig, kubeconfig),
	}); err != nil {
		return err
	}
	kc := clientcmdapi.NewConfig()
	kc.AuthInfos["*"] = &clientcmdapi.AuthInfo{ClientCertificateData: client.CertPEM, ClientKeyData: client.KeyPEM}
	if err := clientcmd.WriteToFile(*kc, kubeconfig); err != nil {
		return fmt.Errorf("write admission webhook kubeconfig: %w", err)
	}
	e.Kube.ControlPlane.GetAPIServer().Configure().Set("admission-control-config-file", config)
	return nil
}

// writeFiles writes each path's content readable by the owner only.
func writeFiles(files map[string][]byte) error {
	for path, content := range files {
		if err := os.WriteFile(path, content, 0o600); err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
	}
	return nil
}
