package kausality

import (
	"testing"

	"github.com/stretchr/testify/assert"

	kv1 "github.com/remedy-dev/remedy/api/kausality/v1alpha1"
)

// The tables in this file restate kausality's own test cases (pkg/drift,
// pkg/trace, pkg/approval, pkg/admission) as Remedy data, so the two stay in
// step. A row whose answer differs from kausality's names the departure;
// docs/drift.md lists each one with its reason.

// TestKausalityControllerCases: who is the parent's controller, one row per
// case kausality's semantics distinguish. updaters are what identify
// receives: the child's, with the requester counted in where Decide adds it.
func TestKausalityControllerCases(t *testing.T) {
	tests := []struct {
		name        string
		controllers []string // recorded on the parent
		updaters    []string // the child's, as identify receives them
		user        string
		want        role
	}{
		// The parent records controllers: they decide.
		{"only updater, listed controller", []string{dcHash}, []string{dcHash}, dc, roleController},
		{"only updater but not listed: a person is not the controller", []string{dcHash}, []string{aliceHash}, alice, roleOther},
		{"neither updater nor listed", []string{dcHash}, []string{aliceHash}, bob, roleOther},
		{"listed though the child's updater is someone else", []string{dcHash}, []string{aliceHash}, dc, roleController},
		{"several updaters, requester in the intersection", []string{dcHash, aliceHash}, []string{dcHash, bobHash}, dc, roleController},
		{"several updaters, requester outside the intersection", []string{dcHash}, []string{dcHash, bobHash}, bob, roleOther},
		{"no updater is listed, requester is", []string{dcHash}, []string{aliceHash, bobHash}, dc, roleController},
		{"a person editing a controller's child (requester added)", []string{dcHash}, []string{dcHash, aliceHash}, alice, roleOther},
		{"create by a listed controller", []string{dcHash}, nil, dc, roleController},
		{"create by someone not listed", []string{dcHash}, nil, alice, roleOther},
		// Nothing recorded on the parent: the child's updaters decide.
		{"no controllers, requester the only updater", nil, []string{dcHash}, dc, roleController},
		{"no controllers, someone else the only updater: not the controller", nil, []string{dcHash}, alice, roleOther},
		{"no controllers, create", nil, nil, dc, roleController},
		{"no controllers, several updaters", nil, []string{dcHash, aliceHash}, dc, roleUnknown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := parent()
			delete(p.Annotations, kv1.AnnotationControllers)
			if tt.controllers != nil {
				p.Annotations[kv1.AnnotationControllers] = kv1.FormatUserHashes(tt.controllers)
			}
			assert.Equal(t, tt.want, identify(kv1.UserHash(tt.user, ""), tt.updaters, p))
		})
	}
	assert.Equal(t, roleOther, identify(dcHash, []string{dcHash}, nil), "no parent: nobody controls the child")
}

// TestKausalityHandlerControllerCases: what an admission answers for the
// same questions. Decide counts the requester among the stored updaters
// first, so someone else than the lone updater
// makes two: the controller cannot be determined and nothing is drift.
func TestKausalityHandlerControllerCases(t *testing.T) {
	stored := func(user string, hs ...string) Request {
		return with(update(), func(r *Request) {
			delete(r.Parent.Annotations, kv1.AnnotationControllers)
			a := childAnn()
			a[kv1.AnnotationUpdaters] = kv1.FormatUserHashes(hs)
			r.OldObject, r.Object, r.User = rs(1, a), rs(2, a), User{Name: user}
			r.DefaultMode = kv1.ModeEnforce
		})
	}
	runDecide(t, []decideCase{
		{name: "no controllers, someone else than the lone updater: cannot determine", req: stored(alice, dcHash),
			allowed: true, decision: DecisionUnknownController},
		{name: "no controllers, the lone updater: the controller", req: stored(dc, dcHash), code: 403, decision: DecisionDriftDenied},
		{name: "no controllers, nothing stored: the requester is the controller", req: stored(alice), code: 403, decision: DecisionDriftDenied},
	})
}

