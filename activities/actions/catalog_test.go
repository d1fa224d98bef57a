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
