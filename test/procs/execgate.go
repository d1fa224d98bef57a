package procs

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/remedy-dev/remedy/activities/execution"
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
	return []string{fmt.Sprintf("--exec-gate-url=https://%s%s", net.JoinHostPort(devenv.NodeIP, fmt.Sprint(port)), execution.ExecGatePath)}
}

// execGateService is deploy/manager's headless Service of the exec gate.
const execGateService = "remedy-worker-gate"

// execGateURL is the --exec-gate-url the install's exec gate overlay gave
// the worker (Options.Pods); empty otherwise.
var execGateURL string

// ExecGateURL is the --exec-gate-url the install doc's exec gate overlay
// gave the worker (Options.Pods); empty otherwise.
func ExecGateURL() string { return execGateURL }

// forwardExecGate stands in, for the worker's Pods, for what this node
// lacks: cluster DNS for the headless Service. It listens on the node's IP,
// where executor Pods reach this machine, and joins each connection to the
// Service's ready endpoints in turn, as kube-proxy balances a Service. A
// replica whose run does not attend the asking Pod's Job answers 503 and
// the Pod asks again, so its next ask reaches the next replica. TLS passes
// through: the worker Pods serve their own certificate.
func forwardExecGate() (*devenv.Forwarder, error) {
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	var next atomic.Uint64
	return devenv.Forward(net.JoinHostPort(devenv.NodeIP, "0"), func() (net.Conn, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		addrs, err := readyAddresses(ctx, cs, execGateService, "exec-gate")
		if err != nil {
			return nil, err
		}
		if len(addrs) == 0 {
			return nil, fmt.Errorf("%s has no ready endpoint", execGateService)
		}
		var d net.Dialer
		return d.DialContext(ctx, "tcp", addrs[next.Add(1)%uint64(len(addrs))])
	})
}

// readyAddresses are the host:port of every ready endpoint of service's
// EndpointSlices for its port named port, sorted.
func readyAddresses(ctx context.Context, cs kubernetes.Interface, service, port string) ([]string, error) {
	slices, err := cs.DiscoveryV1().EndpointSlices(devenv.Namespace).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + service})
	if err != nil {
		return nil, fmt.Errorf("list the EndpointSlices of %s: %w", service, err)
	}
	var out []string
	for _, s := range slices.Items {
		for _, p := range s.Ports {
			if p.Name == nil || *p.Name != port || p.Port == nil {
				continue
			}
			for _, e := range s.Endpoints {
				if e.Conditions.Ready == nil || !*e.Conditions.Ready {
					continue
				}
				for _, a := range e.Addresses {
					out = append(out, net.JoinHostPort(a, strconv.Itoa(int(*p.Port))))
				}
			}
		}
	}
	sort.Strings(out)
	return out, nil
}
