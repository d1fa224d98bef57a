package v1alpha1

import (
	"fmt"
)

// ApprovalMode says how long an approval lasts.
type ApprovalMode string

// Approval modes.
const (
	// ApprovalOnce lets one drifting change through, then is removed; valid
	// only while the parent's generation equals Generation.
	ApprovalOnce ApprovalMode = "once"
	// ApprovalGeneration is valid while the parent's generation equals Generation.
	ApprovalGeneration ApprovalMode = "generation"
	// ApprovalAlways never expires and is never pruned.
	ApprovalAlways ApprovalMode = "always"
)

// Wildcard matches any apiVersion, kind or name in approvals and rejections.
const Wildcard = "*"

// ChildRef names the child a drifting change is made to.
type ChildRef struct {
	APIVersion, Kind, Name string
}

// Approval, in a parent's kausality.io/approvals, allows drifting changes to
// the children it matches.
type Approval struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Name       string `json:"name"`
	// Generation is the parent generation a once or generation approval is
	// valid for; ignored for always.
	Generation int64        `json:"generation,omitempty"`
	Mode       ApprovalMode `json:"mode"`
}

// Generations are the two generations of a parent an approval or a
// rejection may name.
type Generations struct {
	// Spec is the generation of the parent's last spec change, which
	// Remedy compares with.
	Spec int64
	// Metadata is the parent's metadata.generation now; 0 when unknown.
	// Deployments bump it on annotation edits too, so it may be ahead of Spec.
	Metadata int64
}

// Current reports whether generation names the parent's current spec: Spec
// itself, or a metadata.generation it reached since without a spec change,
// such as the one `kubectl get -o yaml` showed a person writing an approval
// (kausality's docs and tools write that one).
func (g Generations) Current(generation int64) bool {
	return generation == g.Spec || (generation > g.Spec && generation <= g.Metadata)
}

// Matches reports whether a is valid for child while the parent is at
// generations. A once or generation approval without a generation (0)
// applies at any generation; one naming a generation applies while it
// names the current spec (Generations.Current).
func (a Approval) Matches(child ChildRef, generations Generations) bool {
	if !refMatches(a.APIVersion, a.Kind, a.Name, child) {
		return false
	}
	return a.Mode == ApprovalAlways || a.Generation == 0 || generations.Current(a.Generation)
}

// Stale reports whether a no longer applies because the parent moved past
// the generation it names; stale approvals are pruned from the parent. An
// approval naming a later generation is kept, as kausality keeps it: it
// may be written ahead of a spec change, and Deployments' metadata.generation
// runs ahead of the spec-change generation the webhook compares with.
func (a Approval) Stale(generation int64) bool {
	return a.Mode != ApprovalAlways && a.Generation != 0 && a.Generation < generation
}

func refMatches(apiVersion, kind, name string, child ChildRef) bool {
	return field(apiVersion, child.APIVersion) && field(kind, child.Kind) && field(name, child.Name)
}

func field(pattern, value string) bool { return pattern == Wildcard || pattern == value }

// ParseApprovals parses a kausality.io/approvals value: a JSON array of
// approvals. A missing mode means once, as in kausality.
func ParseApprovals(s string) ([]Approval, error) {
	if s == "" {
		return nil, nil
	}
	if !startsWith(s, '[') {
		return nil, fmt.Errorf("%s: want a JSON array of approvals", AnnotationApprovals)
	}
	var as []Approval
	if err := decodeStrict(s, &as); err != nil {
		return nil, fmt.Errorf("%s: %w", AnnotationApprovals, err)
	}
	for i := range as {
		a := &as[i]
		if a.Mode == "" {
			a.Mode = ApprovalOnce
		}
		if err := a.validate(); err != nil {
			return nil, fmt.Errorf("%s[%d]: %w", AnnotationApprovals, i, err)
		}
	}
	if len(as) == 0 {
		return nil, nil
	}
	return as, nil
}

func (a Approval) validate() error {
	if err := validateRef(a.APIVersion, a.Kind, a.Name); err != nil {
		return err
	}
	switch a.Mode {
	case ApprovalOnce, ApprovalGeneration, ApprovalAlways:
		if a.Generation < 0 {
			return fmt.Errorf("generation %d is negative", a.Generation)
		}
	default:
		return fmt.Errorf("mode %q is not one of %q, %q, %q", a.Mode, ApprovalOnce, ApprovalGeneration, ApprovalAlways)
	}
	return nil
}

func validateRef(apiVersion, kind, name string) error {
	switch {
	case apiVersion == "":
		return fmt.Errorf("apiVersion is required (%q matches any)", Wildcard)
	case kind == "":
		return fmt.Errorf("kind is required (%q matches any)", Wildcard)
	case name == "":
		return fmt.Errorf("name is required (%q matches any)", Wildcard)
	}
	return nil
}

// FormatApprovals writes approvals as the annotation value; "" (remove the
// annotation) when there are none.
func FormatApprovals(as []Approval) string {
	if len(as) == 0 {
		return ""
	}
	return marshal(as)
}
