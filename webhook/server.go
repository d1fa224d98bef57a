package webhook

import (
	"crypto/tls"
	"path/filepath"

	"sigs.k8s.io/controller-runtime/pkg/webhook"
)

// NewDriftServer serves the drift webhook over TLS from certFile and keyFile,
// reloading them when they change (cert-manager rotation); tlsOpts come from
// ClientAuth.TLSOpts.
func NewDriftServer(host string, port int, certFile, keyFile string, tlsOpts []func(*tls.Config), d *Drift) webhook.Server {
	srv := webhook.NewServer(webhook.Options{
		Host: host, Port: port,
		CertDir: filepath.Dir(certFile), CertName: filepath.Base(certFile), KeyName: filepath.Base(keyFile),
		TLSOpts: tlsOpts,
	})
	srv.Register(DriftPath, &webhook.Admission{Handler: d})
	return srv
}
