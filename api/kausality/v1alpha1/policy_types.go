package v1alpha1

import (
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8slabels "k8s.io/apimachinery/pkg/labels"
)

// ResourceRule names kinds the drift webhook watches, by API group and
// resource (plural) name.
// +kubebuilder:object:generate=true
// +kubebuilder:validation:XValidation:rule="self.apiGroups.all(g, g != '*')",message="apiGroups cannot contain '*', use explicit group names"
// +kubebuilder:validation:XValidation:rule="self.resources.all(r, !r.contains('/'))",message="resources cannot name subresources; status updates are watched with their resource"
// +kubebuilder:validation:XValidation:rule="!has(self.excluded) || size(self.excluded) == 0 || self.resources.exists(r, r == '*')",message="excluded can only be used when resources contains '*'"
// +kubebuilder:validation:XValidation:rule="!self.apiGroups.exists(g, size(g) == 0) || !(self.resources.exists(r, r == 'secrets') || (self.resources.exists(r, r == '*') && !(has(self.excluded) && self.excluded.exists(e, e == 'secrets'))))",message="a Kausality policy may not route Secrets through the drift webhook: their data would go into drift signals and DriftReports; name other core resources, or add secrets to excluded"
type ResourceRule struct {
	// APIGroups: "" is the core group; "*" is not allowed.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=10
	// +kubebuilder:validation:items:MaxLength=253
	APIGroups []string `json:"apiGroups"`
	// Resources: plural resource names, or "*" for every resource of the groups.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=50
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=253
	Resources []string `json:"resources"`
	// Excluded subtracts resources from a "*".
	// +optional
	// +kubebuilder:validation:MaxItems=50
	// +kubebuilder:validation:items:MaxLength=253
	Excluded []string `json:"excluded,omitempty"`
}

// NamespaceSelector picks namespaces by name or by label.
// +kubebuilder:object:generate=true
// +kubebuilder:validation:XValidation:rule="!(has(self.names) && size(self.names) > 0 && has(self.selector))",message="names and selector are mutually exclusive"
type NamespaceSelector struct {
	// Names lists namespaces explicitly.
	// +optional
	// +kubebuilder:validation:MaxItems=100
	// +kubebuilder:validation:items:MaxLength=63
	Names []string `json:"names,omitempty"`
	// Selector picks namespaces by their labels.
	// +optional
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
	// Excluded namespaces never match, whatever names or selector say.
	// +optional
	// +kubebuilder:validation:MaxItems=100
	// +kubebuilder:validation:items:MaxLength=63
	Excluded []string `json:"excluded,omitempty"`
}

// ModeOverride sets the mode for some of a policy's resources or namespaces.
// +kubebuilder:object:generate=true
// +kubebuilder:validation:XValidation:rule="has(self.apiGroups) || has(self.resources) || has(self.namespaces)",message="override must have at least one filter (apiGroups, resources, or namespaces)"
type ModeOverride struct {
	// +optional
	// +kubebuilder:validation:MaxItems=10
	// +kubebuilder:validation:items:MaxLength=253
	APIGroups []string `json:"apiGroups,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxItems=50
	// +kubebuilder:validation:items:MaxLength=253
	Resources []string `json:"resources,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxItems=100
	// +kubebuilder:validation:items:MaxLength=63
	Namespaces []string `json:"namespaces,omitempty"`
	Mode       Mode     `json:"mode"`
}

// InitializationRule says when parents of one kind count as initialized,
// replacing the default order (Initialized=True, Ready=True, then
// observedGeneration caught up with Ready, Available or Initialized True).
// The kausality.io/phase high-water mark still counts first.
// +kubebuilder:object:generate=true
// +kubebuilder:validation:XValidation:rule="(has(self.conditions) && size(self.conditions) > 0) || (has(self.observedGenerationConditions) && size(self.observedGenerationConditions) > 0) || (has(self.observedGeneration) && self.observedGeneration)",message="an initialization rule needs conditions, observedGenerationConditions or observedGeneration: true"
type InitializationRule struct {
	// APIGroup of the parent kind; "" is the core group.
	// +kubebuilder:validation:MaxLength=253
	APIGroup string `json:"apiGroup"`
	// Kind of the parent, as in its ownerReferences.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Kind string `json:"kind"`
	// Conditions: initialized once any of them is True.
	// +optional
	// +kubebuilder:validation:MaxItems=10
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=316
	Conditions []string `json:"conditions,omitempty"`
	// ObservedGenerationConditions: initialized once status.observedGeneration
	// has reached the generation and any of them is True.
	// +optional
	// +kubebuilder:validation:MaxItems=10
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=316
	ObservedGenerationConditions []string `json:"observedGenerationConditions,omitempty"`
	// ObservedGeneration: initialized once status.observedGeneration has
	// reached the generation, whatever the conditions (kinds without any).
	// +optional
	ObservedGeneration bool `json:"observedGeneration,omitempty"`
}

