package activities

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// IsProtectedNamespace is the protected-namespace rule every Remedy write
// obeys: kube-system, and namespaces labelled remedy.dev/protected=true.
func IsProtectedNamespace(ns *corev1.Namespace) bool {
	return ns.Name == "kube-system" || ns.Labels[ProtectedLabel] == "true"
}

// ProtectedNamespaceMessage says why a write to namespace name is refused.
func ProtectedNamespaceMessage(name string) string {
	return fmt.Sprintf("namespace %s is protected (kube-system, or labelled %s=true)", name, ProtectedLabel)
}

// namespaceProtected reads namespace name and applies the rule to it.
func namespaceProtected(ctx context.Context, kube kubernetes.Interface, name string) (bool, error) {
	ns, err := kube.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return false, fmt.Errorf("read namespace %s: %w", name, err)
	}
	return IsProtectedNamespace(ns), nil
}
