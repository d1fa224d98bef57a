package compose

import (
	"crypto/tls"
	"fmt"
	"net"

	"github.com/remedy-dev/remedy/activities/execution"
	"github.com/remedy-dev/remedy/internal/pki"
	"github.com/remedy-dev/remedy/worker"
)

// ExecGate listens for the job executor's Pods on host, with a throwaway
// CA's certificate for that address.
func ExecGate(host string) (worker.ExecGateOptions, error) {
	ca, err := pki.NewCA("remedy-exec-gate-ca")
	if err != nil {
		return worker.ExecGateOptions{}, err
	}
	pair, err := ca.ServerFor("remedy-exec-gate", []net.IP{net.ParseIP(host)}, nil)
	if err != nil {
		return worker.ExecGateOptions{}, err
	}
	cert, err := pair.TLS()
	if err != nil {
		return worker.ExecGateOptions{}, err
	}
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return worker.ExecGateOptions{}, fmt.Errorf("listen for the exec gate: %w", err)
	}
	return worker.ExecGateOptions{Listener: l, TLS: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		URL: "https://" + l.Addr().String() + execution.ExecGatePath, CA: string(ca.CertPEM)}, nil
}
