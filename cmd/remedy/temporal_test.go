package main

import (
	"crypto/tls"
	"crypto/x509"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestClientOptionsRefusesBadCombinations(t *testing.T) {
	dir, ca, caFile, certFile, keyFile := clientFiles(t)
	notPEM := writeFile(t, dir, "junk", []byte("not a certificate\n"))
	emptyKey := writeFile(t, dir, "empty-key", []byte("\n"))
	missing := filepath.Join(dir, "missing")

	for _, tc := range []struct {
		name  string
		flags temporalFlags
		want  string
	}{
		{"cert without key", temporalFlags{tlsCert: certFile}, "--temporal-tls-cert and --temporal-tls-key go together"},
		{"key without cert", temporalFlags{tlsKey: keyFile}, "--temporal-tls-cert and --temporal-tls-key go together"},
		{"unreadable CA file", temporalFlags{tlsCA: missing}, "read --temporal-tls-ca"},
		{"CA file without certificates", temporalFlags{tlsCA: notPEM}, "--temporal-tls-ca " + notPEM + " holds no PEM certificate"},
		{"key of another certificate", temporalFlags{tlsCert: certFile, tlsKey: writeFile(t, dir, "other.key", otherKey(t, ca))}, "load --temporal-tls-cert"},
		{"certificate file not PEM", temporalFlags{tlsCert: notPEM, tlsKey: keyFile}, "load --temporal-tls-cert"},
		{"missing certificate file", temporalFlags{tlsCert: missing, tlsKey: keyFile}, "load --temporal-tls-cert"},
		{"API key and API key file", temporalFlags{apiKey: "k", apiKeyFile: writeFile(t, dir, "key", []byte("k"))}, "exclude each other"},
		{"missing API key file", temporalFlags{apiKeyFile: missing}, "read --temporal-api-key-file"},
		{"empty API key file", temporalFlags{apiKeyFile: emptyKey}, "--temporal-api-key-file " + emptyKey + " is empty"},
		{"CA fine, key missing", temporalFlags{tlsCA: caFile, tlsCert: certFile}, "set both or neither"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.flags.clientOptions()
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// clientFiles writes a CA and a client certificate it issued into a new directory.
func clientFiles(t *testing.T) (dir string, ca *testCA, caFile, certFile, keyFile string) {
	dir = t.TempDir()
	ca = newTestCA(t, "temporal-ca")
	certPEM, keyPEM := ca.issue(t, "remedy", false)
	return dir, ca, writeFile(t, dir, "ca.crt", ca.pem), writeFile(t, dir, "tls.crt", certPEM), writeFile(t, dir, "tls.key", keyPEM)
}

// otherKey is a valid key that does not belong to the certificate ca issued first.
func otherKey(t *testing.T, ca *testCA) []byte {
	_, key := ca.issue(t, "someone-else", false)
	return key
}

func TestClientOptionsEnablesTLS(t *testing.T) {
	dir, _, caFile, certFile, keyFile := clientFiles(t)
	keyFileAPI := writeFile(t, dir, "api-key", []byte("from-file\n"))

	for _, tc := range []struct {
		name       string
		flags      temporalFlags
		tls        bool
		clientCert bool
		rootCAs    bool
		credential bool
		serverName string
	}{
		{name: "plain by default", flags: temporalFlags{}},
		{name: "CA only", flags: temporalFlags{tlsCA: caFile}, tls: true, rootCAs: true},
		{name: "mTLS with system roots", flags: temporalFlags{tlsCert: certFile, tlsKey: keyFile}, tls: true, clientCert: true},
		{name: "mTLS with a CA", flags: temporalFlags{tlsCA: caFile, tlsCert: certFile, tlsKey: keyFile}, tls: true, clientCert: true, rootCAs: true},
		{name: "server name alone", flags: temporalFlags{serverName: "temporal.internal"}, tls: true, serverName: "temporal.internal"},
		{name: "API key needs TLS", flags: temporalFlags{apiKey: "secret"}, tls: true, credential: true},
		{name: "API key file needs TLS", flags: temporalFlags{apiKeyFile: keyFileAPI}, tls: true, credential: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.flags.address, tc.flags.namespace = "temporal:7233", "remedy"
			opts, err := tc.flags.clientOptions()
			require.NoError(t, err)
			assert.Equal(t, "temporal:7233", opts.HostPort)
			assert.Equal(t, "remedy", opts.Namespace)
			assert.Equal(t, tc.credential, opts.Credentials != nil, "credentials")
			cfg := opts.ConnectionOptions.TLS
			if !tc.tls {
				assert.Nil(t, cfg)
				return
			}
			require.NotNil(t, cfg)
			assert.Equal(t, tc.serverName, cfg.ServerName)
			assert.Equal(t, tc.rootCAs, cfg.RootCAs != nil, "RootCAs")
			assert.Equal(t, tc.clientCert, cfg.GetClientCertificate != nil, "GetClientCertificate")
			assert.GreaterOrEqual(t, cfg.MinVersion, uint16(tls.VersionTLS12))
		})
	}
}

// A rotated client certificate is presented on the next handshake without a restart.
func TestClientCertificateRotates(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, "temporal-ca")
	certPEM, keyPEM := ca.issue(t, "before", false)
	certFile := writeFile(t, dir, "tls.crt", certPEM)
	keyFile := writeFile(t, dir, "tls.key", keyPEM)
	opts, err := temporalFlags{tlsCert: certFile, tlsKey: keyFile}.clientOptions()
	require.NoError(t, err)
	get := opts.ConnectionOptions.TLS.GetClientCertificate
	require.Equal(t, "before", presentedCN(t, get))

	// Halfway through a rotation the new certificate does not match the old
	// key: the last good pair is kept.
	certPEM, keyPEM = ca.issue(t, "after", false)
	rotate(t, certFile, certPEM)
	assert.Equal(t, "before", presentedCN(t, get))
	rotate(t, keyFile, keyPEM)
	assert.Equal(t, "after", presentedCN(t, get))
}

func presentedCN(t *testing.T, get func(*tls.CertificateRequestInfo) (*tls.Certificate, error)) string {
	t.Helper()
	c, err := get(&tls.CertificateRequestInfo{})
	require.NoError(t, err)
	leaf, err := x509.ParseCertificate(c.Certificate[0])
	require.NoError(t, err)
	return leaf.Subject.CommonName
}

// rotate replaces file the way a kubelet Secret volume does (a new file
// renamed over the old) and moves its modification time forward, so the
// change is seen on file systems with coarse timestamps.
func rotate(t *testing.T, file string, data []byte) {
	t.Helper()
	tmp := file + ".new"
	require.NoError(t, os.WriteFile(tmp, data, 0o600))
	st, err := os.Stat(file)
	require.NoError(t, err)
	later := st.ModTime().Add(time.Second)
	require.NoError(t, os.Chtimes(tmp, later, later))
	require.NoError(t, os.Rename(tmp, file))
}

// A rotated API key file is sent from the next call on.
func TestAPIKeyFileRotates(t *testing.T) {
	file := writeFile(t, t.TempDir(), "api-key", []byte("first\n"))
	r := newReloading(func() (string, error) { return readAPIKey(file) }, file)
	got, err := r.get()
	require.NoError(t, err)
	assert.Equal(t, "first", got)
	rotate(t, file, []byte("second"))
	got, err = r.get()
	require.NoError(t, err)
	assert.Equal(t, "second", got)
}

// Every setting has its env var, and -h never prints the API key.
func TestTemporalFlagsFromEnv(t *testing.T) {
	for k, v := range map[string]string{
		"TEMPORAL_ADDRESS": "temporal:7233", "TEMPORAL_NAMESPACE": "remedy",
		"TEMPORAL_TLS_CA": "/ca.crt", "TEMPORAL_TLS_CERT": "/tls.crt", "TEMPORAL_TLS_KEY": "/tls.key",
		"TEMPORAL_SERVER_NAME": "temporal.internal", "TEMPORAL_API_KEY": "very-secret", "TEMPORAL_API_KEY_FILE": "/api-key",
		"REMEDY_PAYLOAD_KEYS": "/keys", "REMEDY_PAYLOAD_UNSEALED_BEFORE": "2026-11-28T19:00:00Z",
	} {
		t.Setenv(k, v)
	}
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	var help strings.Builder
	fs.SetOutput(&help)
	var tf temporalFlags
	tf.register(fs)
	require.NoError(t, fs.Parse(nil))
	assert.Equal(t, temporalFlags{
		address: "temporal:7233", namespace: "remedy", tlsCA: "/ca.crt", tlsCert: "/tls.crt", tlsKey: "/tls.key",
		serverName: "temporal.internal", apiKey: "very-secret", apiKeyFile: "/api-key",
		payloadKeys: "/keys", unsealedBefore: "2026-11-28T19:00:00Z",
	}, tf)
	fs.PrintDefaults()
	assert.Contains(t, help.String(), "-temporal-api-key")
	assert.NotContains(t, help.String(), "very-secret")

	require.NoError(t, fs.Parse([]string{"--temporal-api-key=from-argv"}))
	assert.Equal(t, "from-argv", tf.apiKey)
}