// TestKausalityTraceCases: when a change starts a new trace origin and
// when it extends the parent's trace.
func TestKausalityTraceCases(t *testing.T) {
	tests := []struct {
		name        string
		gen         int64
		observed    *int64
		controllers []string
		updaters    []string // with the requester, as identify receives them
		user        string
		extend      bool
	}{
		{"stable parent, its controller: new origin", 5, ptr(int64(5)), []string{dcHash}, []string{dcHash}, dc, false},
		{"reconciling parent, its controller: extend", 6, ptr(int64(5)), []string{dcHash}, []string{dcHash}, dc, true},
		{"reconciling parent, someone else: new origin", 6, ptr(int64(5)), []string{dcHash}, []string{dcHash}, alice, false},
		{"reconciling parent, controller undeterminable: extend", 6, ptr(int64(5)), nil, []string{dcHash, aliceHash}, alice, true},
		{"no observedGeneration, someone else: new origin", 1, nil, []string{dcHash}, []string{aliceHash}, alice, false},
		{"no observedGeneration, confirmed controller: extend", 1, nil, []string{dcHash}, []string{dcHash}, dc, true},
		{"no observedGeneration, controller undeterminable: new origin", 1, nil, nil, []string{dcHash, aliceHash}, alice, false},
		// Departure (spec-change generation): an observedGeneration past
		// the spec-change generation means the controller has seen the
		// last spec change, so the parent is stable.
		{"observedGeneration past the spec generation: new origin", 3, ptr(int64(5)), []string{dcHash}, []string{dcHash}, dc, false},
	}
	rolling := parent()
	rolling.RollingOut = true
	assert.True(t, extends(roleController, rolling), "departure (rollouts): a parent still rolling out, its controller: extend")
	assert.True(t, extends(roleUnknown, rolling), "a parent still rolling out, controller undeterminable: extend")
	assert.False(t, extends(roleOther, rolling), "a parent still rolling out, someone else: new origin")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := parent()
			p.Generation, p.ObservedGeneration = tt.gen, tt.observed
			delete(p.Annotations, kv1.AnnotationControllers)
			if tt.controllers != nil {
				p.Annotations[kv1.AnnotationControllers] = kv1.FormatUserHashes(tt.controllers)
			}
			r := identify(kv1.UserHash(tt.user, ""), tt.updaters, p)
			assert.Equal(t, tt.extend, extends(r, p))
		})
	}
	assert.False(t, extends(roleController, nil), "no parent: new origin")
}

// TestKausalityLifecycleCases: the parent's lifecycle phase.
func TestKausalityLifecycleCases(t *testing.T) {
	const (
		deleting     = "Deleting"
		initializing = "Initializing"
		initialDone  = "Initialized"
	)
	phase := func(p Parent) string {
		if p.Deleting {
			return deleting
		}
		if ok, _ := initialized(p); ok {
			return initialDone
		}
		return initializing
	}
	one := ptr(int64(1))
	tests := []struct {
		name  string
		p     Parent
		phase string
	}{
		{"deletion", Parent{Deleting: true}, deleting},
		{"deletion before the phase annotation", Parent{Deleting: true, ObservedGeneration: one,
			Annotations: map[string]string{kv1.AnnotationPhase: kv1.PhaseInitialized}}, deleting},
		{"phase annotation", Parent{Annotations: map[string]string{kv1.AnnotationPhase: kv1.PhaseInitialized}}, initialDone},
		{"Initialized=True", Parent{Conditions: []Condition{{"Initialized", "True"}}}, initialDone},
		{"Ready=True", Parent{Conditions: []Condition{{"Ready", "True"}}}, initialDone},
		{"observed, Ready=True", Parent{ObservedGeneration: one, Conditions: []Condition{{"Ready", "True"}}}, initialDone},
		{"observed, Available=True", Parent{ObservedGeneration: one, Conditions: []Condition{{"Available", "True"}}}, initialDone},
		{"observed, Initialized=True", Parent{ObservedGeneration: one, Conditions: []Condition{{"Initialized", "True"}}}, initialDone},
		{"observed, Synced=True but Ready=False", Parent{ObservedGeneration: one, Conditions: []Condition{{"Synced", "True"}, {"Ready", "False"}}}, initializing},
		{"observed, no conditions", Parent{ObservedGeneration: one}, initializing},
		{"observed, Synced=False", Parent{ObservedGeneration: one, Conditions: []Condition{{"Synced", "False"}}}, initializing},
		{"nothing", Parent{Generation: 1}, initializing},
		{"Ready=False", Parent{Conditions: []Condition{{"Ready", "False"}}}, initializing},
		// Departure (docs/drift.md): Available counts only once the
		// controller observed the current spec generation.
		{"Available=True, observedGeneration behind", Parent{Generation: 2, ObservedGeneration: one,
			Conditions: []Condition{{"Available", "True"}}}, initializing},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.phase, phase(tt.p))
		})
	}
}

