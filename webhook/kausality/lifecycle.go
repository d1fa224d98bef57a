package kausality

import (
	kv1 "github.com/remedy-dev/remedy/api/kausality/v1alpha1"
)

// initialized applies the kind's initialization rule when a policy has
// one, else this detection order: the phase annotation (a
// high-water mark), Initialized=True, Ready=True, then observedGeneration
// caught up with Ready, Available or Initialized True (kausality's own code
// accepts all three; Deployments report Available). It also says whether
// the phase still has to be recorded.
func initialized(p Parent) (ok, record bool) {
	if p.Annotations[kv1.AnnotationPhase] == kv1.PhaseInitialized {
		return true, false
	}
	if r := p.Init; r != nil {
		caughtUp := p.ObservedGeneration != nil && *p.ObservedGeneration >= p.Generation
		ok = anyTrue(p.Conditions, r.Conditions) ||
			caughtUp && (r.ObservedGeneration || anyTrue(p.Conditions, r.ObservedGenerationConditions))
		return ok, ok
	}
	switch {
	case hasTrue(p.Conditions, "Initialized"), hasTrue(p.Conditions, "Ready"):
		return true, true
	case p.ObservedGeneration != nil && *p.ObservedGeneration >= p.Generation &&
		hasTrue(p.Conditions, "Available"):
		return true, true
	}
	return false, false
}

func anyTrue(cs []Condition, types []string) bool {
	for _, t := range types {
		if hasTrue(cs, t) {
			return true
		}
	}
	return false
}

func hasTrue(cs []Condition, typ string) bool {
	for _, c := range cs {
		if c.Type == typ && c.Status == "True" {
			return true
		}
	}
	return false
}

// expected reports whether the parent's controller has not yet observed its
// last spec change, or has but is still rolling it out, so changes to
// children are the reconciliation of it. A parent that reports no
// observedGeneration at all cannot show drift: like kausality, be lenient
// and call it expected.
func expected(p Parent) bool {
	return p.ObservedGeneration == nil || reconciling(p)
}

// reconciling: the controller has a spec change to observe or to finish rolling out.
func reconciling(p Parent) bool {
	return *p.ObservedGeneration < p.Generation || p.RollingOut
}
