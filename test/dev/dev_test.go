package dev

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// TestHelpExitsZero: help is an answer, not an error, for remedy, each of
// its commands, and remedy-dev.
func TestHelpExitsZero(t *testing.T) {
	for _, args := range [][]string{
		{"remedy", "-h"}, {"remedy", "--help"}, {"remedy", "help"},
		{"remedy", "operator", "-h"}, {"remedy", "worker", "-h"}, {"remedy", "webhook", "-h"}, {"remedy", "exec", "-h"},
		{"remedy", "operator", "--help"}, {"remedy", "worker", "--help"}, {"remedy", "webhook", "--help"}, {"remedy", "exec", "--help"},
		{"remedy", "kubectl", "-h"}, {"remedy", "kubectl", "--help"}, {"remedy", "kubectl", "approve", "-h"}, {"remedy", "kubectl", "why", "--help"},
		{"remedy-dev", "-h"}, {"remedy-dev", "--help"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			path := map[string]string{"remedy": bin, "remedy-dev": devBin}[args[0]]
			out, err := exec.Command(path, args[1:]...).CombinedOutput()
			require.NoError(t, err, "%s:\n%s", strings.Join(args, " "), out)
			assert.Contains(t, strings.ToLower(string(out)), "usage")
			assert.NotContains(t, string(out), "help requested")
			// The flag package takes a `quoted` word of a usage for the flag's
			// argument name: "-node make dev" reads as if the boolean took one.
			for _, m := range flagLine.FindAllStringSubmatch(string(out), -1) {
				assert.Contains(t, []string{"", "string", "duration", "int", "int64", "uint", "uint64", "float", "value"}, m[2], "flag -%s", m[1])
			}
		})
	}
}

// flagLine is a flag's line in the flag package's usage: name, then argument name.
var flagLine = regexp.MustCompile(`(?m)^  -([\w.-]+)(?: (.*))?\n    \t`)

