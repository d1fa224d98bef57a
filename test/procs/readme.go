package procs

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/remedy-dev/remedy/activities/execution"
	"github.com/remedy-dev/remedy/internal/devenv"
	"github.com/remedy-dev/remedy/internal/seal"
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
	// And the keys it makes Secret remedy-payload-keys from: the test's own client seals with them.
	if err := copyPayloadKeys(filepath.Join(work, "payload-keys")); err != nil {
		return err
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
		execGateURL = "https://" + gate.Addr() + execution.ExecGatePath
	}
	return devenv.Install(ctx, env.Config, filepath.Join(Root, "deploy", "rbac", "approver-example.yaml"))
}

// PayloadKeysValues are the Helm chart's payloadKeys for this package's
// keys (devenv.Env.PayloadKeys), which the test's Temporal client seals with.
func PayloadKeysValues(t testing.TB) map[string]any {
	t.Helper()
	entries, err := os.ReadDir(env.PayloadKeys)
	require.NoError(t, err)
	keys := map[string]any{}
	var active string
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(env.PayloadKeys, e.Name()))
		require.NoError(t, err)
		if e.Name() == seal.ActiveFile {
			active = strings.TrimSpace(string(b))
			continue
		}
		keys[e.Name()] = base64.StdEncoding.EncodeToString(b)
	}
	return map[string]any{"active": active, "keys": keys}
}

// copyPayloadKeys copies this package's payload keys to dir, the directory
// the install doc's procedure makes Secret remedy-payload-keys from.
func copyPayloadKeys(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create payload-keys: %w", err)
	}
	entries, err := os.ReadDir(env.PayloadKeys)
	if err != nil {
		return fmt.Errorf("read payload keys: %w", err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(env.PayloadKeys, e.Name()))
		if err != nil {
			return fmt.Errorf("read payload key: %w", err)
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), b, 0o600); err != nil {
			return fmt.Errorf("write payload key: %w", err)
		}
	}
	return nil
}
