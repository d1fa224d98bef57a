package v1alpha1

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Phase is where an execution is in its life.
// +kubebuilder:validation:Enum=Pending;Validating;WaitingApproval;Executing;Verifying;RollbackReady;Completed;Failed
type Phase string

const (
	PhasePending         Phase = "Pending"
	PhaseValidating      Phase = "Validating"
	PhaseWaitingApproval Phase = "WaitingApproval"
	PhaseExecuting       Phase = "Executing"
	PhaseVerifying       Phase = "Verifying"
	PhaseRollbackReady   Phase = "RollbackReady"
	PhaseCompleted       Phase = "Completed"
	PhaseFailed          Phase = "Failed"
)

// Terminal reports whether the phase is final.
func (p Phase) Terminal() bool { return p == PhaseCompleted || p == PhaseFailed }

// Executor says where the action runs.
// +kubebuilder:validation:Enum=inline;job
type Executor string

const (
	// ExecutorInline performs the action from the worker, impersonating the action's ServiceAccount.
	ExecutorInline Executor = "inline"
	// ExecutorJob performs the action in a batch/v1 Job running as the action's ServiceAccount.
	ExecutorJob Executor = "job"
)

// ActionParameters are the typed parameters of every action; each action reads
// only its own fields, and CEL rules on the spec require the ones it needs.
type ActionParameters struct {
	// Replicas for scale.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10000
	Replicas *int32 `json:"replicas,omitempty"`
	// Container for set-image and remove-init-container.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Container string `json:"container,omitempty"`
	// Image for set-image.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Image string `json:"image,omitempty"`
	// Patch is the JSON merge patch for patch.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	Patch *apiextensionsv1.JSON `json:"patch,omitempty"`
	// Scope is the field path migrate-field-ownership takes over
	// (default spec.template.spec.initContainers).
	// +optional
	// +kubebuilder:validation:Pattern=`^[a-zA-Z][a-zA-Z0-9]*(\.[a-zA-Z][a-zA-Z0-9]*)*$`
	Scope string `json:"scope,omitempty"`
	// FieldManager is the server-side-apply field manager that takes ownership (default remedy).
	// +optional
	// +kubebuilder:validation:MaxLength=128
	FieldManager string `json:"fieldManager,omitempty"`
	// Revision for rollout-undo: the Deployment revision (a ReplicaSet's
	// deployment.kubernetes.io/revision) whose pod template to restore.
	// Unset: the revision before the current one, as `kubectl rollout undo`.
	// The rollback of an undo names the revision it replaced.
	// +optional
	// +kubebuilder:validation:Minimum=1
	Revision *int64 `json:"revision,omitempty"`
}

// Condition is a Rego check evaluated before or after the action.
type Condition struct {
	// Name identifies the condition in results.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
	// Rego is a module whose rule `pass` must hold, evaluated against {target, related}.
	// At most 64 KiB (policy.MaxConditionBytes; the admission webhook counts bytes).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=65536
	Rego string `json:"rego"`
	// Required conditions fail the run; optional ones become warnings.
	// +optional
	// +kubebuilder:default=true
	Required bool `json:"required"`
	// Timeout for the condition to hold, retried until then.
	// +optional
	// +kubebuilder:default="30s"
	Timeout *Duration `json:"timeout,omitempty"`
}

