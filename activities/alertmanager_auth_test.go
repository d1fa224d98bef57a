package activities

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

	"github.com/remedy-dev/remedy/internal/alertrule"
)

// The worker reads Alertmanager with the basic_auth of amtool's
// --http.config.file, read again for each request; a file it cannot use,
// or no file at all, refuses to start.
func TestAlertmanagerClientAuthenticates(t *testing.T) {
	var got [][2]string
	am := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, ok := r.BasicAuth()
		if !ok {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		got = append(got, [2]string{u, p})
		_, _ = w.Write([]byte(`[]`))
	}))
	defer am.Close()
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
		return p
	}
	pw := write("password", "s3cret\n")
	for _, tc := range []struct {
		name, config string
		want         [2]string
		err          string
	}{
		{"inline password", "basic_auth:\n  username: remedy\n  password: hunter2\n", [2]string{"remedy", "hunter2"}, ""},
		{"password_file", "basic_auth:\n  username: remedy\n  password_file: " + pw + "\n", [2]string{"remedy", "s3cret"}, ""},
		{"no basic_auth", "tls_config: {}\n", [2]string{}, "only basic_auth is read"},
		{"no username", "basic_auth:\n  password: x\n", [2]string{}, "username is required"},
		{"no password", "basic_auth:\n  username: remedy\n", [2]string{}, "has no password"},
		{"both passwords", "basic_auth:\n  username: remedy\n  password: x\n  password_file: " + pw + "\n", [2]string{}, "not both"},
		{"missing password_file", "basic_auth:\n  username: remedy\n  password_file: " + filepath.Join(dir, "nope") + "\n", [2]string{}, "password file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got = nil
			a, err := NewAlertmanager(am.URL, write("http.yml", tc.config))
			if tc.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.err)
				return
			}
			require.NoError(t, err)
			_, err = a.Active(context.Background(), "demo")
			require.NoError(t, err)
			assert.Equal(t, [][2]string{tc.want}, got)
		})
	}

	t.Run("rotated", func(t *testing.T) {
		got = nil
		f := write("rotated.yml", "basic_auth:\n  username: remedy\n  password: old\n")
		a, err := NewAlertmanager(am.URL, f)
		require.NoError(t, err)
		_, err = a.Active(context.Background(), "")
		require.NoError(t, err)
		write("rotated.yml", "basic_auth:\n  username: remedy\n  password: new\n")
		_, err = a.Active(context.Background(), "")
		require.NoError(t, err)
		assert.Equal(t, [][2]string{{"remedy", "old"}, {"remedy", "new"}}, got, "read again for each request")
	})

	_, err := NewAlertmanager(am.URL, "")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "--alertmanager-http-config-file")
}

// An Alertmanager that answers without credentials confirms no alert:
// credentials sent to it are ignored, and anyone may have posted the alert.
func TestAlertOfAnOpenAlertmanagerIsNotConfirmed(t *testing.T) {
	labels := map[string]string{"alertname": "Latency", "namespace": "demo"}
	alert := []map[string]any{{"fingerprint": Fingerprint(labels), "labels": labels, "status": map[string]string{"state": "active"}}}
	serve := func(authenticated bool) *httptest.Server {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if _, _, ok := r.BasicAuth(); authenticated && !ok {
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
			if r.URL.Path == "/api/v2/status" {
				_, _ = w.Write([]byte(`{}`))
				return
			}
			_ = json.NewEncoder(w).Encode(alert)
		}))
		t.Cleanup(s.Close)
		return s
	}
	cfg := filepath.Join(t.TempDir(), "http.yml")
	require.NoError(t, os.WriteFile(cfg, []byte("basic_auth: {username: remedy, password: x}\n"), 0o600))
	subject := AlertSubject{Namespace: "demo", Rule: "latency", Alert: alertrule.Alert{Labels: labels, Fingerprint: Fingerprint(labels)}}
	for _, tc := range []struct {
		name          string
		authenticated bool
		err           string
	}{
		{"authenticated", true, ""},
		{"open", false, "answers without credentials"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			am, err := NewAlertmanager(serve(tc.authenticated).URL, cfg)
			require.NoError(t, err)
			err = (&Alerts{Alertmanager: am}).firing(context.Background(), subject)
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
