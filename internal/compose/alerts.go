package compose

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/alerts"
	"github.com/remedy-dev/remedy/internal/alertmanager"
	"github.com/remedy-dev/remedy/operator"
)

// AlertsOptions configure the worker's Alertmanager receiver.
type AlertsOptions struct {
	// Addr to listen on, e.g. ":9095" or "127.0.0.1:0".
	Addr string
	// TokenFile holds the bearer token Alertmanager sends.
	TokenFile string
	// CertFile and KeyFile serve TLS; ClientCAFile, when set, also admits
	// client certificates it verifies (with or without a token).
	CertFile, KeyFile, ClientCAFile string
	// MaxBodyBytes, MaxAge: see alerts.Receiver (0: defaults).
	MaxBodyBytes int64
	MaxAge       time.Duration
	// AlertmanagerURL, when set, is swept every SweepEvery (default 1m) for lost resolves.
	AlertmanagerURL string
	// AlertmanagerHTTPConfigFile holds its credentials (required with AlertmanagerURL).
	AlertmanagerHTTPConfigFile string
	SweepEvery                 time.Duration
	// SweepGrace after Alertmanager starts before the sweep trusts its list (0: alerts.DefaultSweepGrace).
	SweepGrace time.Duration
	// TemporalTimeout bounds handing one notification to Temporal (0: the receiver's default).
	TemporalTimeout time.Duration
	// Temporal overrides the client the receiver hands alerts to (tests).
	Temporal alerts.Temporal
}

// ServeAlerts serves the receiver at alerts.Path until ctx ends, reading
// rules as cfg (the worker's identity), and the sweep for lost resolves. It
// returns the receiver's URL.
func ServeAlerts(ctx context.Context, cfg *rest.Config, tc alerts.Temporal, lister alerts.Lister, o AlertsOptions) (string, error) {
	kc, err := ctrlclient.New(cfg, ctrlclient.Options{Scheme: operator.Scheme()})
	if err != nil {
		return "", fmt.Errorf("build alerts client: %w", err)
	}
	if o.Temporal != nil {
		tc = o.Temporal
	}
	h := &alerts.Receiver{Temporal: tc, Rules: kc, TokenFile: o.TokenFile, ClientCerts: o.ClientCAFile != "",
		MaxBodyBytes: o.MaxBodyBytes, MaxAge: o.MaxAge, TemporalTimeout: o.TemporalTimeout, Log: ctrl.Log.WithName("alerts")}
	mux := http.NewServeMux()
	mux.Handle(alerts.Path, h)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second}
	scheme := "http"
	if o.CertFile != "" {
		scheme = "https"
		srv.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
		if o.ClientCAFile != "" {
			pem, err := os.ReadFile(o.ClientCAFile)
			if err != nil {
				return "", fmt.Errorf("read alerts client CA: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return "", fmt.Errorf("alerts client CA %s holds no certificate", o.ClientCAFile)
			}
			srv.TLSConfig.ClientCAs, srv.TLSConfig.ClientAuth = pool, tls.VerifyClientCertIfGiven
		}
	}
	var am *alertmanager.Client
	if o.AlertmanagerURL != "" {
		if am, err = alertmanager.New(o.AlertmanagerURL, o.AlertmanagerHTTPConfigFile); err != nil {
			return "", err
		}
	}
	l, err := net.Listen("tcp", o.Addr)
	if err != nil {
		return "", fmt.Errorf("listen for alerts: %w", err)
	}
	go func() {
		var err error
		if scheme == "https" {
			err = srv.ServeTLS(l, o.CertFile, o.KeyFile)
		} else {
			err = srv.Serve(l)
		}
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			ctrl.Log.Error(err, "serve alerts", "addr", o.Addr)
		}
	}()
	if am != nil {
		every := o.SweepEvery
		if every <= 0 {
			every = time.Minute
		}
		sw := &alerts.Sweep{Temporal: lister, Every: every, Grace: o.SweepGrace, Log: ctrl.Log.WithName("alerts-sweep"),
			Alertmanager: am}
		go sw.Run(ctx)
	}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	return fmt.Sprintf("%s://%s%s", scheme, l.Addr().String(), alerts.Path), nil
}
