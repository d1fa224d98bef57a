package procs

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/remedy-dev/remedy/activities"
	"github.com/remedy-dev/remedy/internal/devenv"
	"github.com/remedy-dev/remedy/internal/pki"
)

// execGateCertDir is where deploy/manager mounts the exec gate's certificate.
const execGateCertDir = "/etc/remedy/exec-gate"

// execGateOnNode points the executor Pods at a worker run as a process: they
// reach this machine on the node's IP (there is no Service network or DNS
// for the headless Service), so the process serves a certificate for that
// address, in place of the Secret's, and names it in --exec-gate-url.
func execGateOnNode(t testing.TB, mounts map[string]string, port int) []string {
	t.Helper()
	if env == nil || !env.HasNode() {
		return nil
	}
	dir, ok := mounts[execGateCertDir]
	require.True(t, ok, "the worker mounts %s", execGateCertDir)
	ca, err := pki.NewCA("remedy-exec-gate-ca")
	require.NoError(t, err)
	pair, err := ca.ServerFor("remedy-exec-gate", []net.IP{net.ParseIP(devenv.NodeIP)}, nil)
	require.NoError(t, err)
	for name, data := range map[string][]byte{"tls.crt": pair.CertPEM, "tls.key": pair.KeyPEM, "ca.crt": ca.CertPEM} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), data, 0o600))
	}
	return []string{fmt.Sprintf("--exec-gate-url=https://%s%s", net.JoinHostPort(devenv.NodeIP, fmt.Sprint(port)), activities.ExecGatePath)}
}
