package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/rest"

	"github.com/remedy-dev/remedy/internal/compose"
	"github.com/remedy-dev/remedy/internal/devenv"
)

// alertsTokenFile, in .dev, holds the receiver's bearer token while dev runs.
const alertsTokenFile = "alerts-token"

// alertmanagerHTTPConfig, in .dev, holds the credentials Alertmanager's web
// authentication admits (amtool's --http.config.file format).
const alertmanagerHTTPConfig = "alertmanager-http.yml"

// startDevAlerts serves the worker's Alertmanager receiver on alertsAddr
// with a fresh bearer token (in devDir), and starts the pinned Alertmanager
// on amAddr routed to it: group_by alertname and namespace, send_resolved,
// the token as http_config.authorization's credentials_file. Alertmanager's
// own API and UI require basic auth (a fresh password, in devDir).
func startDevAlerts(ctx context.Context, env *devenv.Env, root, devDir, amAddr, alertsAddr string, log io.Writer) (*devenv.Alertmanager, string, error) {
	bin, err := devenv.AlertmanagerBinary(root)
	if err != nil {
		return nil, "", err
	}
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	tokenFile := filepath.Join(devDir, alertsTokenFile)
	if err := os.WriteFile(tokenFile, []byte(hex.EncodeToString(b)), 0o600); err != nil {
		return nil, "", fmt.Errorf("write alerts token: %w", err)
	}
	wCfg, err := devenv.ServiceAccountConfig(ctx, env.Config, devenv.Namespace, "remedy-worker")
	if err != nil {
		return nil, "", err
	}
	// Alertmanager admits only the worker and amtool, with this password.
	amAuth := filepath.Join(devDir, alertmanagerHTTPConfig)
	password, err := devenv.NewAlertmanagerPassword(amAuth)
	if err != nil {
		return nil, "", err
	}
	receiver, err := compose.ServeAlerts(ctx, wCfg, env.Temporal, env.Temporal, compose.AlertsOptions{Addr: alertsAddr, TokenFile: tokenFile,
		AlertmanagerURL: "http://" + amAddr, AlertmanagerHTTPConfigFile: amAuth})
	if err != nil {
		return nil, "", err
	}
	cfg := devenv.RouteToRemedy(receiver, tokenFile, "5s", "10s", "1h")
	am, err := devenv.StartAlertmanager(ctx, devenv.AlertmanagerOptions{Binary: bin, Config: cfg, ListenAddress: amAddr, Log: log, DieWithParent: true,
		Password: password})
	if err != nil {
		return nil, "", err
	}
	return am, receiver, nil
}

// installWhenAdmitted applies path as cfg's user would with kubectl,
// retrying while the operator's admission webhook is not serving yet (up to 30s).
func installWhenAdmitted(ctx context.Context, cfg *rest.Config, path string) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := devenv.InstallAsKubectl(ctx, cfg, path)
		if err == nil || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}
