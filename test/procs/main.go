// Package procs runs deploy/manager as written: the built binary as the
// operator, worker and drift webhook processes their Deployments declare,
// each under its own ServiceAccount's token, against the real API server
// (with kube-controller-manager) and Temporal. test/deploy checks the
// manifests with it; test/faults kills the processes and the parts. Call
// Main from TestMain.
package procs

import (
	"context"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/remedy-dev/remedy/internal/devenv"
	"github.com/remedy-dev/remedy/internal/image"
)

// Options say what a package needs beyond the default parts.
type Options struct {
	// Name prefixes the temporary directory, the log file and messages.
	Name string
	// Restartable keeps kube-apiserver's certificates and Temporal's
	// database in a state directory, so KillAPIServer and KillTemporal can
	// bring them back as they were.
	Restartable bool
	// ExtraControllers are more kube-controller-manager controllers.
	ExtraControllers []string
	// NoInstall leaves the install to the package (README's procedure is
	// the default): test/helm installs the chart instead.
	NoInstall bool
	// Node runs a real node with Remedy's image built from this tree and
	// imported (and the pause image): the job executor's Pods run
	// `remedy exec` from it. One node runs per machine: packages with one
	// take turns.
	Node bool
	// Pods runs the installed Deployments as Pods on the node, which reach
	// Temporal on the node's IP; start no processes (StartPod) beside them.
	// Without it, the node runs no Deployment of deploy/manager (scaled to
	// zero after the install), only what the processes create.
	Pods bool
}

var (
	env *devenv.Env
	// bin is the remedy binary built from this tree, as the image holds it.
	bin string
	// Root is the repository root.
	Root = repoRoot()
	// logFile receives the parts' and the processes' output.
	logFile *os.File
	logPath string
	// adminKubeconfig is cluster-admin's, for the install doc's commands.
	adminKubeconfig string
)

// See test/harness's init: the parts die with this test binary.
func init() { devenv.ExecIfWrapped() }

// Env is the running parts.
func Env() *devenv.Env { return env }

// Bin is the built remedy binary.
func Bin() string { return bin }

// LogPath is the file that receives every process's output.
func LogPath() string { return logPath }

// Log is that file, for a test's own processes.
func Log() io.Writer { return logFile }

// Main builds the binary and starts the parts while it builds, runs the
// package's tests and stops everything.
func Main(m *testing.M, o Options) int {
	start := time.Now()
	dir, err := os.MkdirTemp("", "remedy-"+o.Name+"-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, o.Name+":", err)
		return 1
	}
	defer os.RemoveAll(dir)
	if err := openLog(o.Name); err != nil {
		fmt.Fprintln(os.Stderr, o.Name+":", err)
		return 1
	}
	defer logFile.Close()

	node, built, err := buildBinary(o, dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, o.Name+":", err)
		return 1
	}
	opts, err := envOptions(o, dir, node)
	if err != nil {
		fmt.Fprintln(os.Stderr, o.Name+":", err)
		return 1
	}
	ctx := context.Background()
	if env, err = devenv.Start(ctx, opts); err != nil {
		fmt.Fprintln(os.Stderr, o.Name+": start:", err, "(logs:", logPath+")")
		return 1
	}
	defer func() { _ = env.Stop() }()
	defer stopRestarted()
	var gate *devenv.Forwarder
	if o.Pods && !o.NoInstall {
		if gate, err = forwardExecGate(); err != nil {
			fmt.Fprintln(os.Stderr, o.Name+": exec gate:", err)
			return 1
		}
		defer func() { _ = gate.Close() }()
	}
	if err := install(ctx, dir, o.NoInstall, gate); err != nil {
		fmt.Fprintln(os.Stderr, o.Name+": install:", err, "(logs:", logPath+")")
		return 1
	}
	if o.Node && !o.Pods && !o.NoInstall {
		if err := scaleManagerToZero(ctx); err != nil {
			fmt.Fprintln(os.Stderr, o.Name+": node:", err)
			return 1
		}
	}
	if err := <-built; err != nil {
		fmt.Fprintln(os.Stderr, o.Name+":", err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "%s: real parts up and binary built in %.1fs (logs: %s)\n", o.Name, time.Since(start).Seconds(), logPath)
	code := m.Run()
	fmt.Fprintf(os.Stderr, "%s: package took %.1fs\n", o.Name, time.Since(start).Seconds())
	if code == 0 {
		_ = os.Remove(logPath)
	}
	return code
}

