package docs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	kv1 "github.com/remedy-dev/remedy/api/kausality/v1alpha1"
	"github.com/remedy-dev/remedy/internal/devcompose"
	"github.com/remedy-dev/remedy/internal/devenv"
	"github.com/remedy-dev/remedy/test/harness"
)

// blockTimeout bounds every block; a watch ends sooner. The longest is the
// README's wait for a Verified run: the sample rule's 6m verify window.
const blockTimeout = 8 * time.Minute

// workDir stands in for the repository root a person types in: the
// repository's entries, and its own .dev/ like `make dev` writes.
var workDir string

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "remedy-doctest-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "doctest:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	if err := mirrorRepo(harness.Root, dir); err != nil {
		fmt.Fprintln(os.Stderr, "doctest:", err)
		return 1
	}
	workDir = dir
	bin, err := os.MkdirTemp("", "remedy-doctest-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "doctest:", err)
		return 1
	}
	defer os.RemoveAll(bin)
	if err := linkPlugin(bin, filepath.Join(dir, ".dev", "bin")); err != nil {
		fmt.Fprintln(os.Stderr, "doctest:", err)
		return 1
	}
	// What `make dev` runs: kube-controller-manager, a node, the drift
	// webhook in enforce mode, the demo workloads, the operator, the worker,
	// Alertmanager routed to its receiver, and Prometheus with
	// kube-state-metrics and the standard alerts sending to it.
	return harness.Main(m, harness.Options{
		ControllerManager: true,
		Node:              true,
		Alerts:            &harness.AlertsOptions{},
		Monitoring:        &harness.MonitoringOptions{},
		Remedy:            true,
		Drift:             &devcompose.DriftWebhookOptions{DefaultMode: kv1.ModeEnforce},
		Manifests:         []string{filepath.Join(harness.Root, "deploy", "samples", "demo")},
		LogPath:           filepath.Join(dir, ".dev", "dev.log"),
	})
}

// mirrorRepo links every top-level entry of root into dir, except .dev.
func mirrorRepo(root, dir string) error {
	entries, err := os.ReadDir(root)
	if err != nil {
		return fmt.Errorf("read %s: %w", root, err)
	}
	for _, e := range entries {
		if e.Name() == ".dev" || e.Name() == ".git" {
			continue
		}
		if err := os.Symlink(filepath.Join(root, e.Name()), filepath.Join(dir, e.Name())); err != nil {
			return fmt.Errorf("link %s: %w", e.Name(), err)
		}
	}
	return os.Mkdir(filepath.Join(dir, ".dev"), 0o755)
}

// linkPlugin builds remedy into bin and links it as dir/kubectl-remedy, and
// the pinned kubectl and temporal into dir, as `make dev` links .dev/bin.
func linkPlugin(bin, dir string) error {
	build := exec.Command("go", "build", "-o", filepath.Join(bin, "remedy"), "./cmd/remedy")
	build.Dir = harness.Root
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("build remedy: %w: %s", err, out)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	am, err := devenv.AlertmanagerBinary(harness.Root)
	if err != nil {
		return err
	}
	for name, target := range map[string]string{
		"amtool":         filepath.Join(filepath.Dir(am), "amtool"),
		"kubectl-remedy": filepath.Join(bin, "remedy"),
		"kubectl":        filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "kubectl"),
		"temporal":       os.Getenv("TEMPORAL_CLI"),
	} {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			return fmt.Errorf("link %s: %w", name, err)
		}
	}
	return nil
}

// TestDocs runs README.md, then docs/*.md in name order, each block in
// order; a document stops at its first failing block, as the rest usually
// depends on it. Every document sees what the ones before it left behind,
// as a person reading them in turn in one `make dev` would.
func TestDocs(t *testing.T) {
	env := shellEnv(t)
	docs, err := filepath.Glob(filepath.Join(harness.Root, "docs", "*.md"))
	require.NoError(t, err)
	docs = append([]string{filepath.Join(harness.Root, "README.md")}, docs...)
	for _, path := range docs {
		rel, err := filepath.Rel(harness.Root, path)
		require.NoError(t, err)
		raw, err := os.ReadFile(path)
		require.NoError(t, err)
		blocks, err := Parse(rel, string(raw))
		require.NoError(t, err)
		t.Run(rel, func(t *testing.T) {
			for i, b := range blocks {
				progress("%s (block %d of %d) %s", b, i+1, len(blocks), describe(b))
				if b.Mode == Skip || b.Mode == Deploy {
					continue
				}
				start := time.Now()
				out, err := runBlock(b, env)
				progress("%s done in %.1fs", b, time.Since(start).Seconds())
				t.Logf("%s output:\n%s", b, out)
				if msg := check(b, out, err); msg != "" {
					t.Fatalf("%s: %s\n--- block:\n%s--- output:\n%s", b, msg, b.Script, out)
				}
			}
		})
	}
}

func describe(b Block) string {
	switch b.Mode {
	case Skip:
		return "skipped: " + b.Reason
	case Deploy:
		return "skipped: test/deploy runs it"
	case Fails:
		return "running, must fail"
	case Watch:
		if b.Until != "" {
			return fmt.Sprintf("watching until %q", b.Until)
		}
		return "watching for " + b.For.String()
	}
	return "running"
}

