package v1alpha1

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
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
