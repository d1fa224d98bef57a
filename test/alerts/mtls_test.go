package alerts

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/alertmanager"
	"github.com/remedy-dev/remedy/internal/compose"
	"github.com/remedy-dev/remedy/internal/devenv"
	"github.com/remedy-dev/remedy/internal/pki"
	"github.com/remedy-dev/remedy/test/harness"
)

// tlsFiles are the PEM files of an mTLS setup: the receiver's serving pair
// and the CA clients must chain to, Alertmanager's client pair and the CA
// it checks the receiver with, and a stranger's pair from another CA.
type tlsFiles struct {
	dir                              string
	servingCA, serverCert, serverKey string
	clientCA, clientCert, clientKey  string
	strangerCert, strangerKey        string
	client, stranger                 tls.Certificate
	roots                            *x509.CertPool
}

func newTLSFiles(t *testing.T) tlsFiles {
	t.Helper()
	servingCA, err := pki.NewCA("alerts-serving-ca")
	require.NoError(t, err)
	server, err := servingCA.Server("remedy-alerts")
	require.NoError(t, err)
	clientCA, err := pki.NewCA("alerts-client-ca")
	require.NoError(t, err)
	client, err := clientCA.Client("alertmanager")
	require.NoError(t, err)
	otherCA, err := pki.NewCA("another-ca")
	require.NoError(t, err)
	stranger, err := otherCA.Client("alertmanager")
	require.NoError(t, err)
	f := tlsFiles{dir: t.TempDir(), roots: x509.NewCertPool()}
	write := func(name string, pem []byte) string {
		p := filepath.Join(f.dir, name)
		require.NoError(t, os.WriteFile(p, pem, 0o600))
		return p
	}
	f.servingCA, f.serverCert, f.serverKey = write("serving-ca.crt", servingCA.CertPEM), write("server.crt", server.CertPEM), write("server.key", server.KeyPEM)
	f.clientCA, f.clientCert, f.clientKey = write("client-ca.crt", clientCA.CertPEM), write("client.crt", client.CertPEM), write("client.key", client.KeyPEM)
	f.strangerCert, f.strangerKey = write("stranger.crt", stranger.CertPEM), write("stranger.key", stranger.KeyPEM)
	require.True(t, f.roots.AppendCertsFromPEM(servingCA.CertPEM))
	f.client, err = client.TLS()
	require.NoError(t, err)
	f.stranger, err = stranger.TLS()
	require.NoError(t, err)
	return f
}

// serveTLSReceiver serves a second receiver, as the worker would with
// --alerts-tls-cert/-key and --alerts-client-ca (and --alerts-token-file
// when tokenFile is set), until the test ends.
func serveTLSReceiver(t *testing.T, f tlsFiles, tokenFile string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	cfg, err := devenv.ServiceAccountConfig(ctx, harness.Config(), devenv.Namespace, "remedy-worker")
	require.NoError(t, err)
	url, err := compose.ServeAlerts(ctx, cfg, harness.Temporal(), harness.Temporal(), compose.AlertsOptions{Addr: "127.0.0.1:0",
		CertFile: f.serverCert, KeyFile: f.serverKey, ClientCAFile: f.clientCA, TokenFile: tokenFile})
	require.NoError(t, err)
	return url
}

