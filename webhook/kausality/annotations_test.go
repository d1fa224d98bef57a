package kausality

import (
	"maps"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	kv1 "github.com/remedy-dev/remedy/api/kausality/v1alpha1"
)

// final applies res.Annotations to obj's annotations: what gets stored.
func final(t *testing.T, req Request, res Result) map[string]string {
	t.Helper()
	out := kausalityAnnotations(req.Object)
	for k, v := range res.Annotations {
		require.True(t, kv1.IsKausality(k), "only kausality keys are patched, got %s", k)
		if v == nil {
			delete(out, k)
		} else {
			out[k] = *v
		}
	}
	return out
}

// annotationCase: a request, its expected verdict, and the kausality
// annotations the object must end with (trace compared separately).
type annotationCase struct {
	name     string
	req      Request
	decision DecisionKind
	want     map[string]string // without the trace
	trace    kv1.Trace         // nil: no trace annotation
}

func runAnnotations(t *testing.T, tests []annotationCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := Decide(tt.req)
			require.True(t, res.Allowed, res.Reason)
			assert.Equal(t, tt.decision, res.Decision)
			got := final(t, tt.req, res)
			tr, err := kv1.ParseTrace(got[kv1.AnnotationTrace])
			require.NoError(t, err, "Decide writes traces it can read back")
			assert.Equal(t, tt.trace, tr)
			delete(got, kv1.AnnotationTrace)
			assert.Equal(t, tt.want, got)
		})
	}
}

// stale is what the deployment controller copies from the Deployment onto
// its ReplicaSets: the parent's own kausality annotations.
func stale() map[string]string {
	return map[string]string{
		kv1.AnnotationTrace:             parentTrace,
		kv1.AnnotationControllers:       dcHash,
		kv1.AnnotationPhase:             kv1.PhaseInitialized,
		kv1.AnnotationApprovals:         approvals(kv1.Approval{APIVersion: "*", Kind: "*", Name: "*", Mode: kv1.ApprovalAlways}),
		kv1.AnnotationFreeze:            "true",
		kv1.TraceLabelPrefix + "ticket": "T-1",
	}
}

