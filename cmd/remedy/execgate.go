package main

import (
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/remedy-dev/remedy/activities/execution"
	"github.com/remedy-dev/remedy/worker"
)

// DefaultExecGateURL is the worker's headless Service in deploy/manager:
// its name resolves to every worker replica, and a Pod asks each.
const DefaultExecGateURL = "https://remedy-worker-gate.remedy-system.svc:9444" + execution.ExecGatePath

// execGateFlags are the worker's exec gate settings.
type execGateFlags struct {
	addr, url, certDir string
}

func (f *execGateFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.addr, "exec-gate-addr", ":9444", "address of the exec gate the job executor's Pods ask immediately before their write (0 disables)")
	fs.StringVar(&f.url, "exec-gate-url", DefaultExecGateURL, "URL at which the job executor's Pods reach the exec gate")
	fs.StringVar(&f.certDir, "exec-gate-cert-dir", "/etc/remedy/exec-gate", "serving certificate of the exec gate: tls.crt, tls.key and ca.crt (handed to the Pods)")
}

// options reads the CA and serves the certificate from its files on every
// handshake, so a renewed certificate is served without a restart. Without
// the files the worker runs without the job executor: it creates no Job.
func (f *execGateFlags) options() (worker.ExecGateOptions, error) {
	if f.addr == "0" {
		return worker.ExecGateOptions{}, nil
	}
	ca, err := os.ReadFile(filepath.Join(f.certDir, "ca.crt"))
	if errors.Is(err, fs.ErrNotExist) {
		ctrl.Log.Info("no exec gate certificate: the job executor is off, its runs fail without creating a Job", "dir", f.certDir)
		return worker.ExecGateOptions{}, nil
	}
	if err != nil {
		return worker.ExecGateOptions{}, fmt.Errorf("read the exec gate's CA: %w", err)
	}
	crt, key := filepath.Join(f.certDir, "tls.crt"), filepath.Join(f.certDir, "tls.key")
	if _, err := tls.LoadX509KeyPair(crt, key); err != nil {
		return worker.ExecGateOptions{}, fmt.Errorf("load the exec gate's certificate: %w", err)
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
		c, err := tls.LoadX509KeyPair(crt, key)
		return &c, err
	}}
	return worker.ExecGateOptions{Addr: f.addr, TLS: cfg, URL: f.url, CA: string(ca)}, nil
}
