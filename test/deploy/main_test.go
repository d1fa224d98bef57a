// Package deploy runs deploy/ as written: the built binary as the three
// processes of deploy/manager, with the args, env, ports and mounts their
// Deployments declare, each under its own ServiceAccount's token, against
// the real API server (with kube-controller-manager) and Temporal.
package deploy

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/remedy-dev/remedy/internal/devenv"
)

var (
	env *devenv.Env
	// bin is the remedy binary built from this tree, as the image holds it.
	bin  string
	root = repoRoot()
	// logFile receives the parts' and the processes' output.
	logFile *os.File
	// adminKubeconfig is cluster-admin's, for kubectl.
	adminKubeconfig string
)

// See harness's init: the parts die with this test binary.
func init() { devenv.ExecIfWrapped() }

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	start := time.Now()
	dir, err := os.MkdirTemp("", "remedy-deploy-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "deploy:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	logPath := filepath.Join(os.TempDir(), fmt.Sprintf("remedy-deploy-test-%d.log", os.Getpid()))
	if logFile, err = os.Create(logPath); err != nil {
		fmt.Fprintln(os.Stderr, "deploy:", err)
		return 1
	}
	defer logFile.Close()
	ctrl.SetLogger(zap.New(zap.WriteTo(logFile), zap.UseDevMode(true)))
	log.SetOutput(logFile)

	built := make(chan error, 1)
	bin = filepath.Join(dir, "remedy")
	go func() {
		// The image's build: static, no cgo (internal/image).
		build := exec.Command("go", "build", "-o", bin, "./cmd/remedy")
		build.Dir, build.Env = root, append(os.Environ(), "CGO_ENABLED=0")
		out, err := build.CombinedOutput()
		if err != nil {
			err = fmt.Errorf("build remedy: %w: %s", err, out)
		}
		built <- err
	}()

	opts, err := devenv.OptionsFromEnv(root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "deploy:", err)
		return 1
	}
	// deploy/webhook's configurations are installed as written, by the test.
	opts.OperatorWebhooks = nil
	opts.ControllerManager = true
	opts.ExtraCRDs = []string{filepath.Join(root, "test", "testdata", "cert-manager"), filepath.Join(root, "test", "testdata", "prometheus-operator")}
	// Webhook Services resolve through their EndpointSlices, as kube-proxy-less
	// clusters (and this one, which has no Service network) route them.
	opts.APIServerFlags = map[string]string{"enable-aggregator-routing": "true"}
	opts.Log = logFile
	opts.DieWithParent = true
	ctx := context.Background()
	if env, err = devenv.Start(ctx, opts); err != nil {
		fmt.Fprintln(os.Stderr, "deploy: start:", err, "(logs:", logPath+")")
		return 1
	}
	defer func() { _ = env.Stop() }()
	if err := installAsReadme(ctx, dir); err != nil {
		fmt.Fprintln(os.Stderr, "deploy: install:", err, "(logs:", logPath+")")
		return 1
	}
	if err := <-built; err != nil {
		fmt.Fprintln(os.Stderr, "deploy:", err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "deploy: real parts up and binary built in %.1fs (logs: %s)\n", time.Since(start).Seconds(), logPath)
	code := m.Run()
	fmt.Fprintf(os.Stderr, "deploy: package took %.1fs\n", time.Since(start).Seconds())
	if code == 0 {
		_ = os.Remove(logPath)
	}
	return code
}

// installAsReadme installs Remedy with README's procedure, as written, and
// the example approver role the parity test's alice holds.
func installAsReadme(ctx context.Context, dir string) error {
	adminKubeconfig = filepath.Join(dir, "admin.kubeconfig")
	if err := writeAdminKubeconfig(adminKubeconfig); err != nil {
		return err
	}
	blocks, err := parseReadme()
	if err != nil {
		return err
	}
	work := filepath.Join(dir, "checkout")
	if err := os.Mkdir(work, 0o700); err != nil {
		return fmt.Errorf("create checkout: %w", err)
	}
	ca, err := os.ReadFile(env.WebhookClientCA)
	if err != nil {
		return fmt.Errorf("read the webhook client CA: %w", err)
	}
	// The file README's procedure reads: the CA of the API server's webhook client certificate.
	if err := os.WriteFile(filepath.Join(work, "client-ca.crt"), ca, 0o600); err != nil {
		return fmt.Errorf("write client-ca.crt: %w", err)
	}
	if err := runReadme(blocks.install, work); err != nil {
		return err
	}
	return devenv.Install(ctx, env.Config, filepath.Join(root, "deploy", "rbac", "approver-example.yaml"))
}

func writeAdminKubeconfig(path string) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["c"] = &clientcmdapi.Cluster{Server: env.Config.Host, CertificateAuthorityData: env.Config.CAData}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: env.Config.CertData, ClientKeyData: env.Config.KeyData, Token: env.Config.BearerToken}
	kc.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "admin"}
	kc.CurrentContext = "c"
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}