// openLog creates the package's log file and sends the controllers' and the standard logger's output to it.
func openLog(name string) error {
	logPath = filepath.Join(os.TempDir(), fmt.Sprintf("remedy-%s-test-%d.log", name, os.Getpid()))
	var err error
	if logFile, err = os.Create(logPath); err != nil {
		return err
	}
	ctrl.SetLogger(zap.New(zap.WriteTo(logFile), zap.UseDevMode(true)))
	log.SetOutput(logFile)
	return nil
}

// buildBinary sets bin: with a node, the binary of the image the node
// imports (and the node's options); else it builds this tree's in the
// background and reports on built when done.
func buildBinary(o Options, dir string) (*devenv.NodeOptions, <-chan error, error) {
	built := make(chan error, 1)
	bin = filepath.Join(dir, "remedy")
	if o.Node {
		// The image's binary is this tree's; the node imports the image before it starts.
		built <- nil
		images := filepath.Join(dir, "images")
		if err := os.Mkdir(images, 0o700); err != nil {
			return nil, nil, err
		}
		node, err := image.NodeOptions(context.Background(), Root, runtime.GOARCH, images)
		if err != nil {
			return nil, nil, fmt.Errorf("node: %w", err)
		}
		bin = filepath.Join(images, "remedy")
		return node, built, nil
	}
	go func() {
		// The image's build: static, no cgo (internal/image).
		build := exec.Command("go", "build", "-o", bin, "./cmd/remedy")
		build.Dir, build.Env = Root, append(os.Environ(), "CGO_ENABLED=0")
		out, err := build.CombinedOutput()
		if err != nil {
			err = fmt.Errorf("build remedy: %w: %s", err, out)
		}
		built <- err
	}()
	return nil, built, nil
}

// envOptions are the parts this package runs: the control plane with its
// controller manager, the node when asked for, and no operator webhooks
// (deploy/webhook's configurations are installed as written, by the test).
func envOptions(o Options, dir string, node *devenv.NodeOptions) (devenv.Options, error) {
	opts, err := devenv.OptionsFromEnv(Root)
	if err != nil {
		return opts, err
	}
	opts.OperatorWebhooks = nil
	opts.ControllerManager = true
	opts.ExtraControllers = o.ExtraControllers
	opts.ExtraCRDs = []string{filepath.Join(Root, "test", "testdata", "cert-manager"), filepath.Join(Root, "test", "testdata", "prometheus-operator")}
	// Webhook Services resolve through their EndpointSlices, as kube-proxy-less
	// clusters (and this one, which has no Service network) route them.
	opts.APIServerFlags = map[string]string{"enable-aggregator-routing": "true"}
	// containerd has imported the images once Start returns.
	opts.Node, opts.TemporalForPods = node, o.Pods
	if o.Restartable {
		opts.StateDir = filepath.Join(dir, "state")
	}
	opts.Log = logFile
	opts.DieWithParent = true
	return opts, nil
}

func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// scaleManagerToZero keeps the node from running deploy/manager's
// Deployments as Pods beside the processes this package runs in their stead
// (a second operator would contend for the lease, a second webhook for the
// Services): the node runs the job executor's Pods only.
func scaleManagerToZero(ctx context.Context) error {
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}
	deps, err := cs.AppsV1().Deployments(devenv.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list deployments: %w", err)
	}
	for _, d := range deps.Items {
		patch := []byte(`{"spec":{"replicas":0}}`)
		if _, err := cs.AppsV1().Deployments(d.Namespace).Patch(ctx, d.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("scale %s to zero: %w", d.Name, err)
		}
	}
	return nil
}