// TestDev shares one running remedy-dev between steps that must run in
// order: the last one kills it.
// Long: its steps share one running `remedy dev` and must run in order.
func TestDev(t *testing.T) {
	p := freePorts(t)
	first := startDev(t, newRepo(t), p)
	t.Cleanup(func() { first.stop(t) })
	first.waitReady(t, 3*time.Minute)

	t.Run("a second instance in the same checkout refuses at once and touches nothing", func(t *testing.T) {
		before := snapshot(t, first.devDir())
		require.Contains(t, before, "kubeconfig")
		start := time.Now()
		second := startDev(t, first.repo, p)
		select {
		case <-second.exited:
		case <-time.After(30 * time.Second):
			second.stop(t)
			t.Fatalf("second remedy-dev still running after 30s:\n%s", second.out.String())
		}
		assert.Less(t, time.Since(start), 5*time.Second, "refusal is immediate")
		assert.Equal(t, 1, exitCode(second.err), second.out.String())
		assert.Contains(t, second.out.String(), fmt.Sprintf("another remedy-dev (pid %d) is running", first.cmd.Process.Pid))
		assert.NotContains(t, second.out.String(), "remedy-dev: ready")
		assertUntouched(t, before, snapshot(t, first.devDir()))
		requireServes(t, filepath.Join(first.devDir(), "kubeconfig"))
	})

	t.Run("an instance in another checkout refuses when the ports are taken", func(t *testing.T) {
		other := startDev(t, newRepo(t), p)
		select {
		case <-other.exited:
		case <-time.After(30 * time.Second):
			other.stop(t)
			t.Fatalf("remedy-dev on taken ports still running after 30s:\n%s", other.out.String())
		}
		assert.Equal(t, 1, exitCode(other.err), other.out.String())
		assert.Contains(t, other.out.String(), fmt.Sprintf("Temporal frontend address 127.0.0.1:%d is in use", p.temporal))
		assert.Contains(t, other.out.String(), "--temporal-port")
		assert.NotContains(t, snapshot(t, other.devDir()), "kubeconfig")
		assert.NotContains(t, snapshot(t, other.devDir()), "dev.log")
	})

	t.Run("the banner's metrics endpoints serve the operator's, worker's and webhook's metrics", func(t *testing.T) {
		for part, port := range map[string]int{"operator": p.operator, "drift webhook": p.webhook, "worker": p.worker} {
			url := fmt.Sprintf("http://127.0.0.1:%d/metrics", port)
			assert.Contains(t, first.out.String(), part+" "+url)
			require.EventuallyWithT(t, func(c *assert.CollectT) {
				body := get(c, url)
				assert.Contains(c, body, "controller_runtime_reconcile_total")
				assert.Contains(c, body, "temporal_long_request")
			}, 30*time.Second, 500*time.Millisecond, url)
		}
	})

	t.Run("without KUBEBUILDER_ASSETS and TEMPORAL_CLI, .dev/bin and .dev/env give the pinned tools", func(t *testing.T) {
		environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", first.cmd.Process.Pid))
		require.NoError(t, err)
		for _, kv := range strings.Split(string(environ), "\x00") {
			assert.False(t, strings.HasPrefix(kv, "KUBEBUILDER_ASSETS=") || strings.HasPrefix(kv, "TEMPORAL_CLI="), "remedy-dev's environment has %s", kv)
		}
		bin := filepath.Join(first.devDir(), "bin")
		out, err := exec.Command(filepath.Join(bin, "kubectl"), "version", "--client").CombinedOutput()
		require.NoError(t, err, string(out))
		assert.Contains(t, string(out), "Client Version: ")
		out, err = exec.Command(filepath.Join(bin, "temporal"), "--version").CombinedOutput()
		require.NoError(t, err, string(out))
		assert.Contains(t, string(out), "temporal version ")

		// A person's shell: nothing but the system's PATH, then source .dev/env.
		script := `source .dev/env
printf '%s\n' "$TEMPORAL_ADDRESS" "$REMEDY_WEB_UI" "$ALERTMANAGER_URL" "$PROMETHEUS_URL" "$(command -v kubectl)" "$(command -v temporal)" "$(command -v kubectl-remedy)" "$(command -v amtool)"
kubectl get namespace demo -o name
kubectl get rrule -n demo demo-latency -o name
kubectl get rrule -n demo demo-latency -o jsonpath='{.spec.author.username}{"\n"}'
kubectl apply -f deploy/samples/rrule-demo-latency.yaml 2>&1
temporal workflow list --limit 1 >/dev/null
kubectl remedy --help >/dev/null
amtool --alertmanager.url "$ALERTMANAGER_URL" --http.config.file "$ALERTMANAGER_HTTP_CONFIG" alert query >/dev/null
! amtool --alertmanager.url "$ALERTMANAGER_URL" alert query >/dev/null 2>&1`
		cmd := exec.Command("bash", "--noprofile", "--norc", "-euo", "pipefail", "-c", script)
		cmd.Dir, cmd.Env = first.repo, []string{"PATH=/usr/bin:/bin", "HOME=" + t.TempDir()}
		out, err = cmd.CombinedOutput()
		require.NoError(t, err, string(out))
		assert.Equal(t, []string{
			fmt.Sprintf("127.0.0.1:%d", p.temporal),
			fmt.Sprintf("http://127.0.0.1:%d", p.ui),
			"http://127.0.0.1:9093",
			"http://127.0.0.1:9090",
			filepath.Join(bin, "kubectl"), filepath.Join(bin, "temporal"), filepath.Join(bin, "kubectl-remedy"), filepath.Join(bin, "amtool"),
			"namespace/demo",
			"remediationrule.remedy.dev/demo-latency",
			"remedy-dev-admin",
			"remediationrule.remedy.dev/demo-latency unchanged",
		}, strings.Split(strings.TrimSpace(string(out)), "\n"))
		assert.Contains(t, first.out.String(), fmt.Sprintf("Temporal Web UI: http://127.0.0.1:%d/namespaces/default/workflows", p.ui))
		assert.Contains(t, first.out.String(), "Alertmanager UI http://127.0.0.1:9093 (user remedy, password in $ALERTMANAGER_HTTP_CONFIG)")
	})

	t.Run("the codec server reviews the demo approver's token", func(t *testing.T) {
		script := `source .dev/env
printf '%s\n' "$TEMPORAL_CODEC_ENDPOINT"
kubectl create token approver -n demo`
		cmd := exec.Command("bash", "--noprofile", "--norc", "-euo", "pipefail", "-c", script)
		cmd.Dir, cmd.Env = first.repo, []string{"PATH=/usr/bin:/bin", "HOME=" + t.TempDir()}
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, string(out))
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		require.Len(t, lines, 2, string(out))
		endpoint := fmt.Sprintf("http://127.0.0.1:%d", p.codec)
		assert.Equal(t, endpoint, lines[0])
		decode := func(auth string) int {
			req, err := http.NewRequest(http.MethodPost, endpoint+"/decode", strings.NewReader(`{"payloads":[]}`))
			require.NoError(t, err)
			if auth != "" {
				req.Header.Set("Authorization", auth)
			}
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			resp.Body.Close()
			return resp.StatusCode
		}
		assert.Equal(t, http.StatusUnauthorized, decode(""))
		assert.Equal(t, http.StatusOK, decode("Bearer "+lines[1]), "demo/approver may decode")
		assert.Contains(t, first.out.String(), "codec server:    "+endpoint)
	})

	t.Run("SIGKILL of remedy-dev leaves no child alive", func(t *testing.T) {
		procs := descendants(first.cmd.Process.Pid)
		var names []string
		for _, pr := range procs {
			names = append(names, pr.comm)
		}
		for _, want := range []string{"etcd", "kube-apiserver", "kube-controller", "temporal"} {
			require.Contains(t, names, want, "children of remedy-dev")
		}
		require.NoError(t, first.cmd.Process.Signal(syscall.SIGKILL))
		<-first.exited
		alive := func() []proc {
			var out []proc
			for _, pr := range procs {
				if pr.alive() {
					out = append(out, pr)
				}
			}
			return out
		}
		assert.Eventually(t, func() bool { return len(alive()) == 0 }, 15*time.Second, 200*time.Millisecond, "children outlived remedy dev")
		survivors := alive()
		for _, pr := range survivors {
			t.Errorf("%s (pid %d) outlived remedy-dev", pr.comm, pr.pid)
			pr.kill()
		}
	})
}

