package kausality

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	kv1 "github.com/remedy-dev/remedy/api/kausality/v1alpha1"
)

// kausality's cases for the annotations a change leaves on the object
// (pkg/admission computeAnnotations*, pkg/trace ExtractTraceLabels),
// restated as in kausality_cases_test.go.

// TestKausalityTraceLabelCases: a spec change's hop carries the object's
// trace-<key> annotations; the prefix alone is no label and is ignored, as
// in kausality (the API server then refuses the key itself).
func TestKausalityTraceLabelCases(t *testing.T) {
	req := with(update(), func(r *Request) {
		r.User = User{Name: alice}
		r.Object.SetAnnotations(merged(childAnn(), map[string]string{
			kv1.TraceLabelPrefix: "no key", kv1.TraceLabelPrefix + "ticket": "T-1"}))
	})
	res := Decide(req)
	require.True(t, res.Allowed, res.Reason)
	assert.Equal(t, DecisionNewOrigin, res.Decision)
	tr := mustTrace(res.Trace)
	require.Len(t, tr, 1)
	assert.Equal(t, map[string]string{"ticket": "T-1"}, tr[0].Labels)
	assert.Empty(t, res.Warnings)
}

// TestKausalityMetadataOnlyCases: a change without a spec change. kausality
// keeps every stored kausality annotation, whoever changes the object, and
// takes new keys as written. Remedy keeps that for the controller's stored
// values, but lets a person edit and remove user annotations (so a freeze
// can be lifted with kubectl annotate) and keeps a controller's copies of
// new ones off the child: departures, docs/drift.md says why.
func TestKausalityMetadataOnlyCases(t *testing.T) {
	const frozen, other = `{"message":"incident 7"}`, `{"message":"incident 8"}`
	stored := childAnn()
	trace := mustTrace(stored[kv1.AnnotationTrace])
	system := map[string]string{kv1.AnnotationUpdaters: dcHash}
	change := func(user string, old, cur map[string]string) Request {
		return Request{Operation: Update, User: User{Name: user}, Parent: parent(), Now: now,
			OldObject: rs(1, merged(stored, old)), Object: rs(1, merged(stored, cur))}
	}
	freeze := func(v string) map[string]string { return map[string]string{kv1.AnnotationFreeze: v} }
	runAnnotations(t, []annotationCase{
		{name: "a person adds a freeze: kept", req: change(alice, nil, freeze(frozen)),
			decision: DecisionMetadataOnly, want: merged(system, freeze(frozen)), trace: trace},
		{name: "the controller leaves the stored freeze out: kept", req: with(change(dc, freeze(frozen), nil), func(r *Request) {
			r.Object = rs(1, stored)
		}), decision: DecisionMetadataOnly, want: merged(system, freeze(frozen)), trace: trace},
		// Departure: kausality keeps the stored freeze.
		{name: "a person removes the stored freeze: removed", req: with(change(alice, freeze(frozen), nil), func(r *Request) {
			r.Object = rs(1, stored)
		}), decision: DecisionMetadataOnly, want: system, trace: trace},
		// Departure: kausality keeps the stored value.
		{name: "a person changes the stored freeze: the new value", req: change(alice, freeze(frozen), freeze(other)),
			decision: DecisionMetadataOnly, want: merged(system, freeze(other)), trace: trace},
		// Departure: kausality takes the controller's new key as written.
		{name: "the controller copies the parent's freeze onto the child: dropped", req: change(dc, nil, freeze(frozen)),
			decision: DecisionMetadataOnly, want: system, trace: trace},
	})
}
