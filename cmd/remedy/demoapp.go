package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Demo modes: the demo app can be told, by its config, to fail the way real
// apps do, so the alert walkthrough starts from a real failure.
const (
	// demoServe serves and is ready (the default).
	demoServe = "serve"
	// demoCrash exits non-zero at start, as an app with a bad config does:
	// the kubelet restarts it until the Pod is in CrashLoopBackOff.
	demoCrash = "crash"
	// demoUnready serves but fails its readiness probe.
	demoUnready = "unready"
)

// demoModeKey is the mounted config's key of the mode: a name of its own,
// so a ConfigMap's ordinary keys (mode, say) never crash the app.
// demoModeEnv overrides it, so one `kubectl set env` rolls out a new pod
// template with another mode.
const (
	demoModeKey = "demo-mode"
	demoModeEnv = "DEMO_MODE"
)

// runDemoApp is the demo workloads' server: it reports its Pod and the
// config mounted when it started, so a rollout after a ConfigMap edit shows
// in what new Pods serve. /readyz is its readiness endpoint.
func runDemoApp(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("demo-app", flag.ContinueOnError)
	addr := fs.String("addr", ":8080", "address to serve on")
	configDir := fs.String("config-dir", "/etc/demo", "directory of the mounted config (a ConfigMap volume); may be absent. "+
		"Its key "+demoModeKey+" (or the env "+demoModeEnv+", which wins) is serve (default), crash (exit 1 at start) or unready (fail /readyz)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	config, err := readConfigDir(*configDir)
	if err != nil {
		return err
	}
	mode, err := demoMode(*configDir, os.Getenv(demoModeEnv))
	if err != nil {
		return err
	}
	if mode == demoCrash {
		return fmt.Errorf("demo-app: mode %q: exiting at start as configured (set %s=%s or the config's %s to %s to serve)",
			mode, demoModeEnv, demoServe, demoModeKey, demoServe)
	}
	host, _ := os.Hostname()
	mux := http.NewServeMux()
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if mode == demoUnready {
			http.Error(w, "not ready: mode "+demoUnready, http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, "demo-app on %s\n%s", host, config)
	})
	srv := &http.Server{Addr: *addr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.ListenAndServe() }()
	fmt.Printf("demo-app: serving on %s in mode %s; config:\n%s", *addr, mode, config)
	select {
	case err := <-done:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(shutdown); err != nil && !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("shut down: %w", err)
		}
		return nil
	}
}

// demoMode is the mode env sets, else the config dir's demoModeKey file, else
// serve. An unknown mode is a config error: the app refuses to start, as a
// real app refuses a config it cannot parse.
func demoMode(dir, env string) (string, error) {
	mode, from := strings.TrimSpace(env), demoModeEnv
	if mode == "" {
		b, err := os.ReadFile(filepath.Join(dir, demoModeKey))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("read config mode: %w", err)
		}
		mode, from = strings.TrimSpace(string(b)), filepath.Join(dir, demoModeKey)
	}
	switch mode {
	case "":
		return demoServe, nil
	case demoServe, demoCrash, demoUnready:
		return mode, nil
	}
	return "", fmt.Errorf("demo-app: invalid config: mode %q (from %s) is not one of %s, %s, %s",
		mode, from, demoServe, demoCrash, demoUnready)
}

// readConfigDir renders each file of dir as "name: content" lines, skipping
// the ConfigMap volume's hidden ..data links.
func readConfigDir(dir string) (string, error) {
	des, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return "(no config mounted)\n", nil
	}
	if err != nil {
		return "", fmt.Errorf("read config %s: %w", dir, err)
	}
	var lines []string
	for _, d := range des {
		if strings.HasPrefix(d.Name(), ".") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, d.Name()))
		if err != nil {
			return "", fmt.Errorf("read config %s: %w", d.Name(), err)
		}
		lines = append(lines, d.Name()+": "+strings.TrimSpace(string(b)))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n") + "\n", nil
}
