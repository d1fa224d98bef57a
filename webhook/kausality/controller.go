package kausality

import (
	"slices"

	kv1 "github.com/remedy-dev/remedy/api/kausality/v1alpha1"
)

// role is what the requester is to the child.
type role int

const (
	// roleUnknown: the controller cannot be determined (late install, or
	// updaters and controllers share nobody); drift detection is skipped.
	roleUnknown role = iota
	// roleController: the parent's controller.
	roleController
	// roleOther: someone else, a new causal origin.
	roleOther
)

// identify finds the controller among the child's spec updaters (recorded
// on the child) and the parent's status updaters (recorded on the parent):
// a single updater is the controller; otherwise the controller is who is in
// both lists. A CREATE has no updaters yet, and intersecting with nothing
// would make creates never drift, so there the parent's controllers decide
// alone.
func identify(userHash string, updaters []string, parent *Parent) role {
	if parent == nil {
		return roleOther
	}
	var controllers []string
	switch {
	case len(updaters) == 1:
		controllers = updaters
	case len(updaters) == 0:
		controllers = kv1.ParseUserHashes(parent.Annotations[kv1.AnnotationControllers])
	default:
		for _, h := range kv1.ParseUserHashes(parent.Annotations[kv1.AnnotationControllers]) {
			if slices.Contains(updaters, h) {
				controllers = append(controllers, h)
			}
		}
	}
	switch {
	case len(controllers) == 0:
		return roleUnknown
	case slices.Contains(controllers, userHash):
		return roleController
	}
	return roleOther
}