// KubernetesExecutionSpec describes one action on one object.
// +kubebuilder:validation:XValidation:rule="self.action != 'scale' || (has(self.parameters) && has(self.parameters.replicas))",message="action scale needs parameters.replicas"
// +kubebuilder:validation:XValidation:rule="self.action != 'scale' || self.target.kind in ['Deployment', 'StatefulSet', 'ReplicaSet']",message="action scale supports target kinds Deployment, StatefulSet and ReplicaSet"
// +kubebuilder:validation:XValidation:rule="self.action != 'restart' || self.target.kind in ['Deployment', 'StatefulSet', 'DaemonSet']",message="action restart supports target kinds Deployment, StatefulSet and DaemonSet"
// +kubebuilder:validation:XValidation:rule="self.action != 'set-image' || (has(self.parameters) && has(self.parameters.container) && has(self.parameters.image))",message="action set-image needs parameters.container and parameters.image"
// +kubebuilder:validation:XValidation:rule="!(self.action in ['set-image', 'remove-init-container', 'migrate-field-ownership']) || self.target.kind in ['Deployment', 'StatefulSet', 'DaemonSet', 'ReplicaSet', 'Job', 'CronJob']",message="this action supports workload target kinds only (Deployment, StatefulSet, DaemonSet, ReplicaSet, Job, CronJob)"
// +kubebuilder:validation:XValidation:rule="self.action != 'remove-init-container' || (has(self.parameters) && has(self.parameters.container))",message="action remove-init-container needs parameters.container"
// +kubebuilder:validation:XValidation:rule="self.action != 'patch' || (has(self.parameters) && has(self.parameters.patch))",message="action patch needs parameters.patch"
// +kubebuilder:validation:XValidation:rule="self.action != 'patch' || (has(self.target.namespace) && size(self.target.namespace) > 0)",message="action patch supports namespaced objects only: set target.namespace"
// +kubebuilder:validation:XValidation:rule="self.action != 'rollout-undo' || (self.target.kind == 'Deployment' && self.target.apiVersion == 'apps/v1')",message="action rollout-undo supports target kind Deployment (apiVersion apps/v1) only"
// +kubebuilder:validation:XValidation:rule="self.action != 'delete-pod' || (self.target.kind == 'Pod' && self.target.apiVersion == 'v1')",message="action delete-pod supports target kind Pod (apiVersion v1) only"
// +kubebuilder:validation:XValidation:rule="!(self.action in ['cordon', 'uncordon']) || (self.target.kind == 'Node' && self.target.apiVersion == 'v1' && (!has(self.target.namespace) || size(self.target.namespace) == 0))",message="actions cordon and uncordon support target kind Node (apiVersion v1, no namespace) only"
// +kubebuilder:validation:XValidation:rule="self.action in ['cordon', 'uncordon'] || (has(self.target.namespace) && size(self.target.namespace) > 0)",message="target.namespace is required for this action"
// +kubebuilder:validation:XValidation:rule="([duration('0s')] + (has(self.preConditions) ? self.preConditions.map(c, (!has(c.timeout) ? duration('30s') : c.timeout.matches('^(0|(([0-9]+([.][0-9]*)?|[.][0-9]+)(ns|us|ms|s|m|h))+)$') ? duration(c.timeout) : duration('0s'))) : []) + (has(self.postConditions) ? self.postConditions.map(c, (!has(c.timeout) ? duration('30s') : c.timeout.matches('^(0|(([0-9]+([.][0-9]*)?|[.][0-9]+)(ns|us|ms|s|m|h))+)$') ? duration(c.timeout) : duration('0s'))) : [])).sum() <= duration('10m')",message="the timeouts of preConditions and postConditions must add up to at most 10m (a condition without one counts its default 30s): Remedy bounds how long one run polls its conditions"
type KubernetesExecutionSpec struct {
	// Action to perform.
	// +kubebuilder:validation:Enum=scale;restart;set-image;patch;delete-pod;cordon;uncordon;remove-init-container;migrate-field-ownership;rollout-undo
	Action string `json:"action"`
	// Target is the object the action changes.
	Target ObjectRef `json:"target"`
	// Parameters of the action.
	// +optional
	Parameters *ActionParameters `json:"parameters,omitempty"`
	// DryRun asks for a server-side dry-run of the exact write before executing.
	// +optional
	DryRun bool `json:"dryRun,omitempty"`
	// PreConditions must hold before the action runs. At most 8; the
	// timeouts of all pre- and postconditions add up to at most 10m.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=8
	PreConditions []Condition `json:"preConditions,omitempty"`
	// PostConditions must hold after the action ran. At most 8.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=8
	PostConditions []Condition `json:"postConditions,omitempty"`
	// Approval asks for a human decision before executing.
	// +optional
	Approval *ApprovalSpec `json:"approval,omitempty"`
	// Executor runs the action inline in the worker or in a Job.
	// +optional
	// +kubebuilder:default=inline
	Executor Executor `json:"executor,omitempty"`
	// Timeout bounds the execution step.
	// +optional
	// +kubebuilder:default="5m"
	Timeout *Duration `json:"timeout,omitempty"`
	// MaxRetries of the execution step.
	// +optional
	// +kubebuilder:default=2
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10
	MaxRetries *int32 `json:"maxRetries,omitempty"`
	// RollbackWindow is how long a finished run stays RollbackReady, accepting the rollback signal.
	// +optional
	// +kubebuilder:default="1h"
	RollbackWindow *Duration `json:"rollbackWindow,omitempty"`
	// TTLSecondsAfterFinished is how long the execution stays once it is
	// Completed or Failed; then the operator deletes it (0: at once). Unset:
	// the operator's --ttl-after-finished. Ignored on a RemediationRequest's
	// steps, which go with their request. Temporal keeps the run's history
	// for its namespace's retention either way.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=31536000
	TTLSecondsAfterFinished *int32 `json:"ttlSecondsAfterFinished,omitempty"`
	// RemediationRequestRef is set on steps of a RemediationRequest.
	// +optional
	RemediationRequestRef *LocalRef `json:"remediationRequestRef,omitempty"`
	// Requester is who asked for the change. Set by Remedy's admission webhook
	// on create; any value in the request body is overwritten.
	// +optional
	Requester *Requester `json:"requester,omitempty"`
}

