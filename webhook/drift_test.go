package webhook

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gomodules.xyz/jsonpatch/v2"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"

	kv1 "github.com/remedy-dev/remedy/api/kausality/v1alpha1"
	"github.com/remedy-dev/remedy/webhook/kausality"
	"github.com/remedy-dev/remedy/workflows"
)

func TestAnnotationPatch(t *testing.T) {
	v := func(s string) *string { return &s }
	tests := []struct {
		name    string
		current map[string]string
		changes map[string]*string
		want    []jsonpatch.JsonPatchOperation
	}{
		{"no annotations yet", nil, map[string]*string{kv1.AnnotationTrace: v("[]"), kv1.AnnotationUpdaters: nil},
			[]jsonpatch.JsonPatchOperation{jsonpatch.NewOperation("add", "/metadata/annotations", map[string]any{kv1.AnnotationTrace: "[]"})}},
		{"nothing to add to none", nil, map[string]*string{kv1.AnnotationTrace: nil}, nil},
		{"set, replace, remove; slash escaped; unchanged skipped",
			map[string]string{kv1.AnnotationUpdaters: "abcde", kv1.AnnotationPhase: "initialized", kv1.AnnotationFreeze: "true"},
			map[string]*string{kv1.AnnotationUpdaters: v("abcde,fghij"), kv1.AnnotationPhase: v("initialized"), kv1.AnnotationFreeze: nil, kv1.AnnotationTrace: v("[]")},
			[]jsonpatch.JsonPatchOperation{
				jsonpatch.NewOperation("remove", "/metadata/annotations/kausality.io~1freeze", nil),
				jsonpatch.NewOperation("add", "/metadata/annotations/kausality.io~1trace", "[]"),
				jsonpatch.NewOperation("add", "/metadata/annotations/kausality.io~1updaters", "abcde,fghij"),
			}},
		{"removing an absent key is no operation", map[string]string{"a": "b"}, map[string]*string{kv1.AnnotationTrace: nil}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, annotationPatch(tt.current, tt.changes))
		})
	}
}

func TestApplyParentUpdate(t *testing.T) {
	once := kv1.Approval{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-1", Generation: 3, Mode: kv1.ApprovalOnce}
	stale := kv1.Approval{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-0", Generation: 2, Mode: kv1.ApprovalGeneration}
	always := kv1.Approval{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "*", Mode: kv1.ApprovalAlways}
	tests := []struct {
		name    string
		ann     map[string]string
		update  kausality.ParentUpdate
		want    map[string]string
		changed bool
	}{
		{"records a controller and the phase", map[string]string{},
			kausality.ParentUpdate{AddController: "abcde", Phase: kv1.PhaseInitialized},
			map[string]string{kv1.AnnotationControllers: "abcde", kv1.AnnotationPhase: kv1.PhaseInitialized}, true},
		{"a known controller changes nothing", map[string]string{kv1.AnnotationControllers: "abcde"},
			kausality.ParentUpdate{AddController: "abcde"}, map[string]string{kv1.AnnotationControllers: "abcde"}, false},
		{"prunes stale approvals, keeps current and always ones",
			map[string]string{kv1.AnnotationApprovals: kv1.FormatApprovals([]kv1.Approval{once, stale, always})},
			kausality.ParentUpdate{PruneApprovals: true},
			map[string]string{kv1.AnnotationApprovals: kv1.FormatApprovals([]kv1.Approval{once, always})}, true},
		{"pruning the last approval removes the annotation",
			map[string]string{kv1.AnnotationApprovals: kv1.FormatApprovals([]kv1.Approval{stale})},
			kausality.ParentUpdate{PruneApprovals: true}, map[string]string{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.changed, applyParentUpdate(tt.ann, tt.update, 3))
			assert.Equal(t, tt.want, tt.ann)
		})
	}
}

func TestReportIDIsStableAndDistinct(t *testing.T) {
	p := workflows.DriftObjectRef{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "a", Name: "web"}
	c := workflows.DriftObjectRef{APIVersion: "apps/v1", Kind: "ReplicaSet", Namespace: "a", Name: "web-1"}
	id := reportID(p, c, "UPDATE:x>y")
	assert.Len(t, id, 16)
	assert.Equal(t, id, reportID(p, c, "UPDATE:x>y"))
	assert.NotEqual(t, id, reportID(p, c, "UPDATE:x>z"))
}

func TestTrimParentKeepsWhatTheDecisionReads(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "web", "generation": int64(4), "managedFields": []any{map[string]any{"manager": "x"}},
			"annotations": map[string]any{kv1.AnnotationPhase: "initialized"}},
		"spec":   map[string]any{"replicas": int64(1)},
		"status": map[string]any{"observedGeneration": int64(4), "replicas": int64(1), "conditions": []any{map[string]any{"type": "Available", "status": "True"}}},
	}}
	got, err := trimParent(u)
	assert.NoError(t, err)
	tu := got.(*unstructured.Unstructured)
	assert.Nil(t, tu.Object["spec"])
	assert.Nil(t, tu.GetManagedFields())
	assert.Equal(t, "initialized", tu.GetAnnotations()[kv1.AnnotationPhase])
	assert.Equal(t, map[string]any{"observedGeneration": int64(4), "conditions": []any{map[string]any{"type": "Available", "status": "True"}}}, tu.Object["status"])
	assert.Equal(t, kv1.SpecHash(u.Object), SpecHash(tu))
	assert.Equal(t, true, tu.Object[rollingOutField], "no replica runs the new template yet: rolling out")

	_ = unstructured.SetNestedField(u.Object, int64(1), "status", "updatedReplicas")
	got, err = trimParent(u)
	assert.NoError(t, err)
	assert.NotContains(t, got.(*unstructured.Unstructured).Object, rollingOutField, "rolled out")
}

