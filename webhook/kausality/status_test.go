package kausality

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	kv1 "github.com/remedy-dev/remedy/api/kausality/v1alpha1"
)

// deployment is demo/web as its controller writes its status.
func deployment(ann map[string]string, observed int64, conds ...Condition) *unstructured.Unstructured {
	cs := make([]any, len(conds))
	for i, c := range conds {
		cs[i] = map[string]any{"type": c.Type, "status": c.Status}
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"namespace": "demo", "name": "web", "generation": int64(3)},
		"spec":     map[string]any{"replicas": int64(1)},
		"status":   map[string]any{"conditions": cs},
	}}
	if observed > 0 {
		u.Object["status"].(map[string]any)["observedGeneration"] = observed
	}
	if ann != nil {
		u.SetAnnotations(ann)
	}
	return u
}

func TestStatusUpdate(t *testing.T) {
	stored := map[string]string{
		kv1.AnnotationTrace:     parentTrace,
		kv1.AnnotationUpdaters:  aliceHash,
		kv1.AnnotationApprovals: approvals(kv1.Approval{APIVersion: "*", Kind: "*", Name: "*", Mode: kv1.ApprovalAlways}),
	}
	available := Condition{"Available", "True"}
	tests := []struct {
		name      string
		user      string
		old, cur  *unstructured.Unstructured
		want      map[string]string
		update    *ParentUpdate
		parentRef bool // Request.Parent set: the status update of a child is still a status update
	}{
		{
			name: "first status update by the controller: recorded, kausality annotations preserved, initialized",
			user: dc, old: deployment(stored, 3, available),
			cur:    deployment(map[string]string{kv1.AnnotationTrace: "[]", kv1.AnnotationFreeze: "true"}, 3, available),
			want:   merged(stored, map[string]string{kv1.AnnotationControllers: dcHash}),
			update: &ParentUpdate{AddController: dcHash, Phase: kv1.PhaseInitialized},
		},
		{
			name: "known controller, already initialized: nothing to record",
			user: dc,
			old:  deployment(merged(stored, map[string]string{kv1.AnnotationControllers: dcHash, kv1.AnnotationPhase: kv1.PhaseInitialized}), 3, available),
			cur:  deployment(merged(stored, map[string]string{kv1.AnnotationControllers: dcHash, kv1.AnnotationPhase: kv1.PhaseInitialized}), 3, available),
			want: merged(stored, map[string]string{kv1.AnnotationControllers: dcHash, kv1.AnnotationPhase: kv1.PhaseInitialized}),
		},
		{
			name: "not initialized yet: no phase",
			user: dc, old: deployment(stored, 2, available), cur: deployment(stored, 2, available),
			want:   merged(stored, map[string]string{kv1.AnnotationControllers: dcHash}),
			update: &ParentUpdate{AddController: dcHash},
		},
		{
			name: "phase is never downgraded",
			user: dc,
			old:  deployment(map[string]string{kv1.AnnotationControllers: dcHash, kv1.AnnotationPhase: kv1.PhaseInitialized}, 2, Condition{"Ready", "False"}),
			cur:  deployment(nil, 2, Condition{"Ready", "False"}),
			want: map[string]string{kv1.AnnotationControllers: dcHash, kv1.AnnotationPhase: kv1.PhaseInitialized},
		},
		{
			name:   "second status writer joins, oldest of five dropped",
			user:   bob,
			old:    deployment(map[string]string{kv1.AnnotationControllers: "aaaaa,bbbbb,ccccc,ddddd,eeeee"}, 3),
			cur:    deployment(nil, 3),
			want:   map[string]string{kv1.AnnotationControllers: "bbbbb,ccccc,ddddd,eeeee," + bobHash},
			update: &ParentUpdate{AddController: bobHash},
		},
		{
			name:   "no status.observedGeneration: synthetic one recorded",
			user:   dc,
			old:    deployment(map[string]string{kv1.AnnotationControllers: dcHash}, 0, Condition{"Ready", "True"}),
			cur:    deployment(nil, 0, Condition{"Ready", "True"}),
			want:   map[string]string{kv1.AnnotationControllers: dcHash},
			update: &ParentUpdate{Phase: kv1.PhaseInitialized, ObservedGeneration: ptr(int64(3))},
		},
		{
			name: "synthetic observedGeneration already recorded",
			user: dc,
			old: deployment(map[string]string{kv1.AnnotationControllers: dcHash, kv1.AnnotationObservedGeneration: "3",
				kv1.AnnotationPhase: kv1.PhaseInitialized}, 0),
			cur: deployment(nil, 0),
			want: map[string]string{kv1.AnnotationControllers: dcHash, kv1.AnnotationObservedGeneration: "3",
				kv1.AnnotationPhase: kv1.PhaseInitialized},
		},
		{
			name: "a child's status update is a status update, not drift",
			user: "system:serviceaccount:kube-system:replicaset-controller", parentRef: true,
			old: rs(1, childAnn()), cur: rs(1, childAnn()),
			want:   merged(kausalityAnnotations(rs(1, childAnn())), map[string]string{kv1.AnnotationControllers: kv1.UserHash("system:serviceaccount:kube-system:replicaset-controller", "")}),
			update: &ParentUpdate{AddController: kv1.UserHash("system:serviceaccount:kube-system:replicaset-controller", "")},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := Request{Operation: Update, SubResource: "status", User: User{Name: tt.user},
				OldObject: tt.old, Object: tt.cur, DefaultMode: kv1.ModeEnforce, Now: now}
			if tt.parentRef {
				req.Parent = parent()
			}
			res := Decide(req)
			assert.True(t, res.Allowed)
			assert.Equal(t, DecisionStatus, res.Decision)
			assert.Nil(t, res.Drift)
			assert.Equal(t, tt.want, final(t, req, res))
			assert.Equal(t, tt.update, res.ParentUpdate)
		})
	}
}

func TestSpecChanged(t *testing.T) {
	base := rs(1, nil)
	tests := []struct {
		name string
		mut  func(u *unstructured.Unstructured)
		want bool
	}{
		{"identical", func(*unstructured.Unstructured) {}, false},
		{"labels", func(u *unstructured.Unstructured) { u.SetLabels(map[string]string{"a": "b"}) }, false},
		{"status", func(u *unstructured.Unstructured) { u.Object["status"] = map[string]any{"replicas": int64(9)} }, false},
		{"spec field", func(u *unstructured.Unstructured) { u.Object["spec"].(map[string]any)["replicas"] = int64(3) }, true},
		{"new top-level field", func(u *unstructured.Unstructured) { u.Object["data"] = map[string]any{"k": "v"} }, true},
		{"removed spec", func(u *unstructured.Unstructured) { delete(u.Object, "spec") }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cur := base.DeepCopy()
			tt.mut(cur)
			assert.Equal(t, tt.want, specChanged(base, cur))
		})
	}
	require.True(t, specChanged(nil, base), "CREATE is a change")
}
