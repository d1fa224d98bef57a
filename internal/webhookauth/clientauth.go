package webhookauth

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
)

// ClientAuth says which TLS clients a webhook server admits. The API server
// presents a client certificate to webhooks when its
// --admission-control-config-file names a kubeconfig with one (docs/drift.md);
// a server with CAFile set refuses every client without a certificate that
// CA signed, so a forged AdmissionReview sent straight to the port is never read.
type ClientAuth struct {
	// CAFile is a PEM bundle of the CAs that sign the API server's client
	// certificate. Empty accepts any TLS client, with a loud warning at startup.
	CAFile string
	// Name, when set, must be the client certificate's CommonName or one of
	// its DNS names; empty accepts any certificate CAFile signed.
	Name string
}

// TLSOpts returns the webhook server's TLS options enforcing c. The bundle is
// read now, so a missing or unparsable file fails at startup, and read again
// on a handshake after the file changed (a rotated Secret), keeping the last
// good pool if the new content does not parse. server names the webhook in logs.
func (c ClientAuth) TLSOpts(logger logr.Logger, server string) ([]func(*tls.Config), error) {
	if c.Name != "" && c.CAFile == "" {
		return nil, errors.New("a client name needs a client CA file")
	}
	if c.CAFile == "" {
		logger.Error(nil, "WARNING: no --client-ca-file: the webhook accepts AdmissionReviews from any TLS client that reaches its port, not only the API server",
			"webhook", server)
		return nil, nil
	}
	p := &caPool{path: c.CAFile, log: logger.WithValues("webhook", server, "clientCAFile", c.CAFile)}
	if err := p.load(); err != nil {
		return nil, err
	}
	return []func(*tls.Config){func(cfg *tls.Config) {
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
		cfg.ClientCAs = p.current()
		// A resumed session would skip verification against a rotated CA.
		cfg.SessionTicketsDisabled = true
		if c.Name != "" {
			cfg.VerifyConnection = func(cs tls.ConnectionState) error { return checkName(cs, c.Name) }
		}
		cfg.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
			// cfg is complete by now: the server sets GetCertificate after its options ran.
			hs := cfg.Clone()
			hs.GetConfigForClient = nil
			hs.ClientCAs = p.current()
			return hs, nil
		}
	}}, nil
}

func checkName(cs tls.ConnectionState, name string) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("no client certificate")
	}
	leaf := cs.PeerCertificates[0]
	if leaf.Subject.CommonName == name || slices.Contains(leaf.DNSNames, name) {
		return nil
	}
	return fmt.Errorf("client certificate %q is not %q", leaf.Subject.CommonName, name)
}

// caPool holds the client CA bundle and reloads it when the file's
// modification time or size changes.
type caPool struct {
	path string
	log  logr.Logger

	mu   sync.Mutex
	pool *x509.CertPool
	mod  time.Time
	size int64
}

func (p *caPool) load() error {
	fi, err := os.Stat(p.path)
	if err != nil {
		return fmt.Errorf("read client CA file: %w", err)
	}
	raw, err := os.ReadFile(p.path)
	if err != nil {
		return fmt.Errorf("read client CA file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(raw) {
		return fmt.Errorf("parse client CA file %s: no PEM certificate", p.path)
	}
	p.pool, p.mod, p.size = pool, fi.ModTime(), fi.Size()
	return nil
}

func (p *caPool) current() *x509.CertPool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if fi, err := os.Stat(p.path); err == nil && (!fi.ModTime().Equal(p.mod) || fi.Size() != p.size) {
		if err := p.load(); err != nil {
			p.log.Error(err, "reload client CA file; keeping the previous CAs")
		} else {
			p.log.Info("reloaded client CA file")
		}
	}
	return p.pool
}
