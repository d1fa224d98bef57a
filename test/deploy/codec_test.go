package deploy

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/remedy-dev/remedy/test/procs"
)

// codecServed: each operator replica, run from deploy/manager as written,
// serves the codec server over TLS with the certificate cert-manager issues
// for Certificate remedy-codec (verified by its CA, under the Service's DNS
// name), and with only the RBAC deploy/ grants the operator it reviews a
// person's token and access: no token is refused, a token without the
// decode grant is forbidden, one with it decodes.
func codecServed(t *testing.T, kubectl procs.Kubectl, cas map[string][]byte, operators []*procs.Pod) {
	ca, ok := cas["remedy-system/remedy-codec"]
	require.True(t, ok, "deploy/manager has Certificate remedy-codec")
	roots := x509.NewCertPool()
	require.True(t, roots.AppendCertsFromPEM(ca))
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: "remedy-codec.remedy-system.svc", MinVersion: tls.VersionTLS12},
	}}

	ns := "codec-parity"
	kubectl.Run(t, "create", "namespace", ns)
	for _, sa := range []string{"reader", "stranger"} {
		kubectl.Run(t, "create", "serviceaccount", sa, "-n", ns)
	}
	// deploy/rbac/payload-reader-example.yaml's grant, to the reader.
	kubectl.Apply(t, `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: codec-parity-decode}
rules: [{apiGroups: [remedy.dev], resources: [payloads], verbs: [decode]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: codec-parity-decode}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: codec-parity-decode}
subjects: [{kind: ServiceAccount, name: reader, namespace: `+ns+`}]
`)
	token := func(sa string) string {
		return strings.TrimSpace(kubectl.Run(t, "create", "token", sa, "-n", ns))
	}
	reader, stranger := token("reader"), token("stranger")

	for _, op := range operators {
		url := fmt.Sprintf("https://127.0.0.1:%d/decode", op.Ports["codec"])
		decode := func(tok string) (int, string) {
			req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"payloads":[]}`))
			require.NoError(t, err)
			req.Header.Set("Content-Type", "application/json")
			if tok != "" {
				req.Header.Set("Authorization", "Bearer "+tok)
			}
			resp, err := client.Do(req)
			if err != nil {
				return 0, err.Error()
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(body)
		}
		var code int
		var body string
		require.Eventually(t, func() bool {
			code, body = decode("")
			return code != 0
		}, 60*time.Second, 200*time.Millisecond, "%s never served the codec server over verified TLS: %s\n%s", op.Name, body, op.Out)
		assert.Equal(t, http.StatusUnauthorized, code, "%s: no token: %s", op.Name, body)
		code, body = decode(stranger)
		assert.Equal(t, http.StatusForbidden, code, "%s: a token without decode: %s", op.Name, body)
		code, body = decode(reader)
		assert.Equal(t, http.StatusOK, code, "%s: a token with decode: %s", op.Name, body)
	}
}
