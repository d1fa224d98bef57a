package gate

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/remedy-dev/remedy/api/v1alpha1"
)

// NamespaceProtected reads namespace name and applies the rule to it.
func NamespaceProtected(ctx context.Context, kube kubernetes.Interface, name string) (bool, error) {
	ns, err := kube.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return false, fmt.Errorf("read namespace %s: %w", name, err)
	}
	return v1alpha1.IsProtectedNamespace(ns), nil
}