// PolicyValidation is the result of the Rego safety policy.
type PolicyValidation struct {
	PolicyName string `json:"policyName,omitempty"`
	// PolicyHash is the sha256 of the evaluated policy source.
	// +optional
	PolicyHash       string `json:"policyHash,omitempty"`
	Allowed          bool   `json:"allowed"`
	RequiredApproval bool   `json:"requiredApproval"`
	// +optional
	RequiredDryRun bool `json:"requiredDryRun,omitempty"`
	// +optional
	Messages []string `json:"messages,omitempty"`
}

// DryRunResults is the outcome of the server-side dry-run.
type DryRunResults struct {
	Performed bool `json:"performed"`
	Success   bool `json:"success"`
	// EstimatedImpact summarizes before -> after, e.g. "replicas: 3 -> 5".
	// +optional
	EstimatedImpact string `json:"estimatedImpact,omitempty"`
	// +optional
	Warnings []string `json:"warnings,omitempty"`
}

// ConditionResult records one pre- or postcondition evaluation.
type ConditionResult struct {
	Name     string `json:"name"`
	Required bool   `json:"required"`
	Passed   bool   `json:"passed"`
	// +optional
	Attempts int32 `json:"attempts,omitempty"`
	// Message of the last evaluation.
	// +optional
	Message string `json:"message,omitempty"`
	// +optional
	EvaluatedAt *metav1.Time `json:"evaluatedAt,omitempty"`
}

// ValidationResults records each validation step in the order it ran.
type ValidationResults struct {
	// +optional
	ParameterValidation *bool `json:"parameterValidation,omitempty"`
	// RequesterValidation says whether spec.requester may have the action run
	// (verb execute on actions.remedy.dev/<action>, or every verb the action uses).
	// +optional
	RequesterValidation *bool `json:"requesterValidation,omitempty"`
	// +optional
	RBACValidation *bool `json:"rbacValidation,omitempty"`
	// +optional
	ResourceExists *bool `json:"resourceExists,omitempty"`
	// +optional
	PolicyValidation *PolicyValidation `json:"policyValidation,omitempty"`
	// +optional
	DryRunResults *DryRunResults `json:"dryRunResults,omitempty"`
	// +optional
	PreConditionResults []ConditionResult `json:"preConditionResults,omitempty"`
	// +optional
	PostConditionResults []ConditionResult `json:"postConditionResults,omitempty"`
}

// ResourceChange is one object the action changed.
type ResourceChange struct {
	Kind string `json:"kind"`
	// +optional
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	// Action is what happened, e.g. scaled.
	Action string `json:"action"`
	// +optional
	Before string `json:"before,omitempty"`
	// +optional
	After string `json:"after,omitempty"`
}

