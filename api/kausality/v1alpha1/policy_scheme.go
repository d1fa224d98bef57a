package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is kausality's API group, shared with DriftReports.
	GroupVersion = schema.GroupVersion{Group: "kausality.io", Version: "v1alpha1"}

	// KausalityResource is the policy resource, for dynamic clients.
	KausalityResource = GroupVersion.WithResource("kausalities")

	// SchemeBuilder registers the Kausality policy types.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the Kausality policy types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func init() {
	SchemeBuilder.Register(&Kausality{}, &KausalityList{})
}