// TestKausalityGenerationCases: the controller's change is expected while
// the parent reconciles, drift once it has caught up.
func TestKausalityGenerationCases(t *testing.T) {
	tests := []struct {
		name          string
		gen, observed int64
		rollingOut    bool
		drift         bool
	}{
		{"generation ahead of observedGeneration: expected", 5, 4, false, false},
		{"generation observed: drift", 5, 5, false, true},
		// Departure (spec-change generation): kausality calls any
		// mismatch expected; Remedy's generation is the last spec
		// change, which metadata.generation (what controllers observe)
		// may have passed through annotation edits.
		{"observedGeneration ahead of the spec generation: drift", 3, 5, false, true},
		// Departure (rollouts): kausality calls every controller change
		// after observedGeneration caught up drift; a rolling update's
		// later passes come after it (issue 23).
		{"generation observed, rollout still in progress: expected", 5, 5, true, false},
	}
	// Departure, kausality's own edge case: observedGeneration ahead of
	// metadata.generation too is a caught-up parent, so drift.
	ahead := Decide(with(update(), func(r *Request) {
		r.Parent.Generation, r.Parent.MetadataGeneration, r.Parent.ObservedGeneration = 3, 5, ptr(int64(6))
	}))
	assert.Equal(t, DecisionDriftLogged, ahead.Decision, ahead.Reason)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := with(update(), func(r *Request) {
				r.Parent.Generation, r.Parent.ObservedGeneration = tt.gen, ptr(tt.observed)
				r.Parent.RollingOut = tt.rollingOut
			})
			res := Decide(req)
			assert.True(t, res.Allowed, "log mode")
			assert.Equal(t, tt.drift, res.Drift != nil, res.Reason)
		})
	}
}

// TestKausalityFreezeCases: a freeze stops every spec change to the
// children in every phase but deletion, whoever makes it.
func TestKausalityFreezeCases(t *testing.T) {
	freeze := func(v string, f func(r *Request)) Request {
		return with(update(), func(r *Request) {
			r.Parent.Annotations[kv1.AnnotationFreeze] = v
			if f != nil {
				f(r)
			}
		})
	}
	initializing := func(r *Request) {
		delete(r.Parent.Annotations, kv1.AnnotationPhase)
		r.Parent.Conditions = nil
	}
	runDecide(t, []decideCase{
		{name: "frozen while initializing", req: freeze("true", initializing), code: 403, decision: DecisionFrozen},
		{name: "frozen while initializing, create", req: with(freeze("true", initializing), func(r *Request) {
			c := create()
			r.Operation, r.OldObject, r.Object = c.Operation, c.OldObject, c.Object
		}), code: 403, decision: DecisionFrozen},
		// kausality keeps the freezing user out of the denial, and so does
		// Remedy: docs/drift.md, "Departures from kausality", says why.
		{name: "frozen by someone else: the denial does not name them", req: freeze(`{"user":"carol","message":"incident 42"}`, func(r *Request) { r.User = User{Name: alice} }),
			code: 403, decision: DecisionFrozen, reason: []string{"incident 42"}, check: notNaming("carol")},
		{name: "frozen when the controller is undeterminable", req: freeze("true", func(r *Request) {
			delete(r.Parent.Annotations, kv1.AnnotationControllers)
			r.User = User{Name: alice}
		}), code: 403, decision: DecisionFrozen},
		{name: "frozen delete", req: with(freeze("true", nil), func(r *Request) {
			r.Operation, r.Object = Delete, nil
		}), code: 403, decision: DecisionFrozen},
		{name: "deleting parent is not frozen", req: freeze("true", func(r *Request) { r.Parent.Deleting = true }),
			allowed: true, decision: DecisionParentDeleting},
		{name: "unparseable freezes (fail closed)", req: freeze("{broken", nil), code: 403, decision: DecisionFrozen},
		{name: "false is not frozen", req: freeze("false", nil), allowed: true, decision: DecisionDriftLogged},
		{name: "empty is not frozen", req: freeze("", nil), allowed: true, decision: DecisionDriftLogged},
		{name: "a person may write false", req: with(update(), func(r *Request) {
			r.User = User{Name: alice}
			r.Object.SetAnnotations(map[string]string{kv1.AnnotationFreeze: "false"})
		}), allowed: true, decision: DecisionNewOrigin},
	})
}

// notNaming checks that the reason leaves who out.
func notNaming(who string) func(t *testing.T, res Result) {
	return func(t *testing.T, res Result) { assert.NotContains(t, res.Reason, who) }
}

