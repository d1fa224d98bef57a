package dev

import (
	"context"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/remedy-dev/remedy/internal/devenv"
	"github.com/remedy-dev/remedy/internal/image"
)

var (
	imagesOnce sync.Once
	nodeImages string
	imagesErr  error
)

// images builds Remedy's and the pause image once, as `make image` does.
func images(t *testing.T, dir string) string {
	t.Helper()
	imagesOnce.Do(func() {
		var remedy, pause string
		remedy, pause, imagesErr = image.BuildNodeImages(context.Background(), root, runtime.GOARCH, dir)
		nodeImages = remedy + "," + pause
	})
	require.NoError(t, imagesErr)
	return nodeImages
}

// TestDevNodeLeavesNothingBehind: `remedy-dev --node` runs the demo
// workload's Pod and, whether stopped with Ctrl-C or killed with SIGKILL,
// leaves the machine as it found it: links, routes, iptables chains and
// rules, mounts, the sysctls the kubelet and the CNI plugin change, the
// directories of containerd and CNI, the kubelet's cgroups and every
// process of the node (after SIGKILL the janitor cleans up).
func TestDevNodeLeavesNothingBehind(t *testing.T) {
	imageDir := t.TempDir()
	for name, kill := range map[string]func(in *instance){
		"Ctrl-C":  func(in *instance) { in.stop(t) },
		"SIGKILL": func(in *instance) { _ = in.cmd.Process.Signal(syscall.SIGKILL); <-in.exited },
	} {
		t.Run(name, func(t *testing.T) {
			before, err := devenv.MachineSnapshot()
			require.NoError(t, err)
			in := startDev(t, newRepo(t), freePorts(t), "--node", "--node-images", images(t, imageDir))
			in.waitReady(t, 5*time.Minute)
			kubeconfig := filepath.Join(in.devDir(), "kubeconfig")
			kubectl := filepath.Join(in.devDir(), "bin", "kubectl")
			require.EventuallyWithT(t, func(c *assert.CollectT) {
				out, err := exec.Command(kubectl, "--kubeconfig", kubeconfig, "get", "deploy", "web", "-n", "demo", "--no-headers").CombinedOutput()
				assert.NoError(c, err)
				assert.Contains(c, string(out), " 1/1 ")
			}, 2*time.Minute, time.Second, "the demo workload's Pod runs")
			during, err := devenv.MachineSnapshot()
			require.NoError(t, err)
			require.NotEqual(t, before, during, "the node changed the machine while it ran")

			kill(in)
			if !assert.Eventually(t, func() bool {
				after, err := devenv.MachineSnapshot()
				return err == nil && after == before
			}, time.Minute, time.Second) {
				after, err := devenv.MachineSnapshot()
				t.Fatalf("the machine differs a minute after the node (%v):\n%s", err, diffLines(before, after))
			}
		})
	}
}

// diffLines lists the lines only one snapshot has.
func diffLines(a, b string) string {
	count := map[string]int{}
	for _, l := range strings.Split(a, "\n") {
		count[l]++
	}
	for _, l := range strings.Split(b, "\n") {
		count[l]--
	}
	var out []string
	for l, n := range count {
		switch {
		case n > 0:
			out = append(out, "- "+l)
		case n < 0:
			out = append(out, "+ "+l)
		}
	}
	return strings.Join(out, "\n")
}
