package actions

import "k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

// Guard makes a retried write recognise an earlier attempt's write that
// landed although the attempt never reported it (its worker died after the
// API server answered). Record persists the plan before the write is sent;
// the next attempt passes it back as Prior.
type Guard struct {
	// Prior is the plan an earlier attempt recorded before sending its write.
	Prior *Plan
	// Record is called with the exact plan, pinned resourceVersion included,
	// just before the write; an error stops the write.
	Record func(Plan) error
}

// applied reports whether the live object shows Prior's write: the object
// moved past the pinned resourceVersion and already holds the planned result.
// A write that did not land leaves the pinned resourceVersion, or an object
// short of the result, and is planned and sent again.
func (g Guard) applied(live *unstructured.Unstructured, plan Plan) bool {
	p := g.Prior
	if p == nil || p.UID == "" {
		return false
	}
	if g.deleted(live) {
		return true
	}
	return string(live.GetUID()) == p.UID && live.GetResourceVersion() != p.ResourceVersion && plan.NoOp
}

// deleted reports whether Prior was a delete and the object it deleted is
// gone (live is nil, or a replacement with another UID): deleting again
// would take the replacement.
func (g Guard) deleted(live *unstructured.Unstructured) bool {
	p := g.Prior
	return p != nil && p.Delete && p.UID != "" && (live == nil || string(live.GetUID()) != p.UID)
}

// landed is Prior as the result of this attempt: its change and the rollback
// captured from the before-image it was planned on.
func (g Guard) landed() Plan {
	p := *g.Prior
	p.NoOp = false
	return p
}
