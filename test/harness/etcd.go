package harness

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// EtcdPut writes value under key straight into etcd, past the API server's
// admission and schema validation: the real way to hold an object that was
// stored before a validation existed. The API server's watch cache sees it
// as it sees any write. It uses etcd's JSON gateway, so no etcd client.
// Keys are the API server's: /registry/<group>/<resource>/<namespace>/<name>.
func EtcdPut(t testing.TB, key string, value []byte) {
	t.Helper()
	body, err := json.Marshal(map[string]string{
		"key":   base64.StdEncoding.EncodeToString([]byte(key)),
		"value": base64.StdEncoding.EncodeToString(value),
	})
	require.NoError(t, err)
	resp, err := http.Post(env.Kube.ControlPlane.Etcd.URL.String()+"/v3/kv/put", "application/json", bytes.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	require.Equal(t, http.StatusOK, resp.StatusCode, "etcd put %s: %s", key, out)
}
