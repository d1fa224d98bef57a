// Package dev tests remedy-dev (`make dev`) as a person runs it: the built
// binary as a subprocess, starting the real parts.
package dev

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/remedy-dev/remedy/internal/devenv"
)

var (
	// bin is the remedy binary built from this tree, devBin remedy-dev.
	bin, devBin string
	// root is the repository root.
	root = repoRoot()
	// toolsCache is a tools cache holding the pinned binaries of
	// KUBEBUILDER_ASSETS and TEMPORAL_CLI under their versioned names.
	toolsCache string
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" || os.Getenv("TEMPORAL_CLI") == "" {
		fmt.Fprintln(os.Stderr, "dev: KUBEBUILDER_ASSETS and TEMPORAL_CLI must be set (make test sets them)")
		return 1
	}
	dir, err := os.MkdirTemp("", "remedy-dev-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "dev:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	bin, devBin = filepath.Join(dir, "remedy"), filepath.Join(dir, "remedy-dev")
	for out, pkg := range map[string]string{bin: "./cmd/remedy", devBin: "./cmd/remedy-dev"} {
		build := exec.Command("go", "build", "-o", out, pkg)
		build.Dir = root
		if b, err := build.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "dev: build %s: %v\n%s", pkg, err, b)
			return 1
		}
	}
	if toolsCache, err = linkToolsCache(filepath.Join(dir, "tools")); err != nil {
		fmt.Fprintln(os.Stderr, "dev:", err)
		return 1
	}
	return m.Run()
}

// linkToolsCache lays out dir as hack/tools/install.sh lays out the tools
// cache, at the versions this repository pins, linking the binaries the
// test was given; remedy-dev runs without KUBEBUILDER_ASSETS and
// TEMPORAL_CLI, as a person runs it, and must find them there.
func linkToolsCache(dir string) (string, error) {
	assets, temporalCLI, err := devenv.CachedTools(root, dir)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(temporalCLI), 0o755); err != nil {
		return "", fmt.Errorf("create tools cache: %w", err)
	}
	if err := os.Symlink(os.Getenv("KUBEBUILDER_ASSETS"), assets); err != nil {
		return "", fmt.Errorf("link kubernetes: %w", err)
	}
	if err := os.Symlink(os.Getenv("TEMPORAL_CLI"), temporalCLI); err != nil {
		return "", fmt.Errorf("link temporal: %w", err)
	}
	// The node's containerd, from the cache `make tools` filled.
	cache, err := devenv.ToolsCache()
	if err != nil {
		return "", err
	}
	real, err := devenv.CachedContainerd(root, cache)
	if err != nil {
		return "", err
	}
	link, err := devenv.CachedContainerd(root, dir)
	if err != nil {
		return "", err
	}
	if err := os.Symlink(real, link); err != nil {
		return "", fmt.Errorf("link containerd: %w", err)
	}
	// Alertmanager and amtool, the same way.
	am, err := devenv.AlertmanagerBinary(root)
	if err != nil {
		return "", err
	}
	if err := os.Symlink(filepath.Dir(am), filepath.Join(dir, filepath.Base(filepath.Dir(am)))); err != nil {
		return "", fmt.Errorf("link alertmanager: %w", err)
	}
	// Prometheus and kube-state-metrics, the same way.
	prom, ksm, err := devenv.MonitoringBinaries(root)
	if err != nil {
		return "", err
	}
	for _, bin := range []string{prom, ksm} {
		if err := os.Symlink(filepath.Dir(bin), filepath.Join(dir, filepath.Base(filepath.Dir(bin)))); err != nil {
			return "", fmt.Errorf("link %s: %w", filepath.Base(bin), err)
		}
	}
	return dir, nil
}

// devEnviron is the test's environment without KUBEBUILDER_ASSETS and
// TEMPORAL_CLI, with toolsCache as the tools cache.
func devEnviron() []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if name != "KUBEBUILDER_ASSETS" && name != "TEMPORAL_CLI" && name != "REMEDY_TOOLS_CACHE" {
			env = append(env, kv)
		}
	}
	return append(env, "REMEDY_TOOLS_CACHE="+toolsCache)
}

