package gate

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"

	"github.com/remedy-dev/remedy/api/v1alpha1"
)

// PolicyReads serves the two reads every policy evaluation makes (the
// target's namespace, for its labels, and the policy ConfigMaps) from the
// worker's watches. Validation and the write gate evaluate the policy for
// every run, and a watch is behind the API server by milliseconds, not by
// anything a person could do in between: an approval takes longer.
type PolicyReads struct {
	Namespaces corelisters.NamespaceLister
	// Policies lists ConfigMaps of the action namespace labelled PolicyLabel=true.
	Policies corelisters.ConfigMapNamespaceLister
	// Accounts lists the action ServiceAccounts (labelled ActionLabel) of
	// the action namespace; nil reads them from the API server.
	Accounts corelisters.ServiceAccountNamespaceLister
}

// serviceAccountExists reads the action's account from the watch when it is
// there. One the watch lacks (deleted, created a moment ago, or not
// labelled) is read from the API server, so a missing account is always
// confirmed live before a run fails for it.
func (v *Validation) serviceAccountExists(ctx context.Context, name string) error {
	if v.Reads != nil && v.Reads.Accounts != nil {
		if _, err := v.Reads.Accounts.Get(name); err == nil {
			return nil
		}
	}
	_, err := v.Kube.CoreV1().ServiceAccounts(v.ActionNamespace).Get(ctx, name, metav1.GetOptions{})
	return err
}

// namespace reads namespace name, from the watch when there is one.
func (v *Validation) namespace(ctx context.Context, name string) (*corev1.Namespace, error) {
	if v.Reads != nil {
		ns, err := v.Reads.Namespaces.Get(name)
		if err == nil {
			return ns, nil
		}
	}
	// A namespace created a moment ago may not have reached the watch yet.
	ns, err := v.Kube.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("read namespace %s: %w", name, err)
	}
	return ns, nil
}

// policyMaps lists the safety policy's ConfigMaps.
func (v *Validation) policyMaps(ctx context.Context) ([]*corev1.ConfigMap, error) {
	sel := labels.SelectorFromSet(labels.Set{v1alpha1.PolicyLabel: "true"})
	if v.Reads != nil {
		return v.Reads.Policies.List(sel)
	}
	list, err := v.Kube.CoreV1().ConfigMaps(v.ActionNamespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return nil, fmt.Errorf("list policy ConfigMaps: %w", err)
	}
	out := make([]*corev1.ConfigMap, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out, nil
}

// ObservePolicy checks the safety policy as the policy ConfigMaps are now,
// for v.LastGood: the worker's watch calls it on every change. Not a method:
// the worker registers Validation's exported methods as activities.
func ObservePolicy(ctx context.Context, v *Validation) {
	if v.LastGood == nil {
		return
	}
	cms, err := v.policyMaps(ctx)
	if err != nil {
		v.LastGood.Log.Error(err, "read the policy ConfigMaps")
		return
	}
	v.LastGood.Observe(ctx, v.Policy, cms)
}
