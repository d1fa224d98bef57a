package worker

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/remedy-dev/remedy/activities/execution"
)

// ExecGateOptions serve the exec gate the job executor's Pods ask
// immediately before their write (activities/execution/job_gate.go).
type ExecGateOptions struct {
	// Addr is where the worker listens ("" : it does not serve; its Jobs'
	// Pods then find no run to answer them on this worker).
	Addr string
	// Listener, when set, is used instead of Addr (tests and make dev pick a free port).
	Listener net.Listener
	// TLS holds the serving certificate.
	TLS *tls.Config
	// URL is where the Pods reach the gate (every worker replica behind its
	// name), CA the PEM of the CA that signs the serving certificate. Without
	// a URL the job executor creates no Job.
	URL string
	CA  string
}

// serveExecGate listens on o.Addr and returns the server to run beside the worker.
func serveExecGate(gate *execution.ExecGate, o ExecGateOptions) (func(stop <-chan struct{}), error) {
	if o.TLS == nil {
		return nil, errors.New("the exec gate needs a serving certificate: it is HTTPS only")
	}
	l := o.Listener
	if l == nil {
		var err error
		if l, err = net.Listen("tcp", o.Addr); err != nil {
			return nil, fmt.Errorf("serve the exec gate: %w", err)
		}
	}
	mux := http.NewServeMux()
	mux.Handle(execution.ExecGatePath, gate)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, TLSConfig: o.TLS}
	log := ctrllog.Log.WithName("exec-gate")
	log.Info("serving the exec gate", "addr", l.Addr().String(), "url", o.URL)
	return func(stop <-chan struct{}) {
		go func() { <-stop; _ = srv.Close() }()
		if err := srv.ServeTLS(l, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error(err, "serve the exec gate", "addr", o.Addr)
		}
	}, nil
}
