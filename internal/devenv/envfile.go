package devenv

import (
	"fmt"
	"strings"
)

// ShellEnv is what `source .dev/env` sets: everything the docs' commands
// use, with the pinned kubectl and temporal (BinDir) first on PATH.
type ShellEnv struct {
	Kubeconfig      string
	TemporalAddress string
	// WebUI is the Temporal Web UI's base URL, for `kubectl remedy` links.
	WebUI string
	// BinDir holds kubectl, temporal and kubectl-remedy (and amtool).
	BinDir string
	// AlertmanagerURL, when set, is exported as ALERTMANAGER_URL (amtool's
	// --alertmanager.url), and AlertmanagerHTTPConfig as
	// ALERTMANAGER_HTTP_CONFIG (amtool's --http.config.file: its credentials).
	AlertmanagerURL        string
	AlertmanagerHTTPConfig string
	// PrometheusURL, when set, is exported as PROMETHEUS_URL (dev's Prometheus API).
	PrometheusURL string
	// CodecEndpoint, when set, is exported as TEMPORAL_CODEC_ENDPOINT (the
	// temporal CLI's --codec-endpoint): Remedy's codec server.
	CodecEndpoint string
}

// Render is the file's text: bash/sh export lines with quoted values.
func (e ShellEnv) Render() []byte {
	var b strings.Builder
	for _, kv := range [][2]string{
		{"KUBECONFIG", e.Kubeconfig},
		{"TEMPORAL_ADDRESS", e.TemporalAddress},
		{"REMEDY_WEB_UI", e.WebUI},
	} {
		fmt.Fprintf(&b, "export %s=%s\n", kv[0], shellQuote(kv[1]))
	}
	if e.AlertmanagerURL != "" {
		fmt.Fprintf(&b, "export ALERTMANAGER_URL=%s\n", shellQuote(e.AlertmanagerURL))
	}
	if e.AlertmanagerHTTPConfig != "" {
		fmt.Fprintf(&b, "export ALERTMANAGER_HTTP_CONFIG=%s\n", shellQuote(e.AlertmanagerHTTPConfig))
	}
	if e.PrometheusURL != "" {
		fmt.Fprintf(&b, "export PROMETHEUS_URL=%s\n", shellQuote(e.PrometheusURL))
	}
	if e.CodecEndpoint != "" {
		fmt.Fprintf(&b, "export TEMPORAL_CODEC_ENDPOINT=%s\n", shellQuote(e.CodecEndpoint))
	}
	fmt.Fprintf(&b, "export PATH=%s:\"$PATH\"\n", shellQuote(e.BinDir))
	return []byte(b.String())
}

// shellQuote single-quotes s for sh.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
