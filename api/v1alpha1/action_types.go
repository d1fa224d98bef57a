package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ActionSpec is empty: no Action object is ever stored.
// +kubebuilder:validation:XValidation:rule="false",message="actions.remedy.dev names Remedy's built-in actions for RBAC (verb execute, resourceName <action>); no Action object can be created"
type ActionSpec struct{}

// Action is the resource that RBAC grants name: verb "execute" on
// actions.remedy.dev with resourceName <action> lets a requester have Remedy
// run that action. Serving the type lets `kubectl auth can-i execute
// actions.remedy.dev/restart` resolve it; the catalog itself is built in.
// +kubebuilder:object:root=true
// +kubebuilder:resource:categories=remedy
type Action struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec ActionSpec `json:"spec"`
}

// ActionList is a list of Action.
// +kubebuilder:object:root=true
type ActionList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Action `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Action{}, &ActionList{})
}
