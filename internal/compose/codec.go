package compose

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/internal/codecserver"
	"github.com/remedy-dev/remedy/internal/seal"
)

// CodecOptions configure the codec server the operator serves.
type CodecOptions struct {
	// Addr is host:port to listen on.
	Addr string
	// AllowedOrigins are the Web UI origins that may call it with credentials.
	AllowedOrigins []string
	// CertFile and KeyFile serve TLS; empty serves plain HTTP (loopback only).
	CertFile, KeyFile string
}

// ServeCodec serves Remedy's codec server (internal/codecserver) until ctx
// ends, reviewing tokens and access as cfg (the operator's identity), and
// returns its URL.
func ServeCodec(ctx context.Context, cfg *rest.Config, keys *seal.Keyring, o CodecOptions) (string, error) {
	if keys == nil {
		return "", errors.New("the codec server needs Remedy's payload keys (--payload-keys)")
	}
	if (o.CertFile == "") != (o.KeyFile == "") {
		return "", errors.New("the codec server's TLS needs both a certificate and a key")
	}
	kc, err := ctrlclient.New(cfg, ctrlclient.Options{})
	if err != nil {
		return "", fmt.Errorf("build codec server client: %w", err)
	}
	s := &codecserver.Server{Keys: keys, Reviewer: codecserver.KubeReviewer{Client: kc}, AllowedOrigins: o.AllowedOrigins, Log: ctrl.Log.WithName("codec")}
	l, err := net.Listen("tcp", o.Addr)
	if err != nil {
		return "", fmt.Errorf("serve codec server: %w", err)
	}
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute, WriteTimeout: time.Minute}
	scheme := "http"
	if o.CertFile != "" {
		if _, err := tls.LoadX509KeyPair(o.CertFile, o.KeyFile); err != nil {
			_ = l.Close()
			return "", fmt.Errorf("load the codec server's certificate: %w", err)
		}
		// Read on every handshake, so a certificate cert-manager renews into
		// the mounted Secret is served without a restart.
		srv.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			c, err := tls.LoadX509KeyPair(o.CertFile, o.KeyFile)
			return &c, err
		}}
		scheme = "https"
	}
	go func() {
		var err error
		if o.CertFile != "" {
			err = srv.ServeTLS(l, "", "")
		} else {
			err = srv.Serve(l)
		}
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			ctrl.Log.Error(err, "serve codec server", "addr", o.Addr)
		}
	}()
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	return scheme + "://" + l.Addr().String(), nil
}
