// Package v1alpha1 holds Remedy's custom resources (group remedy.dev).
// +kubebuilder:object:generate=true
// +groupName=remedy.dev
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of every Remedy resource.
	GroupVersion = schema.GroupVersion{Group: "remedy.dev", Version: "v1alpha1"}

	// SchemeBuilder registers the Remedy types.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the Remedy types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