// fileState is one file's content and modification time.
type fileState struct {
	content string
	modTime time.Time
}

// snapshot reads every file in dir.
func snapshot(t *testing.T, dir string) map[string]fileState {
	entries, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatalf("read %s: %v", dir, err)
	}
	files := map[string]fileState{}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		raw, err := os.ReadFile(filepath.Join(dir, e.Name()))
		require.NoError(t, err)
		info, err := e.Info()
		require.NoError(t, err)
		files[e.Name()] = fileState{content: string(raw), modTime: info.ModTime()}
	}
	return files
}

// assertUntouched compares two snapshots of a running instance's .dev: its
// own log only grows; every other file is as it was.
func assertUntouched(t *testing.T, before, after map[string]fileState) {
	t.Helper()
	require.Equal(t, keys(before), keys(after), "files in .dev")
	for name, b := range before {
		a := after[name]
		if name == "dev.log" {
			assert.True(t, strings.HasPrefix(a.content, b.content), "dev.log was rewritten, not appended to")
			continue
		}
		assert.Equal(t, b.content, a.content, name)
		assert.Equal(t, b.modTime, a.modTime, name)
	}
}

func keys(m map[string]fileState) []string {
	var k []string
	for name := range m {
		k = append(k, name)
	}
	sort.Strings(k)
	return k
}

// requireServes checks that kubeconfig still reaches a serving API server.
func requireServes(t *testing.T, kubeconfig string) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	require.NoError(t, err)
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	require.NoError(t, err)
	_, err = dc.ServerVersion()
	require.NoError(t, err, "the first instance's API server")
}

func get(c *assert.CollectT, url string) string {
	resp, err := http.Get(url)
	if !assert.NoError(c, err) {
		return ""
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	assert.NoError(c, err)
	assert.Equal(c, http.StatusOK, resp.StatusCode, strconv.Quote(string(body)))
	return string(body)
}

// TestDevStops: Ctrl-C with a watch open (a `kubectl get -w` in another
// terminal) stops every part quickly, without envtest's kill after its
// timeout, and removes what the instance wrote.
func TestDevStops(t *testing.T) {
	in := startDev(t, newRepo(t), freePorts(t))
	t.Cleanup(func() { in.stop(t) })
	in.waitReady(t, 3*time.Minute)
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(in.devDir(), "kubeconfig"))
	require.NoError(t, err)
	cs, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	w, err := cs.AppsV1().Deployments("").Watch(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	defer w.Stop()
	procs := descendants(in.cmd.Process.Pid)
	require.NotEmpty(t, procs)

	start := time.Now()
	require.NoError(t, in.cmd.Process.Signal(os.Interrupt))
	select {
	case <-in.exited:
	case <-time.After(time.Minute):
		t.Fatalf("remedy-dev did not stop within a minute:\n%s", in.out.String())
	}
	took := time.Since(start)
	t.Logf("stopped in %.1fs", took.Seconds())
	assert.Equal(t, 0, exitCode(in.err), in.out.String())
	assert.NotContains(t, in.out.String(), "timeout waiting")
	assert.Contains(t, in.out.String(), "remedy-dev: stopped the API server", "the terminal, not only the log, says it stopped")
	// envtest kills a kube-apiserver that has not stopped after 5s.
	assert.Less(t, took, 5*time.Second)
	for _, pr := range procs {
		if pr.alive() {
			t.Errorf("%s (pid %d) outlived remedy-dev", pr.comm, pr.pid)
			pr.kill()
		}
	}
	assert.Equal(t, []string{"dev.log", "lock"}, keys(snapshot(t, in.devDir())), "kubeconfig and env removed")
	raw, err := os.ReadFile(filepath.Join(in.devDir(), "dev.log"))
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
	require.Greater(t, len(lines), 10)
	for i, line := range lines {
		assert.True(t, json.Valid([]byte(line)), "dev.log line %d is not JSON: %s", i+1, line)
	}
	assert.Contains(t, string(raw), `"msg":"stopped the API server, Temporal and the rest of the platform"`)
	assert.NoDirExists(t, filepath.Join(in.devDir(), "tmp"))
}
