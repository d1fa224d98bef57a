package actions

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/remedy-dev/remedy/api/v1alpha1"
)

func obj(kind string, fields map[string]any) *unstructured.Unstructured {
	o := map[string]any{"kind": kind, "metadata": map[string]any{"name": "x", "namespace": "shop", "resourceVersion": "7"}}
	for k, v := range fields {
		o[k] = v
	}
	return &unstructured.Unstructured{Object: o}
}

func TestSetImagePlan(t *testing.T) {
	d := obj("Deployment", map[string]any{"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
		"containers": []any{map[string]any{"name": "app", "image": "app:1"}, map[string]any{"name": "side", "image": "side:1"}},
	}}}})
	p, err := setImage{}.Plan(d, Request{Params: v1alpha1.ActionParameters{Container: "app", Image: "app:2"}})
	require.NoError(t, err)
	assert.Equal(t, "image: app:1 -> app:2", Impact(p.Change))
	assert.Equal(t, "app:1", p.Rollback.RollbackParameters.Image)
	assert.JSONEq(t, `{"metadata":{"resourceVersion":"7"},"spec":{"template":{"spec":{"containers":[{"name":"app","image":"app:2"},{"name":"side","image":"side:1"}]}}}}`, p.Patch)

	_, err = setImage{}.Plan(d, Request{Params: v1alpha1.ActionParameters{Container: "nope", Image: "x"}})
	var inv *InvalidError
	require.ErrorAs(t, err, &inv)
	assert.Contains(t, err.Error(), `has no container "nope"`)
}

func TestPatchPlanCapturesInverse(t *testing.T) {
	cm := obj("ConfigMap", map[string]any{"data": map[string]any{"mode": "fast", "keep": "1"}})
	req := Request{Params: v1alpha1.ActionParameters{Patch: &apiextensionsv1.JSON{Raw: []byte(`{"data":{"mode":"safe","added":"y"}}`)}}}
	require.NoError(t, patch{}.Validate(req))
	p, err := patch{}.Plan(cm, req)
	require.NoError(t, err)
	assert.JSONEq(t, `{"data":{"mode":"fast","added":null}}`, string(p.Rollback.RollbackParameters.Patch.Raw))
	assert.Equal(t, `data.added: null, data.mode: "fast"`, p.Change.Before)
	assert.Equal(t, `data.added: "y", data.mode: "safe"`, p.Change.After)

	for _, bad := range []string{`{"status":{}}`, `{"metadata":{"name":"y"}}`, `[1]`, `{"metadata":null}`,
		`{"metadata":{"ownerReferences":[{"apiVersion":"v1","kind":"Node","name":"n","uid":"1"}]}}`, `{"metadata":{"finalizers":["x"]}}`} {
		err := patch{}.Validate(Request{Params: v1alpha1.ActionParameters{Patch: &apiextensionsv1.JSON{Raw: []byte(bad)}}})
		assert.Error(t, err, bad)
	}
	require.NoError(t, patch{}.Validate(Request{Params: v1alpha1.ActionParameters{Patch: &apiextensionsv1.JSON{Raw: []byte(`{"metadata":{"labels":{"a":"b"},"annotations":{"c":"d"}}}`)}}}))
}

// The patch action's labels and annotations reach the write next to the
// pinned resourceVersion, and the rollback undoes exactly them.
func TestPatchPlanKeepsLabelsAndAnnotations(t *testing.T) {
	cm := obj("ConfigMap", map[string]any{"data": map[string]any{"mode": "fast"}})
	_ = unstructured.SetNestedStringMap(cm.Object, map[string]string{"team": "web", "gone": "soon"}, "metadata", "labels")
	raw := `{"metadata":{"labels":{"tier":"gold","team":"payments","gone":null},"annotations":{"remedy.dev/why":"incident 42"}},"data":{"mode":"safe"}}`
	req := Request{Params: v1alpha1.ActionParameters{Patch: &apiextensionsv1.JSON{Raw: []byte(raw)}}}
	require.NoError(t, patch{}.Validate(req))
	p, err := patch{}.Plan(cm, req)
	require.NoError(t, err)
	assert.False(t, p.NoOp)
	assert.JSONEq(t, `{"metadata":{"resourceVersion":"7","labels":{"tier":"gold","team":"payments","gone":null},"annotations":{"remedy.dev/why":"incident 42"}},"data":{"mode":"safe"}}`, p.Patch)
	assert.JSONEq(t, `{"metadata":{"labels":{"tier":null,"team":"web","gone":"soon"},"annotations":{"remedy.dev/why":null}},"data":{"mode":"fast"}}`,
		string(p.Rollback.RollbackParameters.Patch.Raw), "the object had no annotations: the rollback removes only the one added")
	assert.JSONEq(t, raw, string(req.Params.Patch.Raw), "planning leaves the request as asked")

	// The rollback is itself a patch whose metadata reaches the write.
	back := Request{Params: *p.Rollback.RollbackParameters}
	require.NoError(t, patch{}.Validate(back))
	after := obj("ConfigMap", map[string]any{"data": map[string]any{"mode": "safe"}})
	_ = unstructured.SetNestedStringMap(after.Object, map[string]string{"team": "payments", "tier": "gold"}, "metadata", "labels")
	_ = unstructured.SetNestedStringMap(after.Object, map[string]string{"remedy.dev/why": "incident 42"}, "metadata", "annotations")
	rb, err := patch{}.Plan(after, back)
	require.NoError(t, err)
	assert.JSONEq(t, `{"metadata":{"resourceVersion":"7","labels":{"tier":null,"team":"web","gone":"soon"},"annotations":{"remedy.dev/why":null}},"data":{"mode":"fast"}}`, rb.Patch)

	for bad, want := range map[string]string{
		`{"metadata":{"labels":["a"]}}`:               "metadata.labels must be an object of strings",
		`{"metadata":{"annotations":{"n":1}}}`:        "metadata.annotations.n must be a string (or null to remove it)",
		`{"metadata":{"labels":{"ok":"y","n":true}}}`: "metadata.labels.n must be a string",
	} {
		err := patch{}.Validate(Request{Params: v1alpha1.ActionParameters{Patch: &apiextensionsv1.JSON{Raw: []byte(bad)}}})
		var inv *InvalidError
		require.ErrorAs(t, err, &inv, bad)
		assert.Contains(t, err.Error(), want)
	}
}

func TestCordonPlan(t *testing.T) {
	n := obj("Node", map[string]any{"spec": map[string]any{}})
	p, err := cordon{unschedulable: true}.Plan(n, Request{})
	require.NoError(t, err)
	assert.False(t, p.NoOp)
	assert.Equal(t, "uncordon", p.Rollback.RollbackAction)
	assert.JSONEq(t, `{"metadata":{"resourceVersion":"7"},"spec":{"unschedulable":true}}`, p.Patch)
	p, err = cordon{unschedulable: false}.Plan(n, Request{})
	require.NoError(t, err)
	assert.True(t, p.NoOp, "uncordoning a schedulable node changes nothing")
}

func TestDeletePodPlan(t *testing.T) {
	p, err := deletePod{}.Plan(obj("Pod", map[string]any{"status": map[string]any{"phase": "Running"}}), Request{})
	require.NoError(t, err)
	assert.True(t, p.Delete)
	assert.False(t, p.Rollback.Available)
	assert.Equal(t, "pod: Running", p.Change.Before)
}