func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "doctest: "+format+"\n", args...)
}

// check says what is wrong with a block's run, or "".
func check(b Block, out string, err error) string {
	var exit *exec.ExitError
	switch {
	case b.Mode == Fails && err == nil:
		return "exited 0, the doc says it is refused"
	case b.Mode == Fails && errors.As(err, &exit):
	case err != nil:
		return err.Error()
	}
	if missing := MissingLines(b.Want, out); len(missing) > 0 {
		return "output lacks the doc's lines (in order):\n" + strings.Join(missing, "\n")
	}
	return ""
}

// shellEnv is a person's shell after `source .dev/env`, the file `make dev`
// writes: KUBECONFIG, TEMPORAL_ADDRESS, REMEDY_WEB_UI, ALERTMANAGER_URL,
// ALERTMANAGER_HTTP_CONFIG (its credentials), PROMETHEUS_URL, and
// .dev/bin (the pinned kubectl, temporal and amtool, and kubectl-remedy) first
// on the system's PATH.
func shellEnv(t *testing.T) []string {
	kubeconfig := filepath.Join(workDir, ".dev", "kubeconfig")
	require.NoError(t, harness.WriteKubeconfig(kubeconfig))
	shell := devenv.ShellEnv{Kubeconfig: kubeconfig, TemporalAddress: harness.TemporalAddress(),
		WebUI: "http://127.0.0.1:8233", BinDir: filepath.Join(workDir, ".dev", "bin"), AlertmanagerURL: harness.Alertmanager().URL,
		AlertmanagerHTTPConfig: harness.Alertmanager().HTTPConfig, PrometheusURL: harness.Monitoring().PrometheusURL}
	require.NoError(t, os.WriteFile(filepath.Join(workDir, ".dev", "env"), shell.Render(), 0o644))

	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if name == "PATH" || name == "KUBECONFIG" || name == "REMEDY_WEB_UI" || name == "ALERTMANAGER_URL" || name == "ALERTMANAGER_HTTP_CONFIG" || name == "PROMETHEUS_URL" || strings.HasPrefix(name, "TEMPORAL_") {
			continue
		}
		env = append(env, kv)
	}
	if os.Getenv("USER") == "" {
		env = append(env, "USER=doctest")
	}
	return append(env, "PATH="+shell.BinDir+":"+os.Getenv("PATH"), "KUBECONFIG="+kubeconfig,
		"TEMPORAL_ADDRESS="+shell.TemporalAddress, "REMEDY_WEB_UI="+shell.WebUI, "ALERTMANAGER_URL="+shell.AlertmanagerURL,
		"ALERTMANAGER_HTTP_CONFIG="+shell.AlertmanagerHTTPConfig, "PROMETHEUS_URL="+shell.PrometheusURL)
}

// runBlock runs one block in its own process group and returns its
// combined output. Stopping it is a Ctrl-C: SIGINT to the group, so a watch's
// kubectl and anything the block started can clean up; SIGKILL if they have
// not exited 10s later.
func runBlock(b Block, env []string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), blockTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "--noprofile", "--norc", "-euo", "pipefail", "-c", b.Script)
	cmd.Dir, cmd.Env = workDir, env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	waited := make(chan struct{})
	cmd.Cancel = func() error {
		pgid := cmd.Process.Pid
		go func() {
			select {
			case <-waited: // the group may be gone and its id reused
			case <-time.After(10 * time.Second):
				_ = syscall.Kill(-pgid, syscall.SIGKILL)
			}
		}()
		return syscall.Kill(-pgid, syscall.SIGINT)
	}
	cmd.WaitDelay = 15 * time.Second
	out := &watchBuffer{until: b.Until, seen: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("start bash: %w", err)
	}
	defer close(waited)
	if b.Mode != Watch {
		err := cmd.Wait()
		if ctx.Err() != nil {
			err = fmt.Errorf("still running after %s", blockTimeout)
		}
		return out.String(), err
	}

	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var stop <-chan time.Time
	if b.For > 0 {
		stop = time.After(b.For)
	}
	select {
	case err := <-exited:
		if err == nil && b.Until != "" && !strings.Contains(out.String(), b.Until) {
			err = fmt.Errorf("ended without printing %q", b.Until)
		}
		return out.String(), err
	case <-out.seen:
	case <-stop:
	case <-ctx.Done():
		<-exited
		return out.String(), fmt.Errorf("did not print %q within %s", b.Until, blockTimeout)
	}
	cancel()
	<-exited
	return out.String(), nil
}

// watchBuffer collects output and closes seen once a whole line contains
// until: kubectl may write a row in pieces, and a watch stopped mid-row would
// lose the rest of it.
type watchBuffer struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	until string
	seen  chan struct{}
	done  bool
}

func (w *watchBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, err := w.buf.Write(p)
	if w.until != "" && !w.done && hasLineWith(w.buf.String(), w.until) {
		w.done = true
		close(w.seen)
	}
	return n, err
}

func hasLineWith(out, s string) bool {
	i := strings.Index(out, s)
	return i >= 0 && strings.Contains(out[i:], "\n")
}

func (w *watchBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}
