package procs

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/remedy-dev/remedy/activities"
	"github.com/remedy-dev/remedy/internal/devenv"
	"github.com/remedy-dev/remedy/test/docs"
)

// ReadmeBlocks are the blocks of docs/operate.md's "Running against a real cluster"
// marked `doctest: deploy`, in order: the install, the overlay that points
// the processes at another Temporal, the overlay that points executor Pods
// without cluster DNS at the exec gate, the Temporal namespace, the secured
// Temporal's Secrets and the scaling.
type ReadmeBlocks struct{ Install, Address, ExecGate, Temporal, TLS, Scale docs.Block }

// installDoc holds the install procedure the deploy tests run as written.
const installDoc = "docs/operate.md"

// ParseReadme finds them.
func ParseReadme() (ReadmeBlocks, error) {
	raw, err := os.ReadFile(filepath.Join(Root, installDoc))
	if err != nil {
		return ReadmeBlocks{}, fmt.Errorf("read %s: %w", installDoc, err)
	}
	all, err := docs.Parse(installDoc, string(raw))
	if err != nil {
		return ReadmeBlocks{}, err
	}
	var deploy []docs.Block
	for _, b := range all {
		if b.Mode == docs.Deploy {
			deploy = append(deploy, b)
		}
	}
	want := []string{"kubectl apply -k deploy/manager", "kubectl apply -k remedy-manager", "kubectl apply -k remedy-exec-gate", "temporal operator namespace create", "secret generic remedy-temporal-tls", "scale deploy/remedy-worker"}
	if len(deploy) != len(want) {
		return ReadmeBlocks{}, fmt.Errorf("%s has %d `doctest: deploy` blocks, this test runs %d", installDoc, len(deploy), len(want))
	}
	for i, w := range want {
		if !strings.Contains(deploy[i].Script, w) {
			return ReadmeBlocks{}, fmt.Errorf("%s: deploy block %d should contain %q", deploy[i], i+1, w)
		}
	}
	return ReadmeBlocks{deploy[0], deploy[1], deploy[2], deploy[3], deploy[4], deploy[5]}, nil
}

// RunReadme runs b as a person would from a checkout, in dir (which holds
// deploy/ and whatever files the block reads), with the pinned kubectl and
// temporal on PATH pointed at this package's parts, and vars (NAME=value) set.
func RunReadme(b docs.Block, dir string, vars ...string) error {
	for _, name := range []string{"deploy", "temporal-dev.yaml"} {
		if err := os.Symlink(filepath.Join(Root, name), filepath.Join(dir, name)); err != nil && !os.IsExist(err) {
			return fmt.Errorf("link %s: %w", name, err)
		}
	}
	cmd := exec.Command("bash", "--noprofile", "--norc", "-euo", "pipefail", "-c", b.Script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"PATH="+os.Getenv("KUBEBUILDER_ASSETS")+":"+filepath.Dir(os.Getenv("TEMPORAL_CLI"))+":"+os.Getenv("PATH"),
		"KUBECONFIG="+adminKubeconfig, "TEMPORAL_ADDRESS="+Env().TemporalAddress)
	cmd.Env = append(cmd.Env, vars...)
	out, err := cmd.CombinedOutput()
	fmt.Fprintf(logFile, "procs: ran %s:\n%s%s\n", b, b.Script, out)
	if err != nil {
		return fmt.Errorf("%s: %w:\n%s", b, err, out)
	}
	return nil
}

// AdminKubeconfig is cluster-admin's kubeconfig file.
func AdminKubeconfig() string { return adminKubeconfig }

// install installs Remedy with the install doc's procedure, as written,
// unless none, and the example approver role the tests' alice holds. With
// pods, the executor Pods, which have no cluster DNS here, reach the exec
// gate through gate (forwardExecGate) on the node's IP: the install doc's
// exec gate overlay names that address.
func install(ctx context.Context, dir string, none bool, gate *devenv.Forwarder) error {
	adminKubeconfig = filepath.Join(dir, "admin.kubeconfig")
	if err := env.WriteAdminKubeconfig(adminKubeconfig); err != nil {
		return err
	}
	if none {
		return nil
	}
	blocks, err := ParseReadme()
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
	// The file the install doc's procedure reads: the CA of the API server's webhook client certificate.
	if err := os.WriteFile(filepath.Join(work, "client-ca.crt"), ca, 0o600); err != nil {
		return fmt.Errorf("write client-ca.crt: %w", err)
	}
	// Then the processes are pointed at this package's Temporal: on the
	// node's IP with a node, where its Pods reach it.
	for _, b := range []docs.Block{blocks.Install, blocks.Address} {
		if err := RunReadme(b, work); err != nil {
			return err
		}
	}
	if gate != nil {
		if err := RunReadme(blocks.ExecGate, work, "EXEC_GATE_ADDRESS="+gate.Addr()); err != nil {
			return err
		}
		execGateURL = "https://" + gate.Addr() + activities.ExecGatePath
	}
	return devenv.Install(ctx, env.Config, filepath.Join(Root, "deploy", "rbac", "approver-example.yaml"))
}
