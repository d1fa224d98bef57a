package webhookauth_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	ctrlwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/remedy-dev/remedy/internal/pki"
	"github.com/remedy-dev/remedy/internal/webhookauth"
)

// authServer runs controller-runtime's webhook server, as both Remedy
// webhooks do, with auth's TLS options, and returns its URL and the CA its
// serving certificate chains to.
func authServer(t *testing.T, auth webhookauth.ClientAuth) (url string, servingCA *x509.CertPool) {
	t.Helper()
	dir := t.TempDir()
	ca, err := pki.NewCA("serving-ca")
	require.NoError(t, err)
	srv, err := ca.Server("webhook")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "tls.crt"), srv.CertPEM, 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "tls.key"), srv.KeyPEM, 0o600))
	opts, err := auth.TLSOpts(logr.Discard(), "test")
	require.NoError(t, err)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())

	s := ctrlwebhook.NewServer(ctrlwebhook.Options{Host: "127.0.0.1", Port: port, CertDir: dir, TLSOpts: opts})
	s.Register("/hook", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Start(ctx) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })
	require.Eventually(t, func() bool { return s.StartedChecker()(&http.Request{}) == nil }, 10*time.Second, 20*time.Millisecond)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.CertPEM)
	return "https://127.0.0.1:" + strconv.Itoa(port) + "/hook", pool
}

// call makes one request on a fresh connection with client (nil: none).
func call(url string, servingCA *x509.CertPool, client *pki.Pair) error {
	cfg := &tls.Config{RootCAs: servingCA}
	if client != nil {
		c, err := client.TLS()
		if err != nil {
			return err
		}
		// Presented whatever CAs the server names, as an attacker would.
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &c, nil }
	}
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg, DisableKeepAlives: true}}
	resp, err := hc.Post(url, "application/json", nil)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		return &statusError{resp.StatusCode}
	}
	return nil
}

type statusError struct{ code int }

func (e *statusError) Error() string { return "status " + strconv.Itoa(e.code) }

func writeCA(t *testing.T, path string, ca pki.Pair, mod time.Time) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, ca.CertPEM, 0o600))
	require.NoError(t, os.Chtimes(path, mod, mod))
}

func mustCA(t *testing.T, cn string) pki.Pair {
	t.Helper()
	ca, err := pki.NewCA(cn)
	require.NoError(t, err)
	return ca
}

func mustClient(t *testing.T, ca pki.Pair, cn string) *pki.Pair {
	t.Helper()
	c, err := ca.Client(cn)
	require.NoError(t, err)
	return &c
}

func TestClientAuthAdmitsOnlyTheConfiguredCAAndName(t *testing.T) {
	trusted, other := mustCA(t, "apiserver-client-ca"), mustCA(t, "other-ca")
	caFile := filepath.Join(t.TempDir(), "client-ca.crt")
	writeCA(t, caFile, trusted, time.Now())
	url, servingCA := authServer(t, webhookauth.ClientAuth{CAFile: caFile, Name: "kube-apiserver"})

	for name, tc := range map[string]struct {
		client *pki.Pair
		ok     bool
	}{
		"no certificate":              {nil, false},
		"certificate of another CA":   {mustClient(t, other, "kube-apiserver"), false},
		"trusted CA, another name":    {mustClient(t, trusted, "mallory"), false},
		"trusted CA, configured name": {mustClient(t, trusted, "kube-apiserver"), true},
	} {
		t.Run(name, func(t *testing.T) {
			err := call(url, servingCA, tc.client)
			if tc.ok {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			var se *statusError
			assert.NotErrorAs(t, err, &se, "refused in the handshake, before any handler ran")
		})
	}
}

func TestClientAuthReloadsARotatedCA(t *testing.T) {
	first, second := mustCA(t, "first-ca"), mustCA(t, "second-ca")
	caFile := filepath.Join(t.TempDir(), "client-ca.crt")
	writeCA(t, caFile, first, time.Now().Add(-time.Hour))
	url, servingCA := authServer(t, webhookauth.ClientAuth{CAFile: caFile})
	oldClient, newClient := mustClient(t, first, "a"), mustClient(t, second, "a")
	require.NoError(t, call(url, servingCA, oldClient))
	require.Error(t, call(url, servingCA, newClient))

	writeCA(t, caFile, second, time.Now())
	require.NoError(t, call(url, servingCA, newClient), "the rotated CA was not loaded")
	require.Error(t, call(url, servingCA, oldClient), "the replaced CA is still trusted")

	// A broken file keeps the last good CA.
	require.NoError(t, os.WriteFile(caFile, []byte("not PEM"), 0o600))
	require.NoError(t, call(url, servingCA, newClient))
}

func TestClientAuthWithoutCAAdmitsAnyClientAndWarns(t *testing.T) {
	url, servingCA := authServer(t, webhookauth.ClientAuth{})
	require.NoError(t, call(url, servingCA, nil))

	var logged []string
	_, err := webhookauth.ClientAuth{}.TLSOpts(funcr.New(func(_, args string) { logged = append(logged, args) }, funcr.Options{}), "drift")
	require.NoError(t, err)
	require.Len(t, logged, 1)
	assert.Contains(t, logged[0], "WARNING: no --client-ca-file")
	assert.Contains(t, logged[0], `"webhook"="drift"`)
}

func TestClientAuthRefusesBadConfiguration(t *testing.T) {
	_, err := webhookauth.ClientAuth{Name: "kube-apiserver"}.TLSOpts(logr.Discard(), "test")
	require.Error(t, err, "a name without a CA would admit anyone")
	_, err = webhookauth.ClientAuth{CAFile: filepath.Join(t.TempDir(), "missing.crt")}.TLSOpts(logr.Discard(), "test")
	require.Error(t, err)
	empty := filepath.Join(t.TempDir(), "empty.crt")
	require.NoError(t, os.WriteFile(empty, nil, 0o600))
	_, err = webhookauth.ClientAuth{CAFile: empty}.TLSOpts(logr.Discard(), "test")
	require.Error(t, err)
}
