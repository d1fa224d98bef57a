package compose

import (
	"bytes"
	"context"
	"crypto/tls"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"

	"github.com/remedy-dev/remedy/internal/pki"
	"github.com/remedy-dev/remedy/internal/seal"
)

// The codec server serves the certificate its files hold at each handshake:
// a certificate cert-manager renews into the mounted Secret is served
// without a restart, and a missing one refuses to start.
func TestServeCodecReloadsItsCertificate(t *testing.T) {
	keys, err := seal.NewKeyring("k1", map[string][]byte{"k1": bytes.Repeat([]byte{1}, 32)})
	require.NoError(t, err)
	dir := t.TempDir()
	crt, key := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	write := func(cn string) {
		pair, err := pki.SelfSigned(cn, []string{"remedy-codec.remedy-system.svc"})
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(crt, pair.CertPEM, 0o600))
		require.NoError(t, os.WriteFile(key, pair.KeyPEM, 0o600))
	}
	served := func(url string) string {
		conn, err := tls.Dial("tcp", strings.TrimPrefix(url, "https://"), &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // reads the served certificate only
		require.NoError(t, err)
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].Subject.CommonName
	}
	cfg := &rest.Config{Host: "https://127.0.0.1:1"} // no request reaches it: only handshakes here
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	_, err = ServeCodec(ctx, cfg, keys, CodecOptions{Addr: "127.0.0.1:0", CertFile: crt, KeyFile: key})
	require.ErrorContains(t, err, "load the codec server's certificate", "no certificate: no server")

	write("first")
	url, err := ServeCodec(ctx, cfg, keys, CodecOptions{Addr: "127.0.0.1:0", CertFile: crt, KeyFile: key})
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(url, "https://"), url)
	assert.Equal(t, "first", served(url))
	write("renewed")
	assert.Eventually(t, func() bool { return served(url) == "renewed" }, 5*time.Second, 50*time.Millisecond, "the renewed certificate is served")
}