func TestSpecGenerationIgnoresAnnotationOnlyBumps(t *testing.T) {
	c := NewParentCache(nil, nil, nil)
	parent := func(generation, replicas int64) *unstructured.Unstructured {
		p, err := trimParent(&unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "apps/v1", "kind": "Deployment",
			"metadata": map[string]any{"name": "web", "uid": "u1", "generation": generation},
			"spec":     map[string]any{"replicas": replicas},
		}})
		assert.NoError(t, err)
		return p.(*unstructured.Unstructured)
	}
	assert.Equal(t, int64(1), c.SpecGeneration(parent(1, 1)))
	assert.Equal(t, int64(1), c.SpecGeneration(parent(2, 1)), "an annotation edit bumped generation; the spec is unchanged")
	assert.Equal(t, int64(3), c.SpecGeneration(parent(3, 2)), "a spec change")
	assert.Equal(t, int64(3), c.SpecGeneration(parent(4, 2)))
}

// The configuration's kinds must be the ones the webhook watches from the
// start and holds RBAC for (DefaultParentKinds, the markers in drift_run.go).
func TestDriftConfigurationCoversWatchedKinds(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "deploy", "webhook", "drift.yaml"))
	require.NoError(t, err)
	var mwc admissionregistrationv1.MutatingWebhookConfiguration
	require.NoError(t, yaml.Unmarshal(raw, &mwc))
	require.Len(t, mwc.Webhooks, 1)
	assert.Equal(t, DriftPath, *mwc.Webhooks[0].ClientConfig.Service.Path)
	watched := map[string]bool{}
	for _, g := range DefaultParentKinds {
		watched[g.Group+"/"+g.Resource] = true
	}
	for _, r := range mwc.Webhooks[0].Rules {
		for _, res := range r.Resources {
			base, _, _ := strings.Cut(res, "/")
			assert.True(t, watched[r.APIGroups[0]+"/"+base], "%s/%s is admitted but not watched", r.APIGroups[0], base)
		}
	}
}

func TestConsumePatchTestsTheValueItRead(t *testing.T) {
	once := kv1.Approval{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-1", Mode: kv1.ApprovalOnce}
	always := kv1.Approval{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "*", Mode: kv1.ApprovalAlways}
	both := kv1.FormatApprovals([]kv1.Approval{once, always})
	path := "/metadata/annotations/kausality.io~1approvals"

	got, err := consumePatch(both, once)
	require.NoError(t, err)
	assert.JSONEq(t, mustJSON(t, []map[string]any{
		{"op": "test", "path": path, "value": both},
		{"op": "replace", "path": path, "value": kv1.FormatApprovals([]kv1.Approval{always})},
	}), string(got))

	only := kv1.FormatApprovals([]kv1.Approval{once})
	got, err = consumePatch(only, once)
	require.NoError(t, err)
	assert.JSONEq(t, mustJSON(t, []map[string]any{{"op": "test", "path": path, "value": only}, {"op": "remove", "path": path}}), string(got))

	_, err = consumePatch(kv1.FormatApprovals([]kv1.Approval{always}), once)
	assert.ErrorContains(t, err, "not in the parent's approvals")
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}
