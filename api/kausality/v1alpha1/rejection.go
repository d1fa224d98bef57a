package v1alpha1

import (
	"fmt"
)

// Rejection, in a parent's kausality.io/rejections, denies drifting changes
// to the children it matches. Rejections win over approvals.
type Rejection struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Name       string `json:"name"`
	// Generation limits the rejection to one parent generation; 0 means any.
	Generation int64  `json:"generation,omitempty"`
	Reason     string `json:"reason"`
}

// Matches reports whether r denies a change to child while the parent is at
// generations: one naming a generation holds while it names the current spec.
func (r Rejection) Matches(child ChildRef, generations Generations) bool {
	return refMatches(r.APIVersion, r.Kind, r.Name, child) && (r.Generation == 0 || generations.Current(r.Generation))
}

// ParseRejections parses a kausality.io/rejections value: a JSON array of rejections.
func ParseRejections(s string) ([]Rejection, error) {
	if s == "" {
		return nil, nil
	}
	if !startsWith(s, '[') {
		return nil, fmt.Errorf("%s: want a JSON array of rejections", AnnotationRejections)
	}
	var rs []Rejection
	if err := decodeStrict(s, &rs); err != nil {
		return nil, fmt.Errorf("%s: %w", AnnotationRejections, err)
	}
	for i, r := range rs {
		err := validateRef(r.APIVersion, r.Kind, r.Name)
		if err == nil && r.Generation < 0 {
			err = fmt.Errorf("generation %d is negative (0 means any)", r.Generation)
		}
		if err != nil {
			return nil, fmt.Errorf("%s[%d]: %w", AnnotationRejections, i, err)
		}
	}
	if len(rs) == 0 {
		return nil, nil
	}
	return rs, nil
}

// FormatRejections writes rejections as the annotation value; "" when there are none.
func FormatRejections(rs []Rejection) string {
	if len(rs) == 0 {
		return ""
	}
	return marshal(rs)
}
