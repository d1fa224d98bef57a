package harness

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"go.temporal.io/sdk/client"

	"github.com/remedy-dev/remedy/alerts"
	"github.com/remedy-dev/remedy/internal/compose"
	"github.com/remedy-dev/remedy/internal/devenv"
)

// AlertsOptions run a real Alertmanager wired to Remedy's receiver
// (served as the worker's identity) through a webhook_config with bearer
// authentication, group_by and send_resolved. Alertmanager's own API
// requires basic auth (web.config.file), as docs/alerts.md installs it: the
// worker and the tests read and post with Alertmanager().Client().
type AlertsOptions struct {
	// GroupWait, GroupInterval and RepeatInterval of the route (defaults 1s, 1s, 1h).
	GroupWait, GroupInterval, RepeatInterval string
	// MaxBodyBytes of the receiver (0: its default).
	MaxBodyBytes int64
}

var (
	alertmanager *devenv.Alertmanager
	alertsURL    string
	alertsToken  string
	alertsTC     = &swappableTemporal{}
)

// Alertmanager is the running Alertmanager (Options.Alerts).
func Alertmanager() *devenv.Alertmanager { return alertmanager }

// AlertsURL is the receiver's URL, and AlertsToken the bearer token Alertmanager sends it.
func AlertsURL() string   { return alertsURL }
func AlertsToken() string { return alertsToken }

// SetAlertsTemporal makes the receiver hand alerts to tc (nil: the dev
// server's client again), as if Temporal were unreachable.
func SetAlertsTemporal(tc alerts.Temporal) { alertsTC.set(tc) }

// startAlerts serves the receiver, then starts Alertmanager routed to it.
// It returns Alertmanager's URL and the client configuration holding its credentials.
func startAlerts(ctx context.Context, o AlertsOptions, logs io.Writer) (string, string, error) {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	alertsToken = hex.EncodeToString(b)
	tokenFile := filepath.Join(env.TempDir(), "alerts-token")
	if err := os.WriteFile(tokenFile, []byte(alertsToken), 0o600); err != nil {
		return "", "", fmt.Errorf("write alerts token: %w", err)
	}
	wCfg, err := devenv.ServiceAccountConfig(ctx, env.Config, devenv.Namespace, "remedy-worker")
	if err != nil {
		return "", "", err
	}
	alertsTC.def = env.Temporal
	amAddr, err := devenv.FreeLoopbackAddress()
	if err != nil {
		return "", "", err
	}
	amAuth := filepath.Join(env.TempDir(), "alertmanager-http.yml")
	password, err := devenv.NewAlertmanagerPassword(amAuth)
	if err != nil {
		return "", "", err
	}
	if alertsURL, err = compose.ServeAlerts(ctx, wCfg, alertsTC, env.Temporal, compose.AlertsOptions{Addr: "127.0.0.1:0", TokenFile: tokenFile,
		MaxBodyBytes: o.MaxBodyBytes, AlertmanagerURL: "http://" + amAddr, AlertmanagerHTTPConfigFile: amAuth, SweepEvery: sweepEvery, SweepGrace: SweepGrace}); err != nil {
		return "", "", err
	}
	bin, err := devenv.AlertmanagerBinary(Root)
	if err != nil {
		return "", "", err
	}
	or := func(v, d string) string {
		if v == "" {
			return d
		}
		return v
	}
	cfg := devenv.RouteToRemedy(alertsURL, tokenFile, or(o.GroupWait, "1s"), or(o.GroupInterval, "1s"), or(o.RepeatInterval, "1h"))
	alertmanager, err = devenv.StartAlertmanager(ctx, devenv.AlertmanagerOptions{Binary: bin, Config: cfg, ListenAddress: amAddr, Log: logs, DieWithParent: true,
		Password: password})
	if err != nil {
		return "", "", err
	}
	return alertmanager.URL, amAuth, nil
}

// sweepEvery is how often the tests' receiver sweeps Alertmanager for lost
// resolves; SweepGrace how long after Alertmanager starts it resolves nothing.
const (
	sweepEvery = 2 * time.Second
	SweepGrace = 6 * time.Second
)

// swappableTemporal is the receiver's Temporal client, replaceable by a test.
type swappableTemporal struct {
	mu  sync.Mutex
	def alerts.Temporal
	cur alerts.Temporal
}

func (s *swappableTemporal) set(tc alerts.Temporal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cur = tc
}

func (s *swappableTemporal) get() alerts.Temporal {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur != nil {
		return s.cur
	}
	return s.def
}

func (s *swappableTemporal) SignalWithStartWorkflow(ctx context.Context, id, signal string, arg any, o client.StartWorkflowOptions, wf any, args ...any) (client.WorkflowRun, error) {
	return s.get().SignalWithStartWorkflow(ctx, id, signal, arg, o, wf, args...)
}

func (s *swappableTemporal) SignalWorkflow(ctx context.Context, id, runID, signal string, arg any) error {
	return s.get().SignalWorkflow(ctx, id, runID, signal, arg)
}

// FireAlert posts a firing alert with labels to am's own API, with its
// credentials; ResolveAlert posts it again with an endsAt in the past.
func FireAlert(t testing.TB, am *devenv.Alertmanager, labels map[string]string) {
	t.Helper()
	postAlert(t, am, labels, time.Now().Add(-time.Second), time.Now().Add(time.Hour))
}

func ResolveAlert(t testing.TB, am *devenv.Alertmanager, labels map[string]string) {
	t.Helper()
	postAlert(t, am, labels, time.Now().Add(-time.Minute), time.Now().Add(-time.Second))
}

func postAlert(t testing.TB, am *devenv.Alertmanager, labels map[string]string, startsAt, endsAt time.Time) {
	t.Helper()
	body, err := json.Marshal([]map[string]any{{"labels": labels, "startsAt": startsAt, "endsAt": endsAt}})
	require.NoError(t, err)
	resp, err := am.Client().Post(am.URL+"/api/v2/alerts", "application/json", bytes.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
}
