package alerts

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/remedy-dev/remedy/activities/gate"
	"github.com/remedy-dev/remedy/internal/alertmanager"
	"github.com/remedy-dev/remedy/internal/alertrule"
)

// An Alertmanager that answers without credentials confirms no alert:
// credentials sent to it are ignored, and anyone may have posted the alert.
func TestAlertOfAnOpenAlertmanagerIsNotConfirmed(t *testing.T) {
	labels := map[string]string{"alertname": "Latency", "namespace": "demo"}
	alert := []map[string]any{{"fingerprint": alertmanager.Fingerprint(labels), "labels": labels, "status": map[string]string{"state": "active"}}}
	subject := gate.AlertSubject{Namespace: "demo", Rule: "latency", Alert: alertrule.Alert{Labels: labels, Fingerprint: alertmanager.Fingerprint(labels)}}
	for _, tc := range []struct {
		name          string
		authenticated bool
		err           string
	}{
		{"authenticated", true, ""},
		{"open", false, "answers without credentials"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			am := testAlertmanager(t, tc.authenticated, func(w http.ResponseWriter) { _ = json.NewEncoder(w).Encode(alert) })
			_, err := (&Alerts{Alertmanager: am}).firing(context.Background(), subject)
			if tc.err == "" {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.err)
			var ae *temporal.ApplicationError
			require.ErrorAs(t, err, &ae)
			assert.True(t, ae.NonRetryable())
		})
	}
}

// testAlertmanager is a client, with basic-auth credentials, of an
// Alertmanager that requires them (authenticated) or answers anyone, and
// lists alerts with list.
func testAlertmanager(t *testing.T, authenticated bool, list func(http.ResponseWriter)) *alertmanager.Client {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, _, ok := r.BasicAuth(); authenticated && !ok {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		if r.URL.Path == "/api/v2/status" {
			_, _ = w.Write([]byte(`{}`))
			return
		}
		list(w)
	}))
	t.Cleanup(s.Close)
	cfg := filepath.Join(t.TempDir(), "http.yml")
	require.NoError(t, os.WriteFile(cfg, []byte("basic_auth: {username: remedy, password: x}\n"), 0o600))
	am, err := alertmanager.New(s.URL, cfg)
	require.NoError(t, err)
	return am
}