func merged(ms ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

func parentWithStale() *Parent {
	p := parent()
	p.Generation = 4 // expected: the controller is rolling out
	for k, v := range stale() {
		if k != kv1.AnnotationFreeze {
			p.Annotations[k] = v
		}
	}
	return p
}

// noControllers is a copy of p without recorded controllers (a late install).
func noControllers(p *Parent) *Parent {
	q := *p
	q.Annotations = maps.Clone(p.Annotations)
	delete(q.Annotations, kv1.AnnotationControllers)
	return &q
}

// TestAnnotationProtection has one row per case of the UPDATE
// handling table, plus CREATE and the status update.
func TestAnnotationProtection(t *testing.T) {
	// web-1 as stored: a child (updaters, trace), a parent of pods
	// (controllers, phase) and carrying a person's user annotations.
	stored := map[string]string{
		kv1.AnnotationUpdaters:          dcHash,
		kv1.AnnotationTrace:             childAnn()[kv1.AnnotationTrace],
		kv1.AnnotationControllers:       kv1.UserHash("system:serviceaccount:kube-system:replicaset-controller", ""),
		kv1.AnnotationPhase:             kv1.PhaseInitialized,
		kv1.AnnotationSnooze:            "2026-04-01T00:00:00Z",
		kv1.TraceLabelPrefix + "ticket": "T-9",
	}
	storedTrace := mustTrace(stored[kv1.AnnotationTrace])
	noTrace := func(m map[string]string) map[string]string {
		out := merged(m)
		delete(out, kv1.AnnotationTrace)
		return out
	}
	parentChain := mustTrace(parentTrace)
	tp := parentWithStale()
	withTicket := func(tk string) map[string]string { return map[string]string{"ticket": tk} }

	runAnnotations(t, []annotationCase{
		{
			name: "no spec change, controller: everything preserved from OldObject",
			req: Request{Operation: Update, User: User{Name: dc}, Parent: tp, Now: now, DefaultMode: kv1.ModeEnforce,
				OldObject: rs(1, stored), Object: rs(1, merged(stored, stale()))},
			decision: DecisionMetadataOnly, want: noTrace(stored), trace: storedTrace,
		},
		{
			name: "no spec change, controller removing annotations: restored",
			req: Request{Operation: Update, User: User{Name: dc}, Parent: tp, Now: now,
				OldObject: rs(1, stored), Object: rs(1, nil)},
			decision: DecisionMetadataOnly, want: noTrace(stored), trace: storedTrace,
		},
		{
			name: "no spec change, person: system preserved, user annotations as written, no updater recorded",
			req: Request{Operation: Update, User: User{Name: alice}, Parent: tp, Now: now,
				OldObject: rs(1, stored), Object: rs(1, merged(stored, map[string]string{
					kv1.AnnotationTrace: "[]", kv1.AnnotationUpdaters: aliceHash, kv1.AnnotationControllers: "",
					kv1.AnnotationMode: "enforce", kv1.TraceLabelPrefix + "ticket": "T-10",
				}))},
			decision: DecisionMetadataOnly,
			want:     merged(noTrace(stored), map[string]string{kv1.AnnotationMode: "enforce", kv1.TraceLabelPrefix + "ticket": "T-10"}),
			trace:    storedTrace,
		},
		{
			name: "no spec change, person removing a user annotation",
			req: Request{Operation: Update, User: User{Name: alice}, Parent: tp, Now: now,
				OldObject: rs(1, stored), Object: rs(1, noTrace(map[string]string{
					kv1.AnnotationUpdaters: dcHash, kv1.AnnotationTrace: stored[kv1.AnnotationTrace],
					kv1.AnnotationControllers: stored[kv1.AnnotationControllers], kv1.AnnotationPhase: kv1.PhaseInitialized,
				}))},
			decision: DecisionMetadataOnly,
			want: map[string]string{kv1.AnnotationUpdaters: dcHash, kv1.AnnotationControllers: stored[kv1.AnnotationControllers],
				kv1.AnnotationPhase: kv1.PhaseInitialized},
			trace: storedTrace,
		},
		{
			name: "controller + spec change: trace and updaters recomputed, controllers and user annotations preserved",
			req: Request{Operation: Update, User: User{Name: dc}, Parent: tp, Now: now,
				OldObject: rs(1, stored), Object: rs(2, merged(stored, stale()))},
			decision: DecisionExpected,
			want:     noTrace(stored),
			trace:    append(parentChain, hop(dc, 2, withTicket("T-9"))),
		},
		{
			name: "person + spec change: new origin, updaters += person, user annotations as written",
			req: Request{Operation: Update, User: User{Name: alice}, Parent: tp, Now: now,
				OldObject: rs(1, stored), Object: rs(2, merged(stored, map[string]string{
					kv1.AnnotationUpdaters: "", kv1.TraceLabelPrefix + "ticket": "T-11", kv1.AnnotationMode: "log",
				}))},
			decision: DecisionNewOrigin,
			want: merged(noTrace(stored), map[string]string{
				kv1.AnnotationUpdaters: dcHash + "," + aliceHash, kv1.TraceLabelPrefix + "ticket": "T-11", kv1.AnnotationMode: "log",
			}),
			trace: kv1.Trace{hop(alice, 2, withTicket("T-11"))},
		},
		{
			name: "unknown controller, parent reconciling: the trace extends the parent's",
			req: Request{Operation: Update, User: User{Name: bob}, Parent: noControllers(tp), Now: now,
				OldObject: rs(1, merged(stored, map[string]string{kv1.AnnotationUpdaters: aliceHash + "," + bobHash})),
				Object:    rs(2, stored)},
			decision: DecisionUnknownController,
			want:     merged(noTrace(stored), map[string]string{kv1.AnnotationUpdaters: aliceHash + "," + bobHash}),
			trace:    append(parentChain, hop(bob, 2, withTicket("T-9"))),
		},
		{
			name: "unknown controller, parent stable: a new origin",
			req: Request{Operation: Update, User: User{Name: bob}, Parent: noControllers(parent()), Now: now,
				OldObject: rs(1, merged(stored, map[string]string{kv1.AnnotationUpdaters: aliceHash + "," + bobHash})),
				Object:    rs(2, stored)},
			decision: DecisionUnknownController,
			want:     merged(noTrace(stored), map[string]string{kv1.AnnotationUpdaters: aliceHash + "," + bobHash}),
			trace:    kv1.Trace{hop(bob, 2, withTicket("T-9"))},
		},
		{
			name: "create by the controller: copies from the parent wiped, fresh updaters and trace",
			req: Request{Operation: Create, User: User{Name: dc}, Parent: tp, Now: now,
				Object: rs(1, merged(stale(), map[string]string{kv1.AnnotationUpdaters: bobHash, kv1.AnnotationSnooze: "2026-04-01T00:00:00Z"}))},
			decision: DecisionExpected,
			want:     map[string]string{kv1.AnnotationUpdaters: dcHash, kv1.AnnotationSnooze: "2026-04-01T00:00:00Z", kv1.AnnotationFreeze: "true"},
			trace:    append(parentChain, hop(dc, 2, nil)),
		},
		{
			name: "create by a person: own user annotations kept, new origin",
			req: Request{Operation: Create, User: User{Name: alice}, Parent: tp, Now: now,
				Object: rs(1, map[string]string{kv1.TraceLabelPrefix + "ticket": "T-12", kv1.AnnotationTrace: parentTrace})},
			decision: DecisionNewOrigin,
			want:     map[string]string{kv1.AnnotationUpdaters: aliceHash, kv1.TraceLabelPrefix + "ticket": "T-12"},
			trace:    kv1.Trace{hop(alice, 2, withTicket("T-12"))},
		},
		{
			name: "root object (no parent) + spec change: 1-hop origin",
			req: Request{Operation: Update, User: User{Name: alice}, Now: now,
				OldObject: rs(1, stored), Object: rs(2, stored)},
			decision: DecisionNoParent,
			want:     merged(noTrace(stored), map[string]string{kv1.AnnotationUpdaters: dcHash + "," + aliceHash}),
			trace:    kv1.Trace{hop(alice, 2, withTicket("T-9"))},
		},
		{
			name: "root object created: 1-hop origin, system values wiped",
			req: Request{Operation: Create, User: User{Name: alice}, Now: now,
				Object: rs(1, map[string]string{kv1.AnnotationControllers: dcHash, kv1.AnnotationApprovals: "[]"})},
			decision: DecisionNoParent,
			want:     map[string]string{kv1.AnnotationUpdaters: aliceHash, kv1.AnnotationApprovals: "[]"},
			trace:    kv1.Trace{hop(alice, 2, nil)},
		},
		{
			name: "drift approved: a new origin whose hop records the approval",
			req: Request{Operation: Update, User: User{Name: dc}, Now: now, DefaultMode: kv1.ModeEnforce,
				Parent: with(update(), func(r *Request) {
					r.Parent.Annotations[kv1.AnnotationApprovals] = approvals(kv1.Approval{APIVersion: "*", Kind: "*", Name: "*", Mode: kv1.ApprovalAlways})
				}).Parent,
				OldObject: rs(1, stored), Object: rs(2, stored)},
			decision: DecisionDriftApproved,
			want:     noTrace(stored),
			trace:    kv1.Trace{hop(dc, 2, map[string]string{"ticket": "T-9", "kausality.io/approval": "always"})},
		},
		{
			name: "parent without a trace: a hop describes the parent",
			req: Request{Operation: Update, User: User{Name: dc}, Now: now,
				Parent: with(update(), func(r *Request) {
					r.Parent.Generation = 4
					delete(r.Parent.Annotations, kv1.AnnotationTrace)
				}).Parent,
				OldObject: rs(1, map[string]string{kv1.AnnotationUpdaters: dcHash}), Object: rs(2, nil)},
			decision: DecisionExpected,
			want:     map[string]string{kv1.AnnotationUpdaters: dcHash},
			trace: kv1.Trace{
				{APIVersion: "apps/v1", Kind: "Deployment", Name: "web", Generation: 4, Timestamp: hop("", 0, nil).Timestamp},
				hop(dc, 2, nil),
			},
		},
		{
			name: "parent with an unreadable trace: a hop describes the parent",
			req: Request{Operation: Update, User: User{Name: dc}, Now: now,
				Parent: with(update(), func(r *Request) {
					r.Parent.Generation = 4
					r.Parent.Annotations[kv1.AnnotationTrace] = "{broken"
				}).Parent,
				OldObject: rs(1, map[string]string{kv1.AnnotationUpdaters: dcHash}), Object: rs(2, nil)},
			decision: DecisionExpected,
			want:     map[string]string{kv1.AnnotationUpdaters: dcHash},
			trace: kv1.Trace{
				{APIVersion: "apps/v1", Kind: "Deployment", Name: "web", Generation: 4, Timestamp: hop("", 0, nil).Timestamp},
				hop(dc, 2, nil),
			},
		},
		{
			name: "initializing parent not yet observed: the controller extends the trace",
			req: Request{Operation: Create, User: User{Name: dc}, Now: now,
				Parent: with(update(), func(r *Request) {
					delete(r.Parent.Annotations, kv1.AnnotationPhase)
					r.Parent.Conditions, r.Parent.ObservedGeneration = nil, nil
				}).Parent,
				Object: rs(1, map[string]string{kv1.AnnotationTrace: parentTrace})},
			decision: DecisionInitializing,
			want:     map[string]string{kv1.AnnotationUpdaters: dcHash},
			trace:    append(mustTrace(parentTrace), hop(dc, 2, nil)),
		},
		{
			name: "initializing parent already observed: a new origin",
			req: Request{Operation: Create, User: User{Name: dc}, Now: now,
				Parent: with(update(), func(r *Request) {
					delete(r.Parent.Annotations, kv1.AnnotationPhase)
					r.Parent.Conditions = nil
				}).Parent,
				Object: rs(1, map[string]string{kv1.AnnotationTrace: parentTrace})},
			decision: DecisionInitializing,
			want:     map[string]string{kv1.AnnotationUpdaters: dcHash},
			trace:    kv1.Trace{hop(dc, 2, nil)},
		},
	})
}

func TestTraceCapped(t *testing.T) {
	var long kv1.Trace
	for i := range kv1.MaxTraceHops {
		long = append(long, kv1.Hop{APIVersion: "v1", Kind: "ConfigMap", Name: "c", Generation: int64(i + 1), Timestamp: now.Truncate(1e9)})
	}
	req := update()
	req.Parent.Generation = 4
	req.Parent.Annotations[kv1.AnnotationTrace] = kv1.FormatTrace(long)
	res := Decide(req)
	require.True(t, res.Allowed)
	tr := mustTrace(*res.Annotations[kv1.AnnotationTrace])
	require.Len(t, tr, kv1.MaxTraceHops)
	assert.Equal(t, long[0], tr[0], "origin kept")
	assert.Equal(t, long[2], tr[1], "oldest hop after the origin dropped")
	assert.Equal(t, hop(dc, 2, nil), tr[kv1.MaxTraceHops-1])
}

func TestUpdatersCapped(t *testing.T) {
	hs := []string{"aaaaa", "bbbbb", "ccccc", "ddddd", "eeeee"}
	req := update()
	req.Parent = nil
	req.User = User{Name: alice}
	req.OldObject = rs(1, map[string]string{kv1.AnnotationUpdaters: kv1.FormatUserHashes(hs)})
	req.Object = rs(2, nil)
	res := Decide(req)
	require.True(t, res.Allowed)
	assert.Equal(t, "bbbbb,ccccc,ddddd,eeeee,"+aliceHash, *res.Annotations[kv1.AnnotationUpdaters])
}

// TestBadInput: unparseable annotations a person writes are a 400 naming
// the annotation; the same values stored before, or copied by the
// controller, are not.
func TestBadInput(t *testing.T) {
	person := func(key, value string) Request {
		return with(update(), func(r *Request) {
			r.User = User{Name: alice}
			r.Object.SetAnnotations(merged(childAnn(), map[string]string{key: value}))
		})
	}
	bad := []struct{ key, value, msg string }{
		{kv1.AnnotationApprovals, `[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"web-1","mode":"forever"}]`, `mode "forever"`},
		{kv1.AnnotationRejections, `[{"kind":"ReplicaSet"}]`, "apiVersion is required"},
		{kv1.AnnotationFreeze, "yes", "want a JSON object"},
		{kv1.AnnotationSnooze, "tomorrow", "RFC3339"},
		{kv1.AnnotationMode, "strict", "not a mode"},
		{kv1.TraceLabelPrefix + "note", "line\nbreak", "control characters"},
	}
	var tests []decideCase
	for _, b := range bad {
		tests = append(tests,
			decideCase{name: "person writes " + b.key, req: person(b.key, b.value), code: 400, decision: DecisionInvalidAnnotation,
				reason: []string{b.key, b.msg}},
			decideCase{name: "person writes " + b.key + " on a root object, metadata only", req: with(person(b.key, b.value), func(r *Request) {
				r.Parent = nil
				r.Object = rs(1, r.Object.GetAnnotations())
			}), code: 400, decision: DecisionInvalidAnnotation, reason: []string{b.key, b.msg}},
			decideCase{name: "already stored " + b.key + " is left alone", req: with(person(b.key, b.value), func(r *Request) {
				r.OldObject.SetAnnotations(r.Object.GetAnnotations())
			}), allowed: true, decision: DecisionNewOrigin},
			decideCase{name: "controller copying " + b.key + " on create: dropped with a warning", req: with(create(), func(r *Request) {
				r.Parent.Generation = 4
				r.Object.SetAnnotations(map[string]string{b.key: b.value})
			}), allowed: true, decision: DecisionExpected, check: func(t *testing.T, res Result) {
				require.NotEmpty(t, res.Warnings)
				assert.Contains(t, res.Warnings[0], b.key)
				_, kept := res.Annotations[b.key]
				assert.True(t, kept, "the bad value is patched away")
				assert.Nil(t, res.Annotations[b.key])
			}},
		)
	}
	tests = append(tests, decideCase{name: "every bad annotation is named", req: with(update(), func(r *Request) {
		r.User = User{Name: alice}
		r.Object.SetAnnotations(map[string]string{kv1.AnnotationMode: "x", kv1.AnnotationFreeze: "y"})
	}), code: 400, decision: DecisionInvalidAnnotation, reason: []string{kv1.AnnotationMode, kv1.AnnotationFreeze}})
	runDecide(t, tests)
}
