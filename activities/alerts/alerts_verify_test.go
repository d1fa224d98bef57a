package alerts

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/remedy-dev/remedy/internal/alertmanager"
)

// Only an authenticated Alertmanager's list proves an alert resolved: an
// open one, or none, leaves every alert firing; one that cannot be read is
// an error the activity retries, never a guess.
func TestFiringOfNeverGuessesResolved(t *testing.T) {
	firing := map[string]string{"alertname": "Crash", "namespace": "demo"}
	gone := map[string]string{"alertname": "NotReady", "namespace": "demo"}
	fpFiring, fpGone := alertmanager.Fingerprint(firing), alertmanager.Fingerprint(gone)
	list := func(broken bool) func(http.ResponseWriter) {
		return func(w http.ResponseWriter) {
			if broken {
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
			_ = json.NewEncoder(w).Encode([]map[string]any{{"fingerprint": fpFiring, "labels": firing}})
		}
	}
	all := []string{fpFiring, fpGone}
	for _, tc := range []struct {
		name               string
		none, auth, broken bool
		want               []string
		wantErr            bool
	}{
		{"authenticated: what it lists", false, true, false, []string{fpFiring}, false},
		{"open: proves nothing", false, false, false, all, false},
		{"unreadable: an error", false, true, true, nil, true},
		{"none configured: proves nothing", true, false, false, all, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := &Alerts{}
			if !tc.none {
				a.Alertmanager = testAlertmanager(t, tc.auth, list(tc.broken))
			}
			got, err := a.firingOf(context.Background(), "demo", all)
			if tc.wantErr {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestJoinedFingerprint(t *testing.T) {
	assert.Equal(t, "abc", JoinedFingerprint("shop", "crash", "alert/shop/crash/abc"))
	for _, id := range []string{"alert/shop/other/abc", "alert/other/crash/abc", "alert/shop/crash/", "alert/shop/crash/a/b", "rr/shop/crash/abc"} {
		assert.Empty(t, JoinedFingerprint("shop", "crash", id), id)
	}
}

// A freshly started Alertmanager has not been sent its alerts again yet: its
// list proves nothing until RestartGrace has passed, and the check is an
// error the activity retries.
func TestFiringOfWaitsOutAnAlertmanagerRestart(t *testing.T) {
	firing := map[string]string{"alertname": "Crash", "namespace": "demo"}
	for _, tc := range []struct {
		name    string
		up      time.Duration
		wantErr bool
	}{
		{"just restarted: an error", 10 * time.Second, true},
		{"up past the grace: its list", 3 * time.Minute, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if _, _, ok := r.BasicAuth(); !ok {
					w.WriteHeader(http.StatusUnauthorized)
					return
				}
				if r.URL.Path == "/api/v2/status" {
					_ = json.NewEncoder(w).Encode(map[string]any{"uptime": time.Now().Add(-tc.up)})
					return
				}
				_ = json.NewEncoder(w).Encode([]map[string]any{})
			}))
			t.Cleanup(s.Close)
			cfg := filepath.Join(t.TempDir(), "http.yml")
			require.NoError(t, os.WriteFile(cfg, []byte("basic_auth: {username: remedy, password: x}\n"), 0o600))
			am, err := alertmanager.New(s.URL, cfg)
			require.NoError(t, err)
			got, err := (&Alerts{Alertmanager: am}).firingOf(context.Background(), "demo", []string{alertmanager.Fingerprint(firing)})
			if tc.wantErr {
				require.ErrorContains(t, err, "would read as resolved")
				return
			}
			require.NoError(t, err)
			assert.Empty(t, got, "absent after the grace: resolved")
		})
	}
}
