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

// runDemoApp is the demo workloads' server: it reports its Pod and the
// config mounted when it started, so a rollout after a ConfigMap edit shows
// in what new Pods serve. /readyz is its readiness endpoint.
func runDemoApp(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("demo-app", flag.ContinueOnError)
	addr := fs.String("addr", ":8080", "address to serve on")
	configDir := fs.String("config-dir", "/etc/demo", "directory of the mounted config (a ConfigMap volume); may be absent")
	if err := fs.Parse(args); err != nil {
		return err
	}
	config, err := readConfigDir(*configDir)
	if err != nil {
		return err
	}
	host, _ := os.Hostname()
	mux := http.NewServeMux()
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, "demo-app on %s\n%s", host, config)
	})
	srv := &http.Server{Addr: *addr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.ListenAndServe() }()
	fmt.Printf("demo-app: serving on %s; config:\n%s", *addr, config)
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
