package kausality

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	kv1 "github.com/remedy-dev/remedy/api/kausality/v1alpha1"
)

// TestObservedGeneration ports kausality's TestExtractConditionObservedGeneration
// (pkg/drift/resolver_test.go) and adds status.observedGeneration's precedence.
func TestObservedGeneration(t *testing.T) {
	cond := func(typ string, og ...int64) map[string]any {
		c := map[string]any{"type": typ, "status": "True"}
		if len(og) > 0 {
			c["observedGeneration"] = og[0]
		}
		return c
	}
	tests := []struct {
		name      string
		status    map[string]any
		want      int64
		wantFound bool
	}{
		{name: "no conditions", status: map[string]any{}},
		{name: "empty conditions", status: map[string]any{"conditions": []any{}}},
		{name: "conditions without observedGeneration", status: map[string]any{"conditions": []any{cond("Synced"), cond("Ready")}}},
		{name: "Synced condition with observedGeneration", status: map[string]any{"conditions": []any{cond("Synced", 5)}}, want: 5, wantFound: true},
		{name: "Ready condition with observedGeneration (no Synced)", status: map[string]any{"conditions": []any{cond("Ready", 7)}}, want: 7, wantFound: true},
		{name: "both Synced and Ready - prefers Synced", status: map[string]any{"conditions": []any{cond("Ready", 3), cond("Synced", 5)}}, want: 5, wantFound: true},
		{name: "Synced without observedGeneration falls back to Ready", status: map[string]any{"conditions": []any{cond("Synced"), cond("Ready", 9)}}, want: 9, wantFound: true},
		{name: "other condition types are ignored", status: map[string]any{"conditions": []any{cond("Progressing", 10)}}},
		{name: "status.observedGeneration wins over conditions",
			status: map[string]any{"observedGeneration": int64(2), "conditions": []any{cond("Synced", 5)}}, want: 2, wantFound: true},
		{name: "status.observedGeneration zero is still observed", status: map[string]any{"observedGeneration": int64(0)}, wantFound: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj := &unstructured.Unstructured{Object: map[string]any{"status": tt.status}}
			got, found := ObservedGeneration(obj)
			assert.Equal(t, tt.want, got, "observedGeneration")
			assert.Equal(t, tt.wantFound, found, "found")
		})
	}
}

// TestCrossplaneParentIsJudgedByItsConditions: a parent that reports its
// observedGeneration only on Synced/Ready is stable (drift) or reconciling
// (expected) by those conditions, not lenient "expected" for want of one.
func TestCrossplaneParentIsJudgedByItsConditions(t *testing.T) {
	tests := []struct {
		name  string
		conds []any
		want  DecisionKind
	}{
		{"Synced caught up: drift", []any{map[string]any{"type": "Synced", "status": "True", "observedGeneration": int64(3)},
			map[string]any{"type": "Ready", "status": "True"}}, DecisionDriftDenied},
		{"Synced behind, Ready caught up: Synced wins, expected", []any{map[string]any{"type": "Synced", "status": "True", "observedGeneration": int64(2)},
			map[string]any{"type": "Ready", "status": "True", "observedGeneration": int64(3)}}, DecisionExpected},
		{"Ready caught up, no Synced: drift", []any{map[string]any{"type": "Ready", "status": "True", "observedGeneration": int64(3)}}, DecisionDriftDenied},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mr := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "ec2.aws.upbound.io/v1beta1", "kind": "VPC",
				"metadata": map[string]any{"namespace": "demo", "name": "web", "generation": int64(3)},
				"status":   map[string]any{"conditions": tt.conds},
			}}
			p := asParent(mr)
			p.Annotations = parent().Annotations
			req := update()
			req.Parent, req.DefaultMode = &p, kv1.ModeEnforce
			res := Decide(req)
			assert.Equal(t, tt.want, res.Decision, res.Reason)
		})
	}
}
