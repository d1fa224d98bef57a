package gate

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	kv1 "github.com/remedy-dev/remedy/api/kausality/v1alpha1"
)

// Kausality policies are cluster-scoped and admin-only: their reporting
// block is where the worker finds a drift's callback URLs.
// +kubebuilder:rbac:groups=kausality.io,resources=kausalities,verbs=get;list
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get

// DriftSettings is what configuration says about the drifts of one parent:
// where they are reported and whether a person is asked. Only the worker's
// flags and the Kausality policies decide it, never a drift signal.
type DriftSettings struct {
	CallbackURLs    []string `json:"callbackURLs,omitempty"`
	RequestApproval bool     `json:"requestApproval,omitempty"`
}

// DriftConfig resolves DriftSettings, read again each time it is asked.
type DriftConfig struct {
	// Reader lists Kausality policies and reads namespaces, as the worker.
	Reader ctrlclient.Reader
	// CallbackURLs and RequestApproval are the worker's flags
	// (--drift-callback-url, --drift-approval): they apply to every parent.
	CallbackURLs    []string
	RequestApproval bool
}

// Settings unions the worker's flags with the reporting of every Kausality
// policy that selects the parent's namespace.
func (c *DriftConfig) Settings(ctx context.Context, namespace string) (DriftSettings, error) {
	s := DriftSettings{CallbackURLs: slices.Clone(c.CallbackURLs), RequestApproval: c.RequestApproval}
	var list kv1.KausalityList
	if err := c.Reader.List(ctx, &list); err != nil {
		return DriftSettings{}, fmt.Errorf("list Kausality policies: %w", err)
	}
	var labels map[string]string
	if namespace != "" {
		var ns corev1.Namespace
		if err := c.Reader.Get(ctx, ctrlclient.ObjectKey{Name: namespace}, &ns); err != nil {
			return DriftSettings{}, fmt.Errorf("read namespace %s: %w", namespace, err)
		}
		labels = ns.Labels
	}
	for _, p := range list.Items {
		r := p.Spec.Reporting
		if r == nil || p.DeletionTimestamp != nil || !p.Spec.SelectsNamespace(namespace, labels) {
			continue
		}
		for _, u := range r.CallbackURLs {
			if !slices.Contains(s.CallbackURLs, u) {
				s.CallbackURLs = append(s.CallbackURLs, u)
			}
		}
		s.RequestApproval = s.RequestApproval || r.RequestApproval
	}
	return s, nil
}