// ExecutionResults records what the executing step did.
type ExecutionResults struct {
	// +optional
	JobName string `json:"jobName,omitempty"`
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`
	// +optional
	EndTime *metav1.Time `json:"endTime,omitempty"`
	// +optional
	Duration string `json:"duration,omitempty"`
	// +optional
	ResourcesAffected []ResourceChange `json:"resourcesAffected,omitempty"`
	// +optional
	Logs string `json:"logs,omitempty"`
	// +optional
	RetriesAttempted int32 `json:"retriesAttempted,omitempty"`
}

// RollbackInformation is the inverse action captured from the before-image.
type RollbackInformation struct {
	Available bool `json:"available"`
	// +optional
	RollbackAction string `json:"rollbackAction,omitempty"`
	// RollbackParameters are the inverse's parameters as the requester may
	// read them: absent when they may not get the target (Redacted says so),
	// and never an env entry's valueFrom. The run keeps the real inverse.
	// +optional
	RollbackParameters *ActionParameters `json:"rollbackParameters,omitempty"`
	// ParametersDigest is the HMAC-SHA256 of the real inverse's parameters
	// under a key only the run holds: the write gate lets a rollback through
	// only with parameters that match it.
	// +optional
	ParametersDigest string `json:"parametersDigest,omitempty"`
	// Redacted says why RollbackParameters are not shown.
	// +optional
	Redacted string `json:"redacted,omitempty"`
	// +optional
	EstimatedRollbackDuration string `json:"estimatedRollbackDuration,omitempty"`
	// Reason explains why no rollback is available.
	// +optional
	Reason string `json:"reason,omitempty"`
}

// PhaseTransition records one entry into a phase, so even phases that last
// milliseconds are visible after the fact.
type PhaseTransition struct {
	Phase Phase `json:"phase"`
	// +optional
	Reason string `json:"reason,omitempty"`
	// +optional
	Message string `json:"message,omitempty"`
	// Time the phase was entered, to the microsecond: most phases last
	// less than a second.
	Time metav1.MicroTime `json:"time"`
}

// KubernetesExecutionStatus is the phase object the workflow's status query returns, mirrored here.
type KubernetesExecutionStatus struct {
	// +optional
	Phase Phase `json:"phase,omitempty"`
	// Reason is a CamelCase word naming why the run is in its phase, e.g. Forbidden.
	// +optional
	Reason string `json:"reason,omitempty"`
	// +optional
	Message string `json:"message,omitempty"`
	// +optional
	WorkflowID string `json:"workflowID,omitempty"`
	// RunID is the Temporal run started under WorkflowID for this object (by
	// the operator, or for a step by its request's run), recorded once. Only
	// that run writes for the object: a run started later under the same,
	// closed, workflow ID, or another run's replayed payload, writes nothing.
	// Only Remedy's operator and worker may write status.
	// +kubebuilder:validation:MaxLength=64
	// +optional
	RunID string `json:"runID,omitempty"`
	// Requester is the username the run acts for (spec.requester).
	// +optional
	Requester string `json:"requester,omitempty"`
	// Target is spec.target as kind/name, for the printer column.
	// +optional
	Target string `json:"target,omitempty"`
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Sequence counts the workflow's own writes of this status, one per phase
	// change; a write carrying a lower sequence than the stored one is stale and
	// dropped. Zero: none of the workflow's writes has landed yet, so the
	// operator mirrors its status query instead.
	// +optional
	Sequence int64 `json:"sequence,omitempty"`
	// PhaseTransitions lists every phase the run entered, in order.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	PhaseTransitions []PhaseTransition `json:"phaseTransitions,omitempty"`
	// +optional
	ValidationResults *ValidationResults `json:"validationResults,omitempty"`
	// +optional
	ApprovalRequestRef *LocalRef `json:"approvalRequestRef,omitempty"`
	// +optional
	ExecutionResults *ExecutionResults `json:"executionResults,omitempty"`
	// +optional
	RollbackInformation *RollbackInformation `json:"rollbackInformation,omitempty"`
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// KubernetesExecution runs one remediation action through a durable workflow:
// validate, dry-run, preconditions, approval, execute, postconditions, rollback capture.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=kexec,categories=remedy
// +kubebuilder:printcolumn:name="Action",type=string,JSONPath=`.spec.action`
// +kubebuilder:printcolumn:name="Target",type=string,JSONPath=`.status.target`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Requester",type=string,JSONPath=`.spec.requester.username`,priority=1
// +kubebuilder:printcolumn:name="Workflow",type=string,JSONPath=`.status.workflowID`,priority=1
type KubernetesExecution struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec cannot change once the run started; create a new execution instead.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec is immutable: create a new KubernetesExecution"
	Spec   KubernetesExecutionSpec   `json:"spec"`
	Status KubernetesExecutionStatus `json:"status,omitempty"`
}

// KubernetesExecutionList is a list of KubernetesExecution.
// +kubebuilder:object:root=true
type KubernetesExecutionList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []KubernetesExecution `json:"items"`
}

func init() {
	SchemeBuilder.Register(&KubernetesExecution{}, &KubernetesExecutionList{})
}
