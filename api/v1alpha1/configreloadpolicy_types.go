package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The matches() guard leaves values that are not durations to Duration's own
// rule: this one then holds instead of failing with a runtime error, which
// would refuse even status writes to a bad object stored before the check.

// RetrySpec bounds the backoff between restart attempts.
// +kubebuilder:validation:XValidation:rule="!has(self.initialInterval) || !has(self.maxInterval) || !(self.initialInterval.matches('^(0|(([0-9]+([.][0-9]*)?|[.][0-9]+)(ns|us|ms|s|m|h))+)$') && self.maxInterval.matches('^(0|(([0-9]+([.][0-9]*)?|[.][0-9]+)(ns|us|ms|s|m|h))+)$')) || duration(self.initialInterval) <= duration(self.maxInterval)",message="retry.initialInterval must not exceed retry.maxInterval"
type RetrySpec struct {
	// InitialInterval is the wait before the second restart attempt.
	// +optional
	// +kubebuilder:default="1s"
	InitialInterval *Duration `json:"initialInterval,omitempty"`
	// MaxInterval caps the doubling wait between attempts.
	// +optional
	// +kubebuilder:default="30s"
	MaxInterval *Duration `json:"maxInterval,omitempty"`
}

// ConfigReloadPolicySpec selects ConfigMaps and the workloads they restart.
type ConfigReloadPolicySpec struct {
	// ConfigMapSelector picks the watched ConfigMaps in this namespace.
	ConfigMapSelector metav1.LabelSelector `json:"configMapSelector"`
	// WorkloadSelector picks the Deployments, StatefulSets and DaemonSets to restart.
	WorkloadSelector metav1.LabelSelector `json:"workloadSelector"`
	// ScopeLabel: a ConfigMap restarts only workloads with the same value of this label.
	// +optional
	// +kubebuilder:default=env
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	ScopeLabel string `json:"scopeLabel,omitempty"`
	// Debounce coalesces changes that arrive within this window into one restart.
	// +optional
	// +kubebuilder:default="5s"
	Debounce *Duration `json:"debounce,omitempty"`
	// MaxWait bounds how long a pending restart waits: each change within
	// the debounce window pushes the restart a window later, but never
	// later than maxWait after the first change it carries, so endless
	// edits cannot starve it. At most 1h; a value below debounce acts as
	// debounce (restarts stay at least a window apart).
	// +optional
	// +kubebuilder:default="5m"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^(0|(([0-9]+([.][0-9]*)?|[.][0-9]+)(ns|us|ms|s|m|h))+)$') || duration(self) <= duration('1h')",message="must be at most 1h"
	MaxWait *Duration `json:"maxWait,omitempty"`
	// +optional
	// +kubebuilder:default={initialInterval:"1s",maxInterval:"30s"}
	Retry *RetrySpec `json:"retry,omitempty"`
	// +optional
	// +kubebuilder:validation:XValidation:rule="!has(self.requireDistinctApprover) || !self.requireDistinctApprover",message="requireDistinctApprover applies to KubernetesExecutions and RemediationRequests: a reload has no requester"
	Approval *ApprovalSpec `json:"approval,omitempty"`
	// Author is who created or last changed the policy: its restarts are
	// made in their name. Set by Remedy's admission webhook from the
	// authenticated user on every create and update; a value in the body is
	// ignored. The author must hold "execute" on actions.remedy.dev/restart
	// in the namespace (or patch the selected workload kinds themselves), at
	// admission and again at each restart.
	// +optional
	Author *Requester `json:"author,omitempty"`
}

// WorkloadRestart records the last restart of one workload.
type WorkloadRestart struct {
	// +kubebuilder:validation:Enum=Deployment;StatefulSet;DaemonSet
	Kind string `json:"kind"`
	Name string `json:"name"`
	// +optional
	ConfigHash string `json:"configHash,omitempty"`
	// +optional
	LastRestart *metav1.Time `json:"lastRestart,omitempty"`
}

// ConfigReloadPolicyStatus lists what the policy watches and what it restarted.
type ConfigReloadPolicyStatus struct {
	// +optional
	WatchedConfigMaps []string `json:"watchedConfigMaps,omitempty"`
	// +optional
	Workloads []WorkloadRestart `json:"workloads,omitempty"`
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ConfigReloadPolicy restarts workloads, debounced, when the ConfigMaps they use change.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=crp,categories=remedy
// +kubebuilder:printcolumn:name="ScopeLabel",type=string,JSONPath=`.spec.scopeLabel`
// +kubebuilder:printcolumn:name="Debounce",type=string,JSONPath=`.spec.debounce`
// +kubebuilder:printcolumn:name="MaxWait",type=string,JSONPath=`.spec.maxWait`,priority=1
// +kubebuilder:printcolumn:name="Author",type=string,JSONPath=`.spec.author.username`,priority=1
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ConfigReloadPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ConfigReloadPolicySpec   `json:"spec"`
	Status ConfigReloadPolicyStatus `json:"status,omitempty"`
}

// ConfigReloadPolicyList is a list of ConfigReloadPolicy.
// +kubebuilder:object:root=true
type ConfigReloadPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ConfigReloadPolicy `json:"items"`
}

func init() {
	SchemeBuilder.Register(&ConfigReloadPolicy{}, &ConfigReloadPolicyList{})
}