// TestKausalityApprovalCases: rejections, then approvals, on a drifting
// change in enforce mode; the parent's generation is both its generation
// and its observedGeneration.
func TestKausalityApprovalCases(t *testing.T) {
	const (
		alwaysRS  = `[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"web-1","mode":"always"}]`
		rejectRS  = `[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"web-1","reason":"dangerous"}]`
		approvals = kv1.AnnotationApprovals
		rejects   = kv1.AnnotationRejections
	)
	drift := func(gen int64, ann map[string]string, mode kv1.Mode) Request {
		return with(update(), func(r *Request) {
			r.DefaultMode = mode
			r.Parent.Generation, r.Parent.ObservedGeneration = gen, ptr(gen)
			for k, v := range ann {
				r.Parent.Annotations[k] = v
			}
		})
	}
	enforce := func(gen int64, ann map[string]string) Request { return drift(gen, ann, kv1.ModeEnforce) }
	runDecide(t, []decideCase{
		{name: "nothing on the parent", req: enforce(1, nil), code: 403, decision: DecisionDriftDenied},
		{name: "always, any generation", req: enforce(99, map[string]string{approvals: alwaysRS}), allowed: true, decision: DecisionDriftApproved},
		{name: "once at its generation", req: enforce(5, map[string]string{approvals: `[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"web-1","generation":5,"mode":"once"}]`}),
			allowed: true, decision: DecisionDriftApproved},
		{name: "once for an earlier generation", req: enforce(6, map[string]string{approvals: `[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"web-1","generation":5,"mode":"once"}]`}),
			code: 403, decision: DecisionDriftDenied},
		{name: "generation at its generation", req: enforce(10, map[string]string{approvals: `[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"web-1","generation":10,"mode":"generation"}]`}),
			allowed: true, decision: DecisionDriftApproved},
		{name: "generation for a later generation does not apply yet", req: enforce(10, map[string]string{approvals: `[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"web-1","generation":11,"mode":"generation"}]`}),
			code: 403, decision: DecisionDriftDenied},
		{name: "approval for another child", req: enforce(1, map[string]string{approvals: `[{"apiVersion":"v1","kind":"Secret","name":"other","mode":"always"}]`}),
			code: 403, decision: DecisionDriftDenied},
		{name: "wildcard name", req: enforce(1, map[string]string{approvals: `[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"*","mode":"always"}]`}),
			allowed: true, decision: DecisionDriftApproved},
		{name: "wildcard name still needs the kind", req: enforce(1, map[string]string{approvals: `[{"apiVersion":"apps/v1","kind":"Deployment","name":"*","mode":"always"}]`}),
			code: 403, decision: DecisionDriftDenied},
		{name: "rejection", req: enforce(1, map[string]string{rejects: rejectRS}), code: 403, decision: DecisionDriftRejected, reason: []string{"dangerous"}},
		{name: "rejection wins over approval", req: enforce(1, map[string]string{rejects: rejectRS, approvals: alwaysRS}),
			code: 403, decision: DecisionDriftRejected},
		{name: "rejection at its generation", req: enforce(5, map[string]string{rejects: `[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"web-1","generation":5,"reason":"bad"}]`}),
			code: 403, decision: DecisionDriftRejected},
		{name: "rejection for another generation", req: enforce(6, map[string]string{rejects: `[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"web-1","generation":5,"reason":"bad"}]`}),
			code: 403, decision: DecisionDriftDenied},
		{name: "unparseable approvals approve nothing", req: enforce(1, map[string]string{approvals: "not valid json"}),
			code: 403, decision: DecisionDriftDenied},
		{name: "log mode without approval", req: drift(1, nil, kv1.ModeLog), allowed: true, decision: DecisionDriftLogged},
		// Departure (docs/drift.md: a rejection always denies): kausality lets a
		// rejected drift through with a warning in log mode.
		{name: "rejection in log mode", req: drift(1, map[string]string{rejects: rejectRS}, kv1.ModeLog), code: 403, decision: DecisionDriftRejected},
		// Departure (fail safe): kausality ignores rejections it cannot parse.
		{name: "unparseable rejections reject", req: enforce(1, map[string]string{rejects: "{broken", approvals: alwaysRS}),
			code: 403, decision: DecisionDriftRejected},
		// Departure: kausality stops at the first approval naming the
		// child, even a stale one; Remedy looks for a valid one.
		{name: "a stale approval does not hide a valid one", req: enforce(5, map[string]string{approvals: `[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"web-1","generation":4,"mode":"once"},` +
			`{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"web-1","generation":5,"mode":"once"}]`}),
			allowed: true, decision: DecisionDriftApproved},
		// Departure (approvals without a generation): kausality's once and
		// generation approvals without a generation never match.
		{name: "once without a generation applies at any generation", req: enforce(7, map[string]string{approvals: `[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"web-1"}]`}),
			allowed: true, decision: DecisionDriftApproved},
	})
}
