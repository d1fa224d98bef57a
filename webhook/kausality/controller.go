package kausality

import (
	"slices"

	kv1 "github.com/remedy-dev/remedy/api/kausality/v1alpha1"
)

// role is what the requester is to the child.
type role int

const (
	// roleUnknown: the controller cannot be determined (late install: the
	// parent records no controllers and the child has other updaters);
	// drift detection is skipped.
	roleUnknown role = iota
	// roleController: the parent's controller.
	roleController
	// roleOther: someone else, a new causal origin.
	roleOther
)

// identify decides whether the requester is the parent's controller, with
// kausality's semantics (docs/drift.md, "How a request is judged"). updaters
// are the child's updaters with the requester counted in (it is changing the
// spec, so it is one of them; Decide adds it). The parent's recorded
// controllers (status updaters) decide first: a person who happens to be a
// child's only updater is not its controller. Only without them does the
// child's history count: a lone updater is the controller if it is the
// requester, else not; nobody recorded (a CREATE) is taken for the
// controller; several updaters make it unknowable.
func identify(userHash string, updaters []string, parent *Parent) role {
	if parent == nil {
		return roleOther
	}
	if controllers := kv1.ParseUserHashes(parent.Annotations[kv1.AnnotationControllers]); len(controllers) > 0 {
		if slices.Contains(controllers, userHash) {
			return roleController
		}
		return roleOther
	}
	switch len(updaters) {
	case 0:
		return roleController
	case 1:
		if updaters[0] == userHash {
			return roleController
		}
		return roleOther
	}
	return roleUnknown
}

// extends reports whether the child's new trace extends the parent's, in
// kausality's terms: never for someone other than the controller; while the
// parent reconciles a spec change (or still rolls it out), for the
// controller and for an undetermined requester alike; when the parent reports no
// observedGeneration, only for a confirmed controller. A stable parent's
// controller changing a child starts a new origin: that change was not
// caused by the parent.
func extends(r role, p *Parent) bool {
	switch {
	case p == nil, r == roleOther:
		return false
	case p.ObservedGeneration == nil:
		return r == roleController
	}
	return reconciling(*p)
}
