package devenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"
)

// AlertmanagerOptions say how to run a real Alertmanager.
type AlertmanagerOptions struct {
	// Binary is the alertmanager executable (AlertmanagerBinary finds the pinned one).
	Binary string
	// Config is the whole alertmanager.yml.
	Config string
	// ListenAddress binds the API and UI; empty picks a free loopback port.
	ListenAddress string
	// Log receives its output; nil discards it.
	Log io.Writer
	// DieWithParent kills it with this process (Linux).
	DieWithParent bool
	// Password of AlertmanagerUser (NewAlertmanagerPassword); empty: a fresh one.
	Password string
}

// Alertmanager is a running Alertmanager. Its API and UI admit only
// AlertmanagerUser with Password (its own web authentication,
// --web.config.file): nobody else can post alerts that start remediations.
type Alertmanager struct {
	// URL of its API and UI, e.g. http://127.0.0.1:9093.
	URL string
	// Password of AlertmanagerUser, and HTTPConfig the client configuration
	// holding both (amtool --http.config.file, remedy worker --alertmanager-http-config-file).
	Password   string
	HTTPConfig string
	// Dir holds its configuration and data; files written there (a token
	// for http_config's credentials_file) live as long as it does.
	Dir    string
	cmd    *exec.Cmd
	exited chan struct{}
	opts   AlertmanagerOptions
}

// AlertmanagerBinary is the pinned alertmanager (and amtool beside it) in
// the tools cache, or $ALERTMANAGER when set.
func AlertmanagerBinary(repoRoot string) (string, error) {
	if p := os.Getenv("ALERTMANAGER"); p != "" {
		return p, nil
	}
	cache, err := ToolsCache()
	if err != nil {
		return "", err
	}
	v, err := PinnedVersions(repoRoot)
	if err != nil {
		return "", err
	}
	if v["ALERTMANAGER_VERSION"] == "" {
		return "", fmt.Errorf("%s lacks ALERTMANAGER_VERSION", VersionsFile)
	}
	p := filepath.Join(cache, "alertmanager-"+v["ALERTMANAGER_VERSION"], "alertmanager")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("missing %s: build it with `make tools` (or hack/tools/install.sh alertmanager): %w", p, err)
	}
	return p, nil
}

// StartAlertmanager runs Alertmanager with o.Config, without clustering
// (no gossip port), and waits until it is ready.
func StartAlertmanager(ctx context.Context, o AlertmanagerOptions) (*Alertmanager, error) {
	if o.Log == nil {
		o.Log = io.Discard
	}
	dir, err := os.MkdirTemp("", "remedy-alertmanager-")
	if err != nil {
		return nil, fmt.Errorf("create alertmanager dir: %w", err)
	}
	am := &Alertmanager{Dir: dir, opts: o}
	if err := os.WriteFile(filepath.Join(dir, "alertmanager.yml"), []byte(o.Config), 0o600); err != nil {
		return nil, fmt.Errorf("write alertmanager config: %w", err)
	}
	if err := am.writeAuth(o.Password); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	if o.ListenAddress == "" {
		port, err := freeLoopbackPort()
		if err != nil {
			return nil, err
		}
		o.ListenAddress = "127.0.0.1:" + strconv.Itoa(port)
		am.opts.ListenAddress = o.ListenAddress
	}
	am.URL = "http://" + o.ListenAddress
	if err := am.start(ctx); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	return am, nil
}

// WriteFile writes a file into the Alertmanager's directory (a token for
// credentials_file) and returns its path.
func (a *Alertmanager) WriteFile(name, content string) (string, error) {
	p := filepath.Join(a.Dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		return "", fmt.Errorf("write %s: %w", p, err)
	}
	return p, nil
}

