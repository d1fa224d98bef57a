package devenv

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// The layout of Options.StateDir.
const (
	stateEtcd      = "etcd"
	stateAPIServer = "kube-apiserver"
	stateServingCA = "serving-ca.crt"
	stateTemporal  = "temporal.db"
)

// useStateDir points etcd's data and kube-apiserver's certificates into dir
// and says whether an earlier run left them there. envtest only removes the
// directories it allocated itself, so Stop keeps these.
func (e *Env) useStateDir(dir string) (resumed bool, err error) {
	etcdDir, certDir := filepath.Join(dir, stateEtcd), filepath.Join(dir, stateAPIServer)
	for _, d := range []string{etcdDir, certDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return false, fmt.Errorf("create state directory %s: %w", d, err)
		}
	}
	if e.Kube.ControlPlane.Etcd == nil {
		e.Kube.ControlPlane.Etcd = &envtest.Etcd{}
	}
	e.Kube.ControlPlane.Etcd.DataDir = etcdDir
	api := e.Kube.ControlPlane.GetAPIServer()
	api.CertDir = certDir

	_, err = os.Stat(filepath.Join(etcdDir, "member"))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		// A first run: envtest makes the certificates and saveServingCA keeps their CA.
		return false, nil
	case err != nil:
		return false, fmt.Errorf("read state directory %s: %w", dir, err)
	}
	// envtest writes the serving certificate only where none exists and
	// otherwise does not know the CA that signed it; the kept one does.
	ca, err := os.ReadFile(filepath.Join(dir, stateServingCA))
	if err != nil {
		return false, fmt.Errorf("state directory %s holds etcd data but not the API server's CA (delete the directory to start afresh): %w", dir, err)
	}
	api.SecureServing.CA = ca
	return true, nil
}

func saveServingCA(dir string, ca []byte) error {
	if err := os.WriteFile(filepath.Join(dir, stateServingCA), ca, 0o600); err != nil {
		return fmt.Errorf("save the API server's CA: %w", err)
	}
	return nil
}
