package kausality

import (
	"maps"
	"strconv"

	kv1 "github.com/remedy-dev/remedy/api/kausality/v1alpha1"
)

// decideStatus handles a status update: the object is a potential parent
// and its status updater a potential controller. Nothing is denied. The
// requester joins kausality.io/controllers both in the patch and, because
// API servers may drop metadata changes made through /status, as an
// asynchronous parent write; the phase and a synthetic observedGeneration
// are recorded asynchronously.
func decideStatus(req Request) Result {
	res := allow(DecisionStatus, "kausality: status update")
	if req.Object == nil {
		return res
	}
	old, cur := kausalityAnnotations(req.OldObject), kausalityAnnotations(req.Object)
	want := maps.Clone(old)
	var pu ParentUpdate

	hash := kv1.UserHash(req.User.Name, req.User.UID)
	if ctrls, added := kv1.AddUserHash(kv1.ParseUserHashes(old[kv1.AnnotationControllers]), hash); added {
		pu.AddController = hash
		want[kv1.AnnotationControllers] = kv1.FormatUserHashes(ctrls)
	}

	p := asParent(req.Object)
	if req.OldObject != nil {
		p.Annotations = req.OldObject.GetAnnotations()
	}
	if !p.Deleting {
		if ok, record := initialized(p); ok && record {
			pu.Phase = kv1.PhaseInitialized
		}
	}
	if _, has := ObservedGeneration(req.Object); !has {
		if g := req.Object.GetGeneration(); g > 0 && old[kv1.AnnotationObservedGeneration] != strconv.FormatInt(g, 10) {
			pu.ObservedGeneration = &g
		}
	}

	res.Annotations = changes(want, cur)
	if pu != (ParentUpdate{}) {
		res.ParentUpdate = &pu
	}
	return res
}
