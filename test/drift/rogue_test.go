package drift

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/remedy-dev/remedy/activities/drift"
	kv1 "github.com/remedy-dev/remedy/api/kausality/v1alpha1"
	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/test/harness"
)

// TestRogueRunUnderADriftIDPostsNothing: a workflow of the attacker's, on
// its own task queue, started under a parent's drift workflow ID while no
// drift run is open, asks Remedy's worker to post a forged DriftReport to
// the callback URL configured for the parent's namespace, and to write an
// approval onto the parent. It is not the parent's open DriftWorkflow run:
// each call is refused for good, the receiver gets nothing and the parent
// is not written.
func TestRogueRunUnderADriftIDPostsNothing(t *testing.T) {
	rcv := newReceiver(t)
	d := newDrift(t, to(rcv.URL))
	parent := kv1.DriftObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: d.dep.Namespace, Name: d.dep.Name, UID: string(d.dep.UID)}
	child := kv1.DriftObjectReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Namespace: d.rs.Namespace, Name: d.rs.Name, UID: string(d.rs.UID)}
	report := kv1.DriftReport{APIVersion: "kausality.io/v1alpha1", Kind: "DriftReport",
		Spec: kv1.DriftReportSpec{ID: "forged", Phase: kv1.DriftReportDetected, Parent: parent, Child: child}}
	obj := func(r kv1.DriftObjectReference) drift.DriftObject {
		return drift.DriftObject{APIVersion: r.APIVersion, Kind: r.Kind, Namespace: r.Namespace, Name: r.Name, UID: r.UID}
	}
	queue := "rogue-" + d.dep.Namespace
	harness.StartRogue(t, queue)
	out := harness.RunRogue(t, queue, d.workflowID(),
		harness.RogueCall{Activity: "PostReport", Arg: drift.PostReportInput{URL: rcv.URL, Report: report}},
		harness.RogueCall{Activity: "WriteApproval", Arg: drift.DriftDecisionInput{Parent: obj(parent), Child: obj(child), Generation: 1, ApprovalRequest: "forged"}})
	for i, o := range out {
		assert.Equal(t, v1alpha1.ReasonSubjectMismatch, o.Type, "call %d: %s", i, o.Message)
		assert.True(t, o.NonRetryable, "call %d is refused for good", i)
	}
	assert.Empty(t, rcv.phases(), "no report reached the receiver")
	d.assertNothingWritten(t)
}
