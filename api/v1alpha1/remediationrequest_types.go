package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RollbackPolicy says when a RemediationRequest undoes the steps it ran.
// +kubebuilder:validation:Enum=OnRequiredPostConditionFailure;Never
type RollbackPolicy string

const (
	RollbackOnRequiredPostConditionFailure RollbackPolicy = "OnRequiredPostConditionFailure"
	RollbackNever                          RollbackPolicy = "Never"
)

// RemediationStep is one action of a RemediationRequest.
type RemediationStep struct {
	// Name of the step; the child KubernetesExecution is named <request>-<step>.
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:MaxLength=40
	Name string `json:"name"`
	// Execution is the child's spec.
	Execution KubernetesExecutionSpec `json:"execution"`
}

// RemediationRequestSpec is an ordered list of actions.
type RemediationRequestSpec struct {
	// Steps run one after another as child workflows.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=20
	// +listType=map
	// +listMapKey=name
	Steps []RemediationStep `json:"steps"`
	// RollbackPolicy decides whether finished steps are rolled back when a required postcondition fails.
	// +optional
	// +kubebuilder:default=OnRequiredPostConditionFailure
	RollbackPolicy RollbackPolicy `json:"rollbackPolicy,omitempty"`
	// Requester is who asked for the change, set by Remedy's admission webhook
	// on create (the body's value is overwritten); every step runs for it.
	// +optional
	Requester *Requester `json:"requester,omitempty"`
	// Alert, set only by Remedy's worker, is the alert and RemediationRule
	// that started the request; the requester is then the rule's author.
	// +optional
	Alert *AlertOrigin `json:"alert,omitempty"`
}

// AlertOrigin is the Alertmanager alert a RemediationRule acted on.
type AlertOrigin struct {
	// Rule is the RemediationRule's name, in the request's namespace.
	// +kubebuilder:validation:MinLength=1
	Rule        string `json:"rule"`
	Fingerprint string `json:"fingerprint"`
	// +optional
	GeneratorURL string `json:"generatorURL,omitempty"`
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
}

// StepStatus mirrors one child execution.
type StepStatus struct {
	Name string `json:"name"`
	// +optional
	ExecutionRef *LocalRef `json:"executionRef,omitempty"`
	// +optional
	Phase Phase `json:"phase,omitempty"`
	// +optional
	Reason string `json:"reason,omitempty"`
	// +optional
	RolledBack bool `json:"rolledBack,omitempty"`
}

// RemediationRequestStatus is the phase object of the remediation workflow.
type RemediationRequestStatus struct {
	// +optional
	Phase Phase `json:"phase,omitempty"`
	// +optional
	Reason string `json:"reason,omitempty"`
	// +optional
	Message string `json:"message,omitempty"`
	// +optional
	WorkflowID string `json:"workflowID,omitempty"`
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Sequence counts the workflow's own writes of this status; see
	// KubernetesExecutionStatus.Sequence.
	// +optional
	Sequence int64 `json:"sequence,omitempty"`
	// +optional
	CurrentStep int32 `json:"currentStep,omitempty"`
	// +optional
	Steps []StepStatus `json:"steps,omitempty"`
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// RemediationRequest runs an ordered list of KubernetesExecutions as child workflows,
// with rollback when a required postcondition fails.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=rr,categories=remedy
// +kubebuilder:printcolumn:name="Steps",type=integer,JSONPath=`.status.currentStep`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type RemediationRequest struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec is immutable: create a new RemediationRequest"
	Spec   RemediationRequestSpec   `json:"spec"`
	Status RemediationRequestStatus `json:"status,omitempty"`
}

// RemediationRequestList is a list of RemediationRequest.
// +kubebuilder:object:root=true
type RemediationRequestList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []RemediationRequest `json:"items"`
}

func init() {
	SchemeBuilder.Register(&RemediationRequest{}, &RemediationRequestList{})
}
