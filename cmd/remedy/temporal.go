package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	sdklog "go.temporal.io/sdk/log"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/remedy-dev/remedy/internal/metrics"
	"github.com/remedy-dev/remedy/internal/seal"
)

// temporalFlags are the connection settings of every command that dials
// Temporal. TLS is on as soon as any TLS setting or an API key is given.
type temporalFlags struct {
	address, namespace string
	tlsCA              string // PEM bundle that verifies the server; empty: the system roots
	tlsCert, tlsKey    string // client certificate for mTLS, reloaded when the files change
	serverName         string // overrides the name the server certificate must carry
	apiKey             string // Temporal Cloud API key
	apiKeyFile         string // file holding the API key, reloaded when it changes
	payloadKeys        string // directory of Remedy's payload keys (Secret remedy-payload-keys)
	unsealedBefore     string // migration cutoff: RFC 3339 time (internal/seal/migrate.go)

	// Set by dial: the loaded keys and cutoff, for the worker's signal check.
	keys   *seal.Keyring
	cutoff time.Time
}

func (t *temporalFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&t.address, "temporal-address", envOr("TEMPORAL_ADDRESS", "127.0.0.1:7233"), "Temporal frontend host:port (env TEMPORAL_ADDRESS)")
	fs.StringVar(&t.namespace, "temporal-namespace", envOr("TEMPORAL_NAMESPACE", "default"), "Temporal namespace (env TEMPORAL_NAMESPACE)")
	fs.StringVar(&t.tlsCA, "temporal-tls-ca", os.Getenv("TEMPORAL_TLS_CA"), "PEM CA bundle that verifies Temporal's server certificate; enables TLS (env TEMPORAL_TLS_CA)")
	fs.StringVar(&t.tlsCert, "temporal-tls-cert", os.Getenv("TEMPORAL_TLS_CERT"), "PEM client certificate for mTLS, with --temporal-tls-key; reread when it changes (env TEMPORAL_TLS_CERT)")
	fs.StringVar(&t.tlsKey, "temporal-tls-key", os.Getenv("TEMPORAL_TLS_KEY"), "PEM private key of --temporal-tls-cert (env TEMPORAL_TLS_KEY)")
	fs.StringVar(&t.serverName, "temporal-server-name", os.Getenv("TEMPORAL_SERVER_NAME"), "name Temporal's server certificate must carry, if not the host of --temporal-address; enables TLS (env TEMPORAL_SERVER_NAME)")
	// The key itself is never shown as a default in -h; prefer the file or
	// the env var, since arguments are visible to anyone who can list processes.
	t.apiKey = os.Getenv("TEMPORAL_API_KEY")
	fs.Var(secretFlag{&t.apiKey}, "temporal-api-key", "Temporal Cloud API key; enables TLS. Visible in the process list: prefer env TEMPORAL_API_KEY or --temporal-api-key-file")
	fs.StringVar(&t.apiKeyFile, "temporal-api-key-file", os.Getenv("TEMPORAL_API_KEY_FILE"), "file holding the Temporal Cloud API key, reread when it changes; enables TLS (env TEMPORAL_API_KEY_FILE)")
	fs.StringVar(&t.payloadKeys, "payload-keys", os.Getenv("REMEDY_PAYLOAD_KEYS"), "directory of Remedy's payload keys, Secret "+payloadKeysSecret+" mounted: every payload sent through Temporal is sealed with them, and nothing unsealed is accepted; required (env REMEDY_PAYLOAD_KEYS)")
	fs.StringVar(&t.unsealedBefore, "payload-unsealed-before", os.Getenv("REMEDY_PAYLOAD_UNSEALED_BEFORE"), "upgrading from v0.1.0 only: an RFC 3339 time, when the previous release's parts stopped; unsealed payloads that release recorded before it are accepted in replays and in activities it scheduled, nothing else (docs/security.md; env REMEDY_PAYLOAD_UNSEALED_BEFORE)")
}

// payloadKeysSecret is the Secret deploy/manager mounts for --payload-keys.
const payloadKeysSecret = "remedy-payload-keys"

