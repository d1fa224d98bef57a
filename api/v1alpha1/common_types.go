package v1alpha1

// ConditionReady is the condition every Remedy resource reports.
const ConditionReady = "Ready"

// ObjectRef names one Kubernetes object. Namespace is empty for cluster-scoped kinds.
type ObjectRef struct {
	// APIVersion of the object, e.g. apps/v1.
	// +kubebuilder:validation:MinLength=1
	APIVersion string `json:"apiVersion"`
	// Kind of the object, e.g. Deployment.
	// +kubebuilder:validation:MinLength=1
	Kind string `json:"kind"`
	// Namespace of the object; empty for cluster-scoped objects such as Nodes.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace,omitempty"`
	// Name of the object.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// String renders the reference as namespace/kind/name, the RemedyTarget search attribute format.
func (r ObjectRef) String() string { return r.Namespace + "/" + r.Kind + "/" + r.Name }

// LocalRef names an object by name, in the referrer's namespace unless Namespace is set.
type LocalRef struct {
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// +optional
	Namespace string `json:"namespace,omitempty"`
}

// ApprovalSpec asks for a human decision before the change is made.
type ApprovalSpec struct {
	// Required forces an approval even when the policy does not ask for one.
	// +optional
	Required bool `json:"required,omitempty"`
	// Timeout after which an undecided approval expires. When unset, the policy's
	// approval_timeout, then the namespace ConfigMap remedy-config key approvalTimeout, then 15m apply.
	// +optional
	Timeout *Duration `json:"timeout,omitempty"`
	// RequireDistinctApprover lets only someone other than the requester
	// (spec.requester.username) approve; the requester may still reject. It
	// only makes the safety policy stricter: false or unset keeps the policy's
	// require_distinct_approver, which is true by default for approvals the
	// policy requires. KubernetesExecutions and RemediationRequest steps only:
	// a reload has no requester.
	// +optional
	RequireDistinctApprover bool `json:"requireDistinctApprover,omitempty"`
}

// Requester is the authenticated user a change is made for. The operator's
// admission webhook writes it from the API server's authentication on create,
// whatever the body said; only Remedy's worker passes one on (to the steps of
// a RemediationRequest).
type Requester struct {
	// Username as the API server authenticated it.
	// +kubebuilder:validation:MinLength=1
	Username string `json:"username"`
	// UID of the user, when the authenticator provides one.
	// +optional
	UID string `json:"uid,omitempty"`
	// Groups of the user.
	// +optional
	Groups []string `json:"groups,omitempty"`
	// Extra is the authenticator's extra information about the user (a
	// scoped token's scopes, for example). Every SubjectAccessReview Remedy
	// makes for the user carries it, so a scoped credential is judged as
	// scoped, never as its full user.
	// +optional
	Extra map[string][]string `json:"extra,omitempty"`
}