// instance is one remedy-dev subprocess with a checkout of its own: a
// directory whose deploy/ is the repository's, so its .dev/ is private.
type instance struct {
	cmd    *exec.Cmd
	repo   string
	out    *syncBuffer
	exited chan struct{}
	err    error
}

// ports are the fixed ports of one instance: Temporal, Web UI, then the
// operator's, webhook's and worker's metrics, and the codec server.
type ports struct{ temporal, ui, operator, webhook, worker, codec int }

// freePorts picks ports below the kernel's ephemeral range (32768 and up):
// a port the kernel handed to a listener on :0 may be handed again, to
// another package's outgoing connection, before remedy-dev binds it.
func freePorts(t *testing.T) ports {
	var p [6]int
	for i := range p {
		for tries := 0; ; tries++ {
			if tries == 100 {
				t.Fatalf("find a free port below 32768")
			}
			port := 20000 + rand.IntN(12000)
			l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
			if err != nil {
				continue
			}
			defer l.Close()
			p[i] = port
			break
		}
	}
	return ports{p[0], p[1], p[2], p[3], p[4], p[5]}
}

func (p ports) args() []string {
	addr := func(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }
	return []string{
		"-temporal-port", strconv.Itoa(p.temporal), "-ui-port", strconv.Itoa(p.ui),
		"-operator-metrics-addr", addr(p.operator), "-webhook-metrics-addr", addr(p.webhook), "-worker-metrics-addr", addr(p.worker),
		"-codec-addr", addr(p.codec),
	}
}

// newRepo makes a checkout for one instance.
func newRepo(t *testing.T) string {
	repo := t.TempDir()
	for _, dir := range []string{"deploy", "hack"} {
		if err := os.Symlink(filepath.Join(root, dir), filepath.Join(repo, dir)); err != nil {
			t.Fatalf("link %s: %v", dir, err)
		}
	}
	return repo
}

// startDev runs remedy-dev in repo with p's ports and more args, and returns at once.
func startDev(t *testing.T, repo string, p ports, more ...string) *instance {
	in := &instance{repo: repo, out: &syncBuffer{}, exited: make(chan struct{})}
	in.cmd = exec.Command(devBin, append(append([]string{"-repo", repo}, p.args()...), more...)...)
	in.cmd.Stdout, in.cmd.Stderr = in.out, in.out
	in.cmd.Env = devEnviron()
	if err := in.cmd.Start(); err != nil {
		t.Fatalf("start remedy-dev: %v", err)
	}
	go func() { in.err = in.cmd.Wait(); close(in.exited) }()
	return in
}

// waitReady waits for the ready line, failing if the instance exits first.
func (in *instance) waitReady(t *testing.T, timeout time.Duration) {
	t.Helper()
	deadline := time.After(timeout)
	for !bytes.Contains(in.out.Bytes(), []byte("remedy-dev: ready")) {
		select {
		case <-in.exited:
			t.Fatalf("remedy-dev exited before ready (%v):\n%s", in.err, in.out.String())
		case <-deadline:
			t.Fatalf("remedy-dev not ready after %s:\n%s", timeout, in.out.String())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// stop interrupts the instance as Ctrl-C would and waits for it.
func (in *instance) stop(t *testing.T) {
	select {
	case <-in.exited:
		return
	default:
	}
	_ = in.cmd.Process.Signal(os.Interrupt)
	select {
	case <-in.exited:
	case <-time.After(time.Minute):
		_ = in.cmd.Process.Kill()
		<-in.exited
		t.Errorf("remedy-dev did not stop within a minute of SIGINT")
	}
}

func (in *instance) devDir() string { return filepath.Join(in.repo, ".dev") }

// syncBuffer collects a subprocess's output while tests read it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) Bytes() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return bytes.Clone(s.b.Bytes())
}

func (s *syncBuffer) String() string { return string(s.Bytes()) }

// exitCode is the exit status of a finished command, -1 if a signal ended it.
func exitCode(err error) int {
	if err == nil {
		return 0
	}
	if ee, ok := err.(*exec.ExitError); ok {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return -1
		}
		return ee.ExitCode()
	}
	return -1
}

func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}