func (a *Alertmanager) start(ctx context.Context) error {
	a.cmd = exec.Command(a.opts.Binary,
		"--config.file="+filepath.Join(a.Dir, "alertmanager.yml"),
		"--storage.path="+filepath.Join(a.Dir, "data"),
		"--web.listen-address="+a.opts.ListenAddress,
		"--web.config.file="+filepath.Join(a.Dir, webConfigFile),
		"--cluster.listen-address=",
		"--log.level=debug",
		"--log.format=json",
	)
	a.cmd.Stdout, a.cmd.Stderr = a.opts.Log, a.opts.Log
	if a.opts.DieWithParent {
		a.cmd.SysProcAttr = childSysProcAttr()
	}
	if err := a.cmd.Start(); err != nil {
		return fmt.Errorf("start alertmanager: %w", err)
	}
	a.exited = make(chan struct{})
	go func() { _ = a.cmd.Wait(); close(a.exited) }()
	deadline := time.Now().Add(30 * time.Second)
	c := a.Client()
	for time.Now().Before(deadline) {
		resp, err := c.Get(a.URL + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-a.exited:
			return errors.New("alertmanager exited before it was ready (see its log)")
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	a.kill()
	return errors.New("alertmanager not ready within 30s")
}

// Restart stops Alertmanager and starts it again with the same
// configuration, address and data (its alerts survive in storage.path's
// snapshot only when it shut down cleanly).
func (a *Alertmanager) Restart(ctx context.Context) error {
	a.kill()
	return a.start(ctx)
}

// Kill stops Alertmanager (SIGTERM, then SIGKILL after 5s) and keeps its files.
func (a *Alertmanager) Kill() { a.kill() }

func (a *Alertmanager) kill() {
	if a.cmd == nil || a.cmd.Process == nil {
		return
	}
	_ = a.cmd.Process.Signal(os.Interrupt)
	select {
	case <-a.exited:
	case <-time.After(5 * time.Second):
		_ = a.cmd.Process.Kill()
		<-a.exited
	}
}

// Stop ends Alertmanager and removes its files.
func (a *Alertmanager) Stop() error {
	a.kill()
	return os.RemoveAll(a.Dir)
}

// FreeLoopbackAddress is a loopback host:port nothing listens on now, to
// give a part its address before it starts.
func FreeLoopbackAddress() (string, error) {
	port, err := freeLoopbackPort()
	if err != nil {
		return "", err
	}
	return "127.0.0.1:" + strconv.Itoa(port), nil
}

func freeLoopbackPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// RouteToRemedy is an Alertmanager configuration that sends every alert to
// Remedy's receiver at url, as the docs configure it: grouped by alertname and
// namespace, resolves sent, the bearer token read from tokenFile (so a
// rotated token applies at once).
func RouteToRemedy(url, tokenFile, groupWait, groupInterval, repeatInterval string) string {
	return routeToRemedy(url, fmt.Sprintf(`authorization:
            type: Bearer
            credentials_file: %s`, tokenFile), groupWait, groupInterval, repeatInterval)
}

// RouteToRemedyTLS is RouteToRemedy authenticating with a client
// certificate instead (http_config.tls_config): Alertmanager presents
// certFile/keyFile and verifies the receiver's serving certificate with caFile.
func RouteToRemedyTLS(url, caFile, certFile, keyFile, groupWait, groupInterval, repeatInterval string) string {
	return routeToRemedy(url, fmt.Sprintf(`tls_config:
            ca_file: %s
            cert_file: %s
            key_file: %s`, caFile, certFile, keyFile), groupWait, groupInterval, repeatInterval)
}

func routeToRemedy(url, httpConfig, groupWait, groupInterval, repeatInterval string) string {
	// resolve_timeout: an alert posted without endsAt (amtool, by hand) fires
	// until it is resolved, as docs/alerts.md says, instead of Alertmanager's
	// default 5m; Prometheus always sends endsAt, so its alerts are unaffected.
	return fmt.Sprintf(`global:
  resolve_timeout: 24h
route:
  receiver: remedy
  group_by: [alertname, namespace]
  group_wait: %s
  group_interval: %s
  repeat_interval: %s
receivers:
  - name: remedy
    webhook_configs:
      - url: %s
        send_resolved: true
        http_config:
          %s
`, groupWait, groupInterval, repeatInterval, url, httpConfig)
}
