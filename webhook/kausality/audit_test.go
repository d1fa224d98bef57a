package kausality

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	kv1 "github.com/remedy-dev/remedy/api/kausality/v1alpha1"
)

// TestAudit ports kausality's pkg/admission/audit_test.go cases (their key
// names without the "kausality.io/" prefix the API server could not take)
// and adds the approved and rejected resolutions.
func TestAudit(t *testing.T) {
	with := func(r Request, f func(*Request)) Request { f(&r); return r }
	// traced stands for the trace the object ends with (the one patched
	// in, or on DELETE the one the deletion would give it); Decide's tests
	// say which trace that is.
	const traced = "<traced>"
	tests := []struct {
		name string
		req  Request
		want map[string]string
	}{
		{
			name: "create without owner: allowed, no drift, a one-hop trace, no phase",
			req: with(create(), func(r *Request) {
				r.Parent, r.User = nil, User{Name: alice}
				r.Object.SetOwnerReferences(nil)
			}),
			want: map[string]string{"decision": "allowed", "drift": "false", "mode": "log", "trace": traced},
		},
		{
			name: "update while the parent reconciles: no drift, the trace extends the parent's",
			req:  with(update(), func(r *Request) { r.Parent.ObservedGeneration = ptr(int64(2)) }),
			want: map[string]string{"decision": "allowed", "drift": "false", "mode": "log", "lifecycle-phase": "Initialized", "trace": traced},
		},
		{
			name: "drift in log mode: allowed with a warning, unresolved",
			req:  update(),
			want: map[string]string{"decision": "allowed-with-warning", "drift": "true", "mode": "log", "lifecycle-phase": "Initialized",
				"drift-resolution": "unresolved", "trace": traced},
		},
		{
			name: "drift in enforce mode: denied, unresolved, no trace",
			req:  with(update(), func(r *Request) { r.NamespaceMode = "enforce" }),
			want: map[string]string{"decision": "denied", "drift": "true", "mode": "enforce", "lifecycle-phase": "Initialized",
				"drift-resolution": "unresolved"},
		},
		{
			name: "approved drift",
			req: with(update(), func(r *Request) {
				r.Parent.Annotations[kv1.AnnotationApprovals] = approvals(kv1.Approval{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-1", Mode: kv1.ApprovalAlways})
			}),
			want: map[string]string{"decision": "allowed", "drift": "true", "mode": "log", "lifecycle-phase": "Initialized",
				"drift-resolution": "approved", "trace": traced},
		},
		{
			name: "rejected drift",
			req: with(update(), func(r *Request) {
				r.Parent.Annotations[kv1.AnnotationRejections] = `[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"web-1","reason":"no"}]`
			}),
			want: map[string]string{"decision": "denied", "drift": "true", "mode": "log", "lifecycle-phase": "Initialized",
				"drift-resolution": "rejected"},
		},
		{
			name: "delete by the controller while the parent reconciles: the trace the deletion would have",
			req:  with(del(), func(r *Request) { r.Parent.ObservedGeneration = ptr(int64(2)) }),
			want: map[string]string{"decision": "allowed", "drift": "false", "mode": "log", "lifecycle-phase": "Initialized", "trace": traced},
		},
		{
			name: "parent deleting",
			req:  with(update(), func(r *Request) { r.Parent.Deleting = true }),
			want: map[string]string{"decision": "allowed", "drift": "false", "mode": "log", "lifecycle-phase": "Deleting", "trace": traced},
		},
		{
			name: "freeze: denied before drift detection, no drift or mode",
			req: with(update(), func(r *Request) {
				r.Parent.Annotations[kv1.AnnotationFreeze] = `{"user":"carol","message":"incident 42","at":"2026-03-01T10:00:00Z"}`
			}),
			want: map[string]string{"decision": "denied", "lifecycle-phase": "Initialized"},
		},
		{
			name: "status update: no audit annotations",
			req: with(update(), func(r *Request) {
				r.SubResource, r.Parent = "status", nil
			}),
		},
		{
			name: "metadata-only change: no audit annotations",
			req: with(update(), func(r *Request) {
				r.Object = rs(1, map[string]string{"team": "web"})
			}),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := Decide(tt.req)
			got := Audit(tt.req, res)
			if tt.want == nil {
				require.Nil(t, got)
				return
			}
			if tt.want["trace"] == traced {
				tr := mustTrace(got["trace"])
				require.NotEmpty(t, tr)
				assert.Equal(t, tt.req.User.Name, tr[len(tr)-1].User, "the last hop is this request's")
				if tt.req.Operation != Delete {
					require.NotNil(t, res.Annotations[kv1.AnnotationTrace])
					assert.Equal(t, *res.Annotations[kv1.AnnotationTrace], got["trace"], "the audit log gets the trace patched in")
				}
				got["trace"] = traced
			}
			assert.Equal(t, tt.want, got)
		})
	}
}

// BenchmarkAudit times the audit annotations of BenchmarkDecide's request
// (drift: the mode comes with it) and of a person's change (no drift: the
// mode is resolved again).
func BenchmarkAudit(b *testing.B) {
	person := update()
	person.User = User{Name: alice}
	for _, bc := range []struct {
		name string
		req  Request
	}{{"drift", update()}, {"new-origin", person}} {
		b.Run(bc.name, func(b *testing.B) {
			res := Decide(bc.req)
			b.ReportAllocs()
			for range b.N {
				Audit(bc.req, res)
			}
		})
	}
}
