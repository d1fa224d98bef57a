package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RollbackPolicy says when a RemediationRequest undoes the steps it ran.
// +kubebuilder:validation:Enum=OnFailure;OnRequiredPostConditionFailure;Never
type RollbackPolicy string

const (
	// RollbackOnFailure rolls back the completed steps, newest first, when any
	// later step fails or a required postcondition does not hold.
	RollbackOnFailure RollbackPolicy = "OnFailure"
	// RollbackOnRequiredPostConditionFailure rolls back only when a step's
	// required postcondition does not hold; a step that fails otherwise leaves
	// the completed steps' changes in place.
	RollbackOnRequiredPostConditionFailure RollbackPolicy = "OnRequiredPostConditionFailure"
	// RollbackNever leaves every completed step's change in place.
	RollbackNever RollbackPolicy = "Never"
)

// StepRollback says what became of a completed step's change when its
// RemediationRequest rolled back.
type StepRollback string

const (
	// StepRolledBack: the step's change was undone.
	StepRolledBack StepRollback = "RolledBack"
	// StepRollbackFailed: the step's rollback was tried and failed; its change stays.
	StepRollbackFailed StepRollback = "RollbackFailed"
	// StepNoRollback: the step's action has no inverse (a restart); its change stays.
	StepNoRollback StepRollback = "NoRollback"
	// StepNothingToUndo: the step changed nothing (NoChange), so nothing was undone.
	StepNothingToUndo StepRollback = "NothingToUndo"
	// StepKept: the rollback policy keeps the step's change.
	StepKept StepRollback = "Kept"
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
	// RollbackPolicy decides whether completed steps are rolled back, newest
	// first, when a later step fails (OnFailure), only when a required
	// postcondition fails (OnRequiredPostConditionFailure), or never.
	// +optional
	// +kubebuilder:default=OnFailure
	RollbackPolicy RollbackPolicy `json:"rollbackPolicy,omitempty"`
	// TTLSecondsAfterFinished is how long the request stays once it is
	// Completed or Failed; then the operator deletes it, and with it its step
	// executions and approval requests (0: at once). Unset: the operator's
	// --ttl-after-finished. Temporal keeps the histories for its retention.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=31536000
	TTLSecondsAfterFinished *int32 `json:"ttlSecondsAfterFinished,omitempty"`
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
	// RunbookURL is the alert's runbook_url annotation (http or https only), shown as text.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	RunbookURL string `json:"runbookURL,omitempty"`
	// Summary is the alert's summary annotation, bounded, shown as text.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Summary string `json:"summary,omitempty"`
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
	// Rollback says what became of the step's change once the request failed:
	// RolledBack, RollbackFailed, NoRollback, NothingToUndo or Kept. Empty
	// while the request runs and when it succeeded.
	// +optional
	// +kubebuilder:validation:Enum=RolledBack;RollbackFailed;NoRollback;NothingToUndo;Kept
	Rollback StepRollback `json:"rollback,omitempty"`
	// Message is the step's last word: for a rollback that failed, why.
	// +optional
	Message string `json:"message,omitempty"`
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
	// RunID is the Temporal run the operator started under WorkflowID for
	// this object, recorded once. Only
	// that run writes for the object: a run started later under the same,
	// closed, workflow ID, or another run's replayed payload, writes nothing.
	// Only Remedy's operator and worker may write status.
	// +kubebuilder:validation:MaxLength=64
	// +optional
	RunID string `json:"runID,omitempty"`
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Sequence counts the workflow's own writes of this status; see
	// KubernetesExecutionStatus.Sequence.
	// +optional
	Sequence int64 `json:"sequence,omitempty"`
	// +optional
	CurrentStep int32 `json:"currentStep,omitempty"`
	// Progress is steps done of steps, e.g. 2/2, for the printer column.
	// +optional
	Progress string `json:"progress,omitempty"`
	// +optional
	Steps []StepStatus `json:"steps,omitempty"`
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// RemediationRequest runs an ordered list of KubernetesExecutions as child
// workflows, as a saga: every step is checked before the first write, and the
// completed steps are rolled back newest first when a later one fails.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=rr,categories=remedy
// +kubebuilder:printcolumn:name="Steps",type=string,JSONPath=`.status.progress`
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
