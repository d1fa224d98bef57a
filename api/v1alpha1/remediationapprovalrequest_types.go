package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Decision is the outcome of an approval request.
// +kubebuilder:validation:Enum=Approved;Rejected;Expired
type Decision string

const (
	DecisionApproved Decision = "Approved"
	DecisionRejected Decision = "Rejected"
	DecisionExpired  Decision = "Expired"
)

// DecidedVia says which channel carried the decision.
// +kubebuilder:validation:Enum=temporal-signal;temporal-update;kubectl;timer
type DecidedVia string

const (
	DecidedViaSignal  DecidedVia = "temporal-signal"
	DecidedViaUpdate  DecidedVia = "temporal-update"
	DecidedViaKubectl DecidedVia = "kubectl"
	DecidedViaTimer   DecidedVia = "timer"
)

// PolicyEvaluation is the policy verdict that asked for the approval.
type PolicyEvaluation struct {
	// +optional
	PolicyName string `json:"policyName,omitempty"`
	// +optional
	Decision string `json:"decision,omitempty"`
	// +optional
	PolicyHash string `json:"policyHash,omitempty"`
}

// ApprovalContext is what the approver needs to decide.
type ApprovalContext struct {
	// +kubebuilder:validation:MinLength=1
	Reason string `json:"reason"`
	// +kubebuilder:validation:MinLength=1
	Action string    `json:"action"`
	Target ObjectRef `json:"target"`
	// +optional
	PolicyEvaluation *PolicyEvaluation `json:"policyEvaluation,omitempty"`
	// Requester is who asked for the change (the execution's spec.requester.username).
	// +optional
	Requester string `json:"requester,omitempty"`
	// RequireDistinctApprover: only someone other than Requester may approve
	// (the spec's approval.requireDistinctApprover, or the safety policy's
	// require_distinct_approver). Anonymous decisions are refused on every request.
	// +optional
	RequireDistinctApprover bool `json:"requireDistinctApprover,omitempty"`
	// RunbookURL is, for a request an alert's run opened, the alert's
	// runbook_url annotation (http or https only), shown as text.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	RunbookURL string `json:"runbookURL,omitempty"`
	// Summary is the alert's summary annotation, bounded, shown as text.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Summary string `json:"summary,omitempty"`
}

// RemediationApprovalRequestSpec is written once by the workflow and never changes.
type RemediationApprovalRequestSpec struct {
	// SubjectRef is the KubernetesExecution, or the drifted parent, awaiting the decision.
	SubjectRef ObjectRef `json:"subjectRef"`
	// WorkflowID of the waiting workflow; decisions are sent to it.
	// +kubebuilder:validation:MinLength=1
	WorkflowID      string          `json:"workflowID"`
	ApprovalContext ApprovalContext `json:"approvalContext"`
	// RequiredBy is when the request expires.
	RequiredBy metav1.Time `json:"requiredBy"`
	// TTLSecondsAfterFinished is how long the request stays once it is
	// decided and its workflow has closed; then the operator deletes it (0:
	// at once). The worker copies it from the execution that asks; unset:
	// the operator's --ttl-after-finished.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=31536000
	TTLSecondsAfterFinished *int32 `json:"ttlSecondsAfterFinished,omitempty"`
}

// RequestedDecision is a person's kubectl decision on its way to the
// workflow. The admission webhook moves a decision patched by anyone but
// Remedy's worker here, the operator relays it, and only the workflow's own
// record sets status.decision: the request shows the decision the workflow
// took, whichever path reached it first.
type RequestedDecision struct {
	// Decision is what a person may request: the timer alone expires a request.
	// +kubebuilder:validation:Enum=Approved;Rejected
	Decision Decision `json:"decision"`
	// RequestedBy is the authenticated user who patched the decision.
	RequestedBy string      `json:"requestedBy"`
	RequestedAt metav1.Time `json:"requestedAt"`
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
}

// RemediationApprovalRequestStatus carries the decision and its attribution.
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.decision) || (has(self.decision) && self.decision == oldSelf.decision)",message="decision is final once set"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.requestedDecision) || (has(self.requestedDecision) && self.requestedDecision == oldSelf.requestedDecision)",message="requestedDecision is final once set"
type RemediationApprovalRequestStatus struct {
	// Decision is the one the workflow took, recorded by Remedy's worker.
	// +optional
	Decision Decision `json:"decision,omitempty"`
	// +optional
	DecidedBy string `json:"decidedBy,omitempty"`
	// +optional
	DecidedVia DecidedVia `json:"decidedVia,omitempty"`
	// +optional
	DecidedAt *metav1.Time `json:"decidedAt,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	DecisionMessage string `json:"decisionMessage,omitempty"`
	// RequestedDecision is a kubectl decision relayed to the workflow; it
	// stays when another decision reached the workflow first.
	// +optional
	RequestedDecision *RequestedDecision `json:"requestedDecision,omitempty"`
	// Target is spec.approvalContext.target as kind/name, for the printer column.
	// +optional
	Target string `json:"target,omitempty"`
	// TimeRemaining until requiredBy, refreshed while undecided.
	// +optional
	TimeRemaining string `json:"timeRemaining,omitempty"`
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// RemediationApprovalRequest asks a person to approve or reject one change (ADR-040).
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=rar,categories=remedy
// +kubebuilder:printcolumn:name="Decision",type=string,JSONPath=`.status.decision`
// +kubebuilder:printcolumn:name="Action",type=string,JSONPath=`.spec.approvalContext.action`
// +kubebuilder:printcolumn:name="Target",type=string,JSONPath=`.status.target`
// +kubebuilder:printcolumn:name="Requester",type=string,JSONPath=`.spec.approvalContext.requester`
// +kubebuilder:printcolumn:name="Remaining",type=string,JSONPath=`.status.timeRemaining`
// +kubebuilder:printcolumn:name="Subject",type=string,JSONPath=`.spec.subjectRef.name`,priority=1
// +kubebuilder:printcolumn:name="RequiredBy",type=string,JSONPath=`.spec.requiredBy`,priority=1
// +kubebuilder:printcolumn:name="DecidedBy",type=string,JSONPath=`.status.decidedBy`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type RemediationApprovalRequest struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec is immutable"
	Spec   RemediationApprovalRequestSpec   `json:"spec"`
	Status RemediationApprovalRequestStatus `json:"status,omitempty"`
}

// RemediationApprovalRequestList is a list of RemediationApprovalRequest.
// +kubebuilder:object:root=true
type RemediationApprovalRequestList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []RemediationApprovalRequest `json:"items"`
}

func init() {
	SchemeBuilder.Register(&RemediationApprovalRequest{}, &RemediationApprovalRequestList{})
}