// tlsPost posts a notification to url with cert (none when nil) and token
// (none when empty). It returns the status, or the error of a handshake
// the receiver refused.
func tlsPost(t *testing.T, f tlsFiles, url string, cert *tls.Certificate, token string, msg any) (int, error) {
	t.Helper()
	tc := &tls.Config{RootCAs: f.roots, MinVersion: tls.VersionTLS12}
	if cert != nil {
		// Sent whatever CAs the server names, as Alertmanager's client does
		// (Go picks only a matching one from Certificates).
		tc.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return cert, nil }
	}
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tc}}
	defer c.CloseIdleConnections()
	body, err := json.Marshal(msg)
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// Alertmanager configured with http_config.tls_config (its client pair and
// the receiver's CA) delivers to a receiver that admits client
// certificates of that CA, and the rule runs.
func TestAlertmanagerWithAClientCertificateDelivers(t *testing.T) {
	f := newTLSFiles(t)
	url := serveTLSReceiver(t, f, "")
	bin, err := devenv.AlertmanagerBinary(harness.Root)
	require.NoError(t, err)
	am, err := devenv.StartAlertmanager(context.Background(), devenv.AlertmanagerOptions{Binary: bin, DieWithParent: true,
		Config: devenv.RouteToRemedyTLS(url, f.servingCA, f.clientCert, f.clientKey, "1s", "1s", "1h")})
	require.NoError(t, err)
	t.Cleanup(func() { _ = am.Stop() })

	ns := tenant(t, "web")
	rule := createRule(t, restartRule(ns, "mtls", "MTLS"))
	l := labels(ns, "MTLS", "deployment", "web")
	// The worker confirms every alert with the harness's Alertmanager, so
	// that one holds it too, silenced: only the mTLS one notifies.
	silenceFor(t, harness.Alertmanager(), l)
	a := amAlert{Labels: l, StartsAt: time.Now().Add(-time.Second), EndsAt: time.Now().Add(time.Hour)}
	postTo(t, harness.Alertmanager(), a)
	postTo(t, am, a)
	fp := alertmanager.Fingerprint(l)
	ruleStatus(t, rule, 60*time.Second, func(r *v1alpha1.RemediationRule) bool {
		rec := record(r, fp)
		return rec != nil && rec.Phase == v1alpha1.AlertDone
	})
	assert.Len(t, requestsOf(t, ns, rule.Name), 1)
}

// A receiver with a client CA verifies any certificate it is given during
// the handshake: one from another CA is refused there (TLS alert "unknown
// certificate authority", no HTTP answer); a request without one reaches the
// receiver, which answers 401 unless the request carries the token. With
// both a client CA and a token file, either credential admits.
func TestClientCertificatesAndTokens(t *testing.T) {
	f := newTLSFiles(t)
	tokenFile := filepath.Join(f.dir, "token")
	require.NoError(t, os.WriteFile(tokenFile, []byte("the-token"), 0o600))
	certOnly := serveTLSReceiver(t, f, "")
	both := serveTLSReceiver(t, f, tokenFile)
	msg := message("firing", time.Now(), labels("nowhere", "MTLSAbuse"))
	for _, tc := range []struct {
		name      string
		url       string
		cert      *tls.Certificate
		token     string
		want      int
		handshake bool
	}{
		{"cert only: trusted certificate", certOnly, &f.client, "", http.StatusOK, false},
		{"cert only: no certificate", certOnly, nil, "", http.StatusUnauthorized, false},
		{"cert only: a token the receiver has no file for", certOnly, nil, "the-token", http.StatusUnauthorized, false},
		{"cert only: certificate of another CA", certOnly, &f.stranger, "", 0, true},
		{"both: trusted certificate", both, &f.client, "", http.StatusOK, false},
		{"both: token", both, nil, "the-token", http.StatusOK, false},
		{"both: certificate and token", both, &f.client, "the-token", http.StatusOK, false},
		{"both: wrong token, no certificate", both, nil, "not-the-token", http.StatusUnauthorized, false},
		{"both: neither", both, nil, "", http.StatusUnauthorized, false},
		{"both: certificate of another CA, with the token", both, &f.stranger, "the-token", 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tlsPost(t, f, tc.url, tc.cert, tc.token, msg)
			if tc.handshake {
				require.Error(t, err, "the handshake is refused")
				t.Logf("refused: %v", err)
				assert.Contains(t, err.Error(), "tls: unknown certificate authority")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

// silenceFor silences alerts with these labels in am for an hour, through
// its silences API.
func silenceFor(t testing.TB, am *devenv.Alertmanager, labels map[string]string) {
	t.Helper()
	s := struct {
		Matchers  []alertmanager.SilenceMatcher `json:"matchers"`
		StartsAt  time.Time                     `json:"startsAt"`
		EndsAt    time.Time                     `json:"endsAt"`
		CreatedBy string                        `json:"createdBy"`
		Comment   string                        `json:"comment"`
	}{StartsAt: time.Now(), EndsAt: time.Now().Add(time.Hour), CreatedBy: "test", Comment: "delivered by another Alertmanager"}
	for k, v := range labels {
		s.Matchers = append(s.Matchers, alertmanager.SilenceMatcher{Name: k, Value: v, IsEqual: true})
	}
	postJSON(t, am.Client(), am.URL+"/api/v2/silences", s)
}