// KausalitySpec is one drift policy. Its fields are kausality's, plus
// initialization and an optional mode.
// +kubebuilder:object:generate=true
// +kubebuilder:validation:XValidation:rule="!has(self.initialization) || self.initialization.all(a, self.initialization.exists_one(b, a.apiGroup == b.apiGroup && a.kind == b.kind))",message="initialization names a kind twice"
type KausalitySpec struct {
	// Resources the drift webhook watches (as children, and as parents
	// through their status updates).
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=20
	Resources []ResourceRule `json:"resources"`
	// Namespaces the policy applies in; omitted: all.
	// +optional
	Namespaces *NamespaceSelector `json:"namespaces,omitempty"`
	// ObjectSelector limits the policy to objects with these labels.
	// +optional
	ObjectSelector *metav1.LabelSelector `json:"objectSelector,omitempty"`
	// Mode for matching objects. Omitted: the webhook's --default-mode
	// (kausality requires it; Remedy lets the flag decide).
	// +optional
	Mode Mode `json:"mode,omitempty"`
	// Overrides: the first that matches sets the mode.
	// +optional
	// +kubebuilder:validation:MaxItems=50
	Overrides []ModeOverride `json:"overrides,omitempty"`
	// Initialization rules per parent kind (a Remedy extension).
	// +optional
	// +kubebuilder:validation:MaxItems=50
	Initialization []InitializationRule `json:"initialization,omitempty"`
	// Reporting says where the drift workflow reports drifts of parents in
	// the namespaces this policy selects, and whether it asks a person (a
	// Remedy extension). The worker reads it when a drift opens and again
	// before each report, so only a policy author (a cluster admin) chooses
	// destinations: nothing in a drift signal does.
	// +optional
	Reporting *DriftReporting `json:"reporting,omitempty"`
}

// DriftReporting configures what the drift workflow does with a drift.
// +kubebuilder:object:generate=true
type DriftReporting struct {
	// CallbackURLs receive a DriftReport when a drift is detected and when it resolves.
	// +optional
	// +kubebuilder:validation:MaxItems=10
	// +kubebuilder:validation:items:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="self.all(u, isURL(u) && (u.startsWith('http://') || u.startsWith('https://')))",message="callbackURLs must be http or https URLs"
	CallbackURLs []string `json:"callbackURLs,omitempty"`
	// RequestApproval asks a person about each drift through a
	// RemediationApprovalRequest in the parent's namespace (never a
	// protected one): approve writes a once approval, reject a rejection.
	// +optional
	RequestApproval bool `json:"requestApproval,omitempty"`
}

// SelectsNamespace reports whether the policy's namespaces select the
// namespace name with labels; a policy without namespaces selects all.
// A selector that does not parse selects nothing.
func (s *KausalitySpec) SelectsNamespace(name string, labels map[string]string) bool {
	n := s.Namespaces
	if n == nil {
		return true
	}
	if slices.Contains(n.Excluded, name) {
		return false
	}
	switch {
	case len(n.Names) > 0:
		return slices.Contains(n.Names, name)
	case n.Selector != nil:
		sel, err := metav1.LabelSelectorAsSelector(n.Selector)
		return err == nil && sel.Matches(k8slabels.Set(labels))
	}
	return true
}

// KausalityStatus reports whether the drift webhook applied the policy.
// +kubebuilder:object:generate=true
type KausalityStatus struct {
	// Mode is the mode the policy gives: spec.mode, or the drift webhook's
	// --default-mode when the spec leaves it out.
	// +optional
	Mode Mode `json:"mode,omitempty"`
	// Conditions: Ready (the webhook resolves modes with this generation)
	// and WebhookConfigured (its kinds are in the webhook configuration).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Kausality is a cluster-scoped drift policy: which kinds the drift webhook
// watches, where, in which mode and how their parents count as
// initialized. When several match an object the most specific wins
// (namespace names 100, namespace selector 50, an explicitly named
// resource 10, an object selector 5), then the alphabetically first name.
// +kubebuilder:object:generate=true
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=kpol
// +kubebuilder:printcolumn:name="Mode",type=string,JSONPath=`.status.mode`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Kausality struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   KausalitySpec   `json:"spec"`
	Status KausalityStatus `json:"status,omitempty"`
}

// KausalityList lists Kausality policies.
// +kubebuilder:object:generate=true
// +kubebuilder:object:root=true
type KausalityList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Kausality `json:"items"`
}
