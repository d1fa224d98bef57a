package devenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// startControllerManager runs kube-controller-manager as its own envtest user,
// so built-in controllers act as their own ServiceAccounts.
func (e *Env) startControllerManager(o Options) error {
	user, err := e.Kube.AddUser(envtest.User{Name: "system:kube-controller-manager"}, nil)
	if err != nil {
		return fmt.Errorf("add kube-controller-manager user: %w", err)
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		return fmt.Errorf("render kube-controller-manager kubeconfig: %w", err)
	}
	path := filepath.Join(e.tmpDir, "kcm.kubeconfig")
	if err := os.WriteFile(path, kubeconfig, 0o600); err != nil {
		return fmt.Errorf("write kube-controller-manager kubeconfig: %w", err)
	}
	certDir := e.Kube.ControlPlane.APIServer.CertDir
	rootCA := filepath.Join(certDir, "apiserver.crt")
	controllers := append([]string{"deployment-controller", "replicaset-controller", "job-controller",
		"garbage-collector-controller", "serviceaccount-controller", "serviceaccount-token-controller",
		// Fills ClusterRoles with an aggregationRule, such as remedy-drift-resources.
		"clusterrole-aggregation-controller"}, o.ExtraControllers...)
	if o.Node != nil {
		// Pods mount kube-root-ca.crt; Services route to Pods through EndpointSlices.
		rootCA = filepath.Join(certDir, "ca.crt")
		controllers = append(controllers, "root-ca-certificate-publisher-controller", "endpointslice-controller", "pod-garbage-collector-controller",
			// Removes the not-ready taint the kubelet registers its node with.
			"node-lifecycle-controller")
	}
	e.kcm = exec.Command(filepath.Join(o.Assets, "kube-controller-manager"),
		"--kubeconfig="+path,
		"--use-service-account-credentials",
		"--service-account-private-key-file="+filepath.Join(certDir, "sa-signer.key"),
		"--root-ca-file="+rootCA,
		"--leader-elect=false",
		"--secure-port=0",
		"--logging-format=json",
		"--controllers="+strings.Join(controllers, ","),
	)
	e.kcm.Stdout, e.kcm.Stderr = o.Log, o.Log
	if o.DieWithParent {
		e.kcm.SysProcAttr = childSysProcAttr()
	}
	if err := e.kcm.Start(); err != nil {
		return fmt.Errorf("start kube-controller-manager: %w", err)
	}
	e.kcmExited = make(chan struct{})
	go func() { _ = e.kcm.Wait(); close(e.kcmExited) }()
	return nil
}
