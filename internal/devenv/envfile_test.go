package devenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestShellEnvSourced: sourcing the rendered file in sh exports every
// variable, quotes survive, and BinDir comes first on PATH.
func TestShellEnvSourced(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "it's here")
	e := ShellEnv{Kubeconfig: filepath.Join(dir, "kubeconfig"), TemporalAddress: "127.0.0.1:17233",
		WebUI: "http://127.0.0.1:18233", BinDir: filepath.Join(dir, "bin"),
		AlertmanagerURL: "http://127.0.0.1:19093", AlertmanagerHTTPConfig: filepath.Join(dir, "alertmanager-http.yml"),
		PrometheusURL: "http://127.0.0.1:19090", CodecEndpoint: "http://127.0.0.1:18091"}
	path := filepath.Join(t.TempDir(), "env")
	require.NoError(t, os.WriteFile(path, e.Render(), 0o644))
	cmd := exec.Command("sh", "-c", `. "$1" && sh -c 'printf "%s\n" "$KUBECONFIG" "$TEMPORAL_ADDRESS" "$REMEDY_WEB_UI" "$ALERTMANAGER_URL" "$ALERTMANAGER_HTTP_CONFIG" "$PROMETHEUS_URL" "$TEMPORAL_CODEC_ENDPOINT" "$PATH"'`, "sh", path)
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, string(out))
	assert.Equal(t, []string{e.Kubeconfig, e.TemporalAddress, e.WebUI, e.AlertmanagerURL, e.AlertmanagerHTTPConfig, e.PrometheusURL, e.CodecEndpoint, e.BinDir + ":/usr/bin:/bin"},
		strings.Split(strings.TrimSuffix(string(out), "\n"), "\n"))
}
