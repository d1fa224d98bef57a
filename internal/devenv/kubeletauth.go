//go:build linux

package devenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// kubeletAPIServerClient is the user of the API server's kubelet client
// certificate (configureAPIServerForNode).
const kubeletAPIServerClient = "kube-apiserver-kubelet-client"

// authorizeKubeletClients lets the kubelet admit the API server's users (its
// client CA joins the kubelet's) and gives the API server's own kubelet client
// the built-in system:kubelet-api-admin role: with the kubelet's Webhook
// authorization, every client is allowed only what RBAC grants it, so dev's
// Prometheus, which may read nodes/metrics, cannot exec into a Pod.
func (e *Env) authorizeKubeletClients(ctx context.Context, p nodePaths) error {
	apiClientCA, err := os.ReadFile(filepath.Join(e.Kube.ControlPlane.GetAPIServer().CertDir, "client-cert-auth-ca.crt"))
	if err != nil {
		return fmt.Errorf("read the API server's client CA: %w", err)
	}
	own, err := os.ReadFile(p.at("kubelet-client-ca.crt"))
	if err != nil {
		return fmt.Errorf("read the kubelet's client CA: %w", err)
	}
	if err := writeFiles(map[string][]byte{p.at("kubelet-client-ca.crt"): append(append(own, '\n'), apiClientCA...)}); err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(e.Config)
	if err != nil {
		return fmt.Errorf("build client: %w", err)
	}
	_, err = cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "remedy-dev:" + kubeletAPIServerClient},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:kubelet-api-admin"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: kubeletAPIServerClient}},
	}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("bind %s to system:kubelet-api-admin: %w", kubeletAPIServerClient, err)
	}
	return nil
}
