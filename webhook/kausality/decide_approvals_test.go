package kausality

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	kv1 "github.com/remedy-dev/remedy/api/kausality/v1alpha1"
)

// TestApprovals covers approval modes, consumption and pruning.
func TestApprovals(t *testing.T) {
	web1 := func(gen int64, m kv1.ApprovalMode) kv1.Approval {
		return kv1.Approval{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-1", Generation: gen, Mode: m}
	}
	approved := func(as ...kv1.Approval) Request {
		return with(update(), func(r *Request) {
			r.DefaultMode = kv1.ModeEnforce
			r.Parent.Annotations[kv1.AnnotationApprovals] = approvals(as...)
		})
	}
	pu := func(want ParentUpdate) func(t *testing.T, res Result) {
		return func(t *testing.T, res Result) {
			if want == (ParentUpdate{}) {
				assert.Nil(t, res.ParentUpdate)
				return
			}
			require.NotNil(t, res.ParentUpdate)
			assert.Equal(t, want, *res.ParentUpdate)
		}
	}
	once := web1(3, kv1.ApprovalOnce)
	runDecide(t, []decideCase{
		{name: "once is consumed", req: approved(once), allowed: true, decision: DecisionDriftApproved, check: func(t *testing.T, res Result) {
			pu(ParentUpdate{ConsumeOnce: &once})(t, res)
			tr := mustTrace(*res.Annotations[kv1.AnnotationTrace])
			assert.Equal(t, map[string]string{"kausality.io/approval": "once"}, tr[len(tr)-1].Labels)
		}},
		{name: "once already consumed is absent", req: with(approved(once), func(r *Request) { r.ConsumedOnce = []kv1.Approval{once} }),
			code: 403, decision: DecisionDriftDenied},
		{name: "once for another generation is stale and pruned", req: approved(web1(2, kv1.ApprovalOnce)),
			code: 403, decision: DecisionDriftDenied, check: pu(ParentUpdate{PruneApprovals: true})},
		{name: "generation valid while it matches", req: approved(web1(3, kv1.ApprovalGeneration)),
			allowed: true, decision: DecisionDriftApproved, check: pu(ParentUpdate{})},
		{name: "generation moved on", req: approved(web1(2, kv1.ApprovalGeneration)),
			code: 403, decision: DecisionDriftDenied, check: pu(ParentUpdate{PruneApprovals: true})},
		{name: "always stays", req: approved(web1(0, kv1.ApprovalAlways)), allowed: true, decision: DecisionDriftApproved, check: pu(ParentUpdate{})},
		{name: "always preferred over once", req: approved(once, web1(0, kv1.ApprovalAlways)), allowed: true, decision: DecisionDriftApproved,
			check: func(t *testing.T, res Result) {
				assert.Equal(t, kv1.ApprovalAlways, res.Drift.Approval.Mode)
				assert.Nil(t, res.ParentUpdate, "the once approval is not spent")
			}},
		{name: "wildcards", req: approved(kv1.Approval{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "*", Generation: 3, Mode: kv1.ApprovalGeneration}),
			allowed: true, decision: DecisionDriftApproved},
		{name: "other child", req: approved(kv1.Approval{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-2", Mode: kv1.ApprovalAlways}),
			code: 403, decision: DecisionDriftDenied},
		{name: "stale approvals pruned on expected changes too", req: with(approved(web1(3, kv1.ApprovalOnce)), func(r *Request) { r.Parent.Generation = 4 }),
			allowed: true, decision: DecisionExpected, check: pu(ParentUpdate{PruneApprovals: true})},
		{name: "unparseable approvals approve nothing", req: with(update(), func(r *Request) {
			r.DefaultMode = kv1.ModeEnforce
			r.Parent.Annotations[kv1.AnnotationApprovals] = `[{"kind":"ReplicaSet"}]`
		}), code: 403, decision: DecisionDriftDenied, check: func(t *testing.T, res Result) {
			require.Len(t, res.Warnings, 1)
			assert.Contains(t, res.Warnings[0], "apiVersion is required")
		}},
		{name: "unparseable rejections deny", req: with(approved(web1(0, kv1.ApprovalAlways)), func(r *Request) {
			r.Parent.Annotations[kv1.AnnotationRejections] = `{"reason":"x"}`
		}), code: 403, decision: DecisionDriftRejected, reason: []string{kv1.AnnotationRejections, "does not parse"}},
		{name: "rejection for another generation does not apply", req: with(approved(web1(0, kv1.ApprovalAlways)), func(r *Request) {
			r.Parent.Annotations[kv1.AnnotationRejections] = `[{"apiVersion":"*","kind":"*","name":"*","generation":2,"reason":"old"}]`
		}), allowed: true, decision: DecisionDriftApproved},
		{name: "rejection for this generation applies", req: with(approved(web1(0, kv1.ApprovalAlways)), func(r *Request) {
			r.Parent.Annotations[kv1.AnnotationRejections] = `[{"apiVersion":"*","kind":"*","name":"*","generation":3,"reason":"now"}]`
		}), code: 403, decision: DecisionDriftRejected, reason: []string{"now"}},
		{name: "once naming the parent's metadata.generation is consumed", req: with(approved(web1(7, kv1.ApprovalOnce)), func(r *Request) {
			r.Parent.MetadataGeneration = 7 // annotation edits since the spec change at 3
		}), allowed: true, decision: DecisionDriftApproved, check: pu(ParentUpdate{ConsumeOnce: ptr(web1(7, kv1.ApprovalOnce))})},
		{name: "naming a generation ahead of the parent's metadata.generation: kept", req: with(approved(web1(8, kv1.ApprovalOnce)), func(r *Request) {
			r.Parent.MetadataGeneration = 7
		}), code: 403, decision: DecisionDriftDenied, check: pu(ParentUpdate{})},
		{name: "denied request consumes nothing", req: with(approved(once), func(r *Request) {
			r.Parent.Annotations[kv1.AnnotationRejections] = `[{"apiVersion":"*","kind":"*","name":"*","reason":"no"}]`
		}), code: 403, decision: DecisionDriftRejected, check: pu(ParentUpdate{})},
	})
}

// TestLifecycle covers initialization detection order and the high-water mark.
func TestLifecycle(t *testing.T) {
	state := func(phase string, og *int64, conds ...Condition) Request {
		return with(update(), func(r *Request) {
			r.DefaultMode = kv1.ModeEnforce
			delete(r.Parent.Annotations, kv1.AnnotationPhase)
			if phase != "" {
				r.Parent.Annotations[kv1.AnnotationPhase] = phase
			}
			r.Parent.ObservedGeneration = og
			r.Parent.Conditions = conds
		})
	}
	records := func(want string) func(t *testing.T, res Result) {
		return func(t *testing.T, res Result) {
			if want == "" {
				if res.ParentUpdate != nil {
					assert.Empty(t, res.ParentUpdate.Phase)
				}
				return
			}
			require.NotNil(t, res.ParentUpdate)
			assert.Equal(t, want, res.ParentUpdate.Phase)
		}
	}
	g3 := ptr(int64(3))
	runDecide(t, []decideCase{
		{name: "phase annotation", req: state(kv1.PhaseInitialized, g3), code: 403, decision: DecisionDriftDenied, check: records("")},
		{name: "phase annotation is a high-water mark", req: state(kv1.PhaseInitialized, g3, Condition{"Ready", "False"}),
			code: 403, decision: DecisionDriftDenied, check: records("")},
		{name: "Initialized=True", req: state("", g3, Condition{"Initialized", "True"}), code: 403, decision: DecisionDriftDenied,
			check: records(kv1.PhaseInitialized)},
		{name: "Ready=True", req: state("", g3, Condition{"Ready", "True"}), code: 403, decision: DecisionDriftDenied,
			check: records(kv1.PhaseInitialized)},
		{name: "observed with Available=True", req: state("", g3, Condition{"Available", "True"}), code: 403, decision: DecisionDriftDenied,
			check: records(kv1.PhaseInitialized)},
		{name: "phase initializing, now Ready", req: state(kv1.PhaseInitializing, g3, Condition{"Ready", "True"}), code: 403, decision: DecisionDriftDenied,
			check: records(kv1.PhaseInitialized)},
		{name: "Available but not observed", req: state("", ptr(int64(2)), Condition{"Available", "True"}), allowed: true, decision: DecisionInitializing,
			check: records("")},
		{name: "Available without observedGeneration", req: state("", nil, Condition{"Available", "True"}), allowed: true, decision: DecisionInitializing},
		{name: "observed but only Synced", req: state("", g3, Condition{"Synced", "True"}, Condition{"Ready", "False"}), allowed: true, decision: DecisionInitializing},
		{name: "phase initializing, no conditions", req: state(kv1.PhaseInitializing, g3), allowed: true, decision: DecisionInitializing},
		{name: "Ready=True with observedGeneration behind is initialized, and expected", req: state("", ptr(int64(2)), Condition{"Ready", "True"}),
			allowed: true, decision: DecisionExpected, check: records(kv1.PhaseInitialized)},
		{name: "no observedGeneration at all is lenient", req: state(kv1.PhaseInitialized, nil), allowed: true, decision: DecisionExpected},
		{name: "observedGeneration past the spec generation is not expected", req: state(kv1.PhaseInitialized, ptr(int64(5))),
			code: 403, decision: DecisionDriftDenied},
	})
}

// TestSnooze: snooze only marks drift as snoozed while it has not expired.
func TestSnooze(t *testing.T) {
	snooze := func(v string) Request {
		return with(update(), func(r *Request) { r.Parent.Annotations[kv1.AnnotationSnooze] = v })
	}
	snoozed := func(want bool, warnings int) func(t *testing.T, res Result) {
		return func(t *testing.T, res Result) {
			require.NotNil(t, res.Drift)
			assert.Equal(t, want, res.Drift.Snoozed)
			assert.Equal(t, want, !res.Drift.SnoozedUntil.IsZero(), "the expiry travels with the drift")
			assert.Len(t, res.Warnings, warnings+1, res.Warnings) // +1: the log-mode drift warning
		}
	}
	runDecide(t, []decideCase{
		{name: "active", req: snooze(`{"expiry":"2026-03-01T12:00:01Z"}`), allowed: true, decision: DecisionDriftLogged, check: func(t *testing.T, res Result) {
			snoozed(true, 0)(t, res)
			assert.Equal(t, time.Date(2026, 3, 1, 12, 0, 1, 0, time.UTC), res.Drift.SnoozedUntil.UTC())
		}},
		{name: "expired", req: snooze(`{"expiry":"2026-03-01T12:00:00Z"}`), allowed: true, decision: DecisionDriftLogged, check: snoozed(false, 0)},
		{name: "legacy active", req: snooze("2026-03-02T00:00:00+01:00"), allowed: true, decision: DecisionDriftLogged, check: snoozed(true, 0)},
		{name: "legacy expired", req: snooze("2026-02-28T00:00:00Z"), allowed: true, decision: DecisionDriftLogged, check: snoozed(false, 0)},
		{name: "unparseable does not snooze", req: snooze("later"), allowed: true, decision: DecisionDriftLogged, check: snoozed(false, 1)},
	})
}

// TestApprovalGenerationsWarnedAtAdmission: a person writing approvals on
// a parent whose spec last changed at generation 3 while its
// metadata.generation is 7 is warned about an approval that can never apply.
func TestApprovalGenerationsWarnedAtAdmission(t *testing.T) {
	deployment := func(approvals string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "apps/v1", "kind": "Deployment",
			"metadata": map[string]any{"namespace": "demo", "name": "web", "generation": int64(7)},
			"spec":     map[string]any{"replicas": int64(2)},
		}}
		if approvals != "" {
			u.SetAnnotations(map[string]string{kv1.AnnotationApprovals: approvals})
		}
		return u
	}
	rs1 := func(gen int64, m kv1.ApprovalMode) kv1.Approval {
		return kv1.Approval{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-1", Generation: gen, Mode: m}
	}
	write := func(old string, as ...kv1.Approval) Request {
		return Request{Operation: Update, User: User{Name: alice}, OldObject: deployment(old), Object: deployment(approvals(as...)),
			SpecGeneration: 3, DefaultMode: kv1.ModeLog, Now: now}
	}
	tests := []struct {
		name string
		req  Request
		warn []string
	}{
		{name: "before the spec change", req: write("", rs1(2, kv1.ApprovalOnce)),
			warn: []string{"kausality.io/approvals[0] (ReplicaSet web-1) names generation 2, but the spec of Deployment demo/web last changed at generation 3: it can never apply",
				"name generation 3 or a later metadata.generation (now 7)"}},
		{name: "generation mode too", req: write("", rs1(0, kv1.ApprovalAlways), rs1(1, kv1.ApprovalGeneration)),
			warn: []string{"kausality.io/approvals[1] (ReplicaSet web-1) names generation 1"}},
		{name: "the spec-change generation", req: write("", rs1(3, kv1.ApprovalOnce))},
		{name: "metadata.generation as kubectl shows it", req: write("", rs1(7, kv1.ApprovalOnce))},
		{name: "ahead, for a later spec change", req: write("", rs1(9, kv1.ApprovalOnce))},
		{name: "no generation", req: write("", rs1(0, kv1.ApprovalOnce))},
		{name: "always ignores it", req: write("", rs1(1, kv1.ApprovalAlways))},
		{name: "an approval already there is not warned about again", req: write(approvals(rs1(2, kv1.ApprovalOnce)), rs1(2, kv1.ApprovalOnce), rs1(7, kv1.ApprovalOnce))},
		{name: "spec generation unknown", req: with(write("", rs1(2, kv1.ApprovalOnce)), func(r *Request) { r.SpecGeneration = 0 })},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := Decide(tt.req)
			require.True(t, res.Allowed, res.Reason)
			assert.Equal(t, DecisionMetadataOnly, res.Decision)
			if len(tt.warn) == 0 {
				assert.Empty(t, res.Warnings)
				return
			}
			require.Len(t, res.Warnings, 1)
			for _, w := range tt.warn {
				assert.Contains(t, res.Warnings[0], w)
			}
		})
	}
}