// converters loads the payload keys: a part without them refuses to start.
func (t *temporalFlags) converters() (converter.DataConverter, converter.FailureConverter, error) {
	if t.payloadKeys == "" {
		return nil, nil, fmt.Errorf("--payload-keys is required: Remedy's parts seal every payload they send through Temporal and accept only sealed ones; mount Secret %s (docs/operate.md) and pass its directory with --payload-keys or env REMEDY_PAYLOAD_KEYS", payloadKeysSecret)
	}
	keys, err := seal.LoadKeyring(t.payloadKeys)
	if err != nil {
		return nil, nil, fmt.Errorf("--payload-keys (Secret %s): %w", payloadKeysSecret, err)
	}
	var cutoff time.Time
	if t.unsealedBefore != "" {
		if cutoff, err = time.Parse(time.RFC3339, t.unsealedBefore); err != nil {
			return nil, nil, fmt.Errorf("--payload-unsealed-before: want an RFC 3339 time: %w", err)
		}
	}
	t.keys, t.cutoff = keys, cutoff
	dc := seal.NewDataConverter(keys, cutoff)
	return dc, seal.FailureConverter(dc), nil
}

// secretFlag is a string flag whose value -h never prints.
type secretFlag struct{ s *string }

func (f secretFlag) String() string     { return "" }
func (f secretFlag) Set(v string) error { *f.s = v; return nil }

// clientOptions builds the SDK's options from the flags. Every file is read
// once here, so a bad combination fails before dialing with the flag's name.
func (t temporalFlags) clientOptions() (client.Options, error) {
	opts := client.Options{HostPort: t.address, Namespace: t.namespace}
	if t.apiKey != "" && t.apiKeyFile != "" {
		return opts, errors.New("--temporal-api-key and --temporal-api-key-file exclude each other: set one")
	}
	if (t.tlsCert == "") != (t.tlsKey == "") {
		return opts, errors.New("--temporal-tls-cert and --temporal-tls-key go together: set both or neither")
	}
	if t.tlsCA == "" && t.tlsCert == "" && t.serverName == "" && t.apiKey == "" && t.apiKeyFile == "" {
		return opts, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.serverName}
	if t.tlsCA != "" {
		pool, err := loadCAPool(t.tlsCA)
		if err != nil {
			return opts, err
		}
		cfg.RootCAs = pool
	}
	if t.tlsCert != "" {
		pair := newReloading(func() (*tls.Certificate, error) {
			c, err := tls.LoadX509KeyPair(t.tlsCert, t.tlsKey)
			if err != nil {
				return nil, fmt.Errorf("load --temporal-tls-cert %s and --temporal-tls-key %s: %w", t.tlsCert, t.tlsKey, err)
			}
			return &c, nil
		}, t.tlsCert, t.tlsKey)
		if _, err := pair.get(); err != nil {
			return opts, err
		}
		// cert-manager rotates the Secret in place: each handshake takes
		// the pair on disk now.
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return pair.get() }
	}
	opts.ConnectionOptions.TLS = cfg
	switch {
	case t.apiKey != "":
		opts.Credentials = client.NewAPIKeyStaticCredentials(t.apiKey)
	case t.apiKeyFile != "":
		key := newReloading(func() (string, error) { return readAPIKey(t.apiKeyFile) }, t.apiKeyFile)
		if _, err := key.get(); err != nil {
			return opts, err
		}
		opts.Credentials = client.NewAPIKeyDynamicCredentials(func(ctx context.Context) (string, error) { return key.get() })
	}
	return opts, nil
}

func loadCAPool(file string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("read --temporal-tls-ca: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("--temporal-tls-ca %s holds no PEM certificate", file)
	}
	return pool, nil
}

func readAPIKey(file string) (string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("read --temporal-api-key-file: %w", err)
	}
	key := strings.TrimSpace(string(b))
	if key == "" {
		return "", fmt.Errorf("--temporal-api-key-file %s is empty", file)
	}
	return key, nil
}

func (t *temporalFlags) dial() (client.Client, error) {
	dc, fc, err := t.converters()
	if err != nil {
		return nil, err
	}
	opts, err := t.clientOptions()
	if err != nil {
		return nil, err
	}
	opts.DataConverter, opts.FailureConverter = dc, fc
	opts.Logger = sdklog.NewStructuredLogger(slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})))
	// The SDK's own metrics join Remedy's on the process's /metrics.
	opts.MetricsHandler = metrics.NewTemporalHandler(ctrlmetrics.Registry)
	c, err := client.Dial(opts)
	if err != nil {
		return nil, fmt.Errorf("dial temporal at %s: %w", t.address, err)
	}
	return c, nil
}

// connect dials Temporal and loads the kubeconfig every long-running command needs.
func (t *temporalFlags) connect() (client.Client, *rest.Config, error) {
	tc, err := t.dial()
	if err != nil {
		return nil, nil, err
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		tc.Close()
		return nil, nil, fmt.Errorf("load kubeconfig: %w", err)
	}
	return tc, cfg, nil
}
