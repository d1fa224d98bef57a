package actions

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	"github.com/remedy-dev/remedy/api/v1alpha1"
)

func deployment(replicas any, restartedAt string) *unstructured.Unstructured {
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "web", "namespace": "shop", "resourceVersion": "42"},
		"spec":     map[string]any{},
	}}
	if replicas != nil {
		_ = unstructured.SetNestedField(obj.Object, replicas, "spec", "replicas")
	}
	if restartedAt != "" {
		_ = unstructured.SetNestedField(obj.Object, restartedAt, "spec", "template", "metadata", "annotations", v1alpha1.RestartedAtAnnotation)
	}
	return obj
}

func target(kind string) v1alpha1.ObjectRef {
	return v1alpha1.ObjectRef{APIVersion: "apps/v1", Kind: kind, Namespace: "shop", Name: "web"}
}

// Every kind an action names is one it is matched by group, version and
// kind, and its rules name verbs on it: authorizing it is never vacuous.
func TestEveryTargetKindHasVerbs(t *testing.T) {
	for _, a := range All() {
		for _, k := range a.Kinds() {
			t.Run(a.Name()+"/"+k, func(t *testing.T) {
				gvr, err := TargetResource(a, v1alpha1.ObjectRef{APIVersion: targetKinds[k].apiVersions[0], Kind: k})
				require.NoError(t, err)
				var verbs []string
				for _, r := range a.Rules() {
					if slices.Contains(r.APIGroups, gvr.Group) && slices.Contains(r.Resources, gvr.Resource) {
						verbs = append(verbs, r.Verbs...)
					}
				}
				assert.NotEmpty(t, verbs, "%s names no verb on %s", a.Name(), gvr.GroupResource())
			})
		}
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name    string
		req     Request
		wantErr string
	}{
		{"scale ok", Request{Action: "scale", Target: target("Deployment"), Params: v1alpha1.ActionParameters{Replicas: ptr.To[int32](3)}}, ""},
		{"scale without replicas", Request{Action: "scale", Target: target("Deployment")}, "needs parameters.replicas"},
		{"scale negative", Request{Action: "scale", Target: target("Deployment"), Params: v1alpha1.ActionParameters{Replicas: ptr.To[int32](-1)}}, "between 0 and 10000"},
		{"scale daemonset", Request{Action: "scale", Target: target("DaemonSet"), Params: v1alpha1.ActionParameters{Replicas: ptr.To[int32](1)}}, "does not support target kind DaemonSet"},
		{"restart ok", Request{Action: "restart", Target: target("DaemonSet"), Token: "t"}, ""},
		{"restart replicaset", Request{Action: "restart", Target: target("ReplicaSet"), Token: "t"}, "does not support target kind ReplicaSet"},
		{"unknown action", Request{Action: "explode", Target: target("Deployment")}, `action "explode" is not in this worker's catalog`},
		{"no name", Request{Action: "restart", Target: v1alpha1.ObjectRef{Kind: "Deployment"}, Token: "t"}, "target.name is required"},
		{"a Deployment of another group", Request{Action: "scale", Target: v1alpha1.ObjectRef{APIVersion: "evil.example.com/v1", Kind: "Deployment", Namespace: "shop", Name: "web"},
			Params: v1alpha1.ActionParameters{Replicas: ptr.To[int32](3)}}, "action scale supports kind Deployment only in apiVersion apps/v1, not \"evil.example.com/v1\""},
		{"a Pod in a group", Request{Action: "delete-pod", Target: v1alpha1.ObjectRef{APIVersion: "evil.example.com/v1", Kind: "Pod", Namespace: "shop", Name: "web"}}, "only in apiVersion v1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Validate(tc.req)
			if tc.wantErr == "" {
				require.NoError(t, err)
				return
			}
			var inv *InvalidError
			require.ErrorAs(t, err, &inv)
			assert.Contains(t, err.Error(), tc.wantErr)
		})
	}
}

func TestScalePlan(t *testing.T) {
	req := Request{Action: "scale", Target: target("Deployment"), Params: v1alpha1.ActionParameters{Replicas: ptr.To[int32](5)}}
	for _, tc := range []struct {
		name       string
		replicas   any
		wantBefore string
		wantNoOp   bool
		wantBack   int32
	}{
		{"from 3", int64(3), "replicas: 3", false, 3},
		{"defaulted", nil, "replicas: 1", false, 1},
		{"already there", int64(5), "replicas: 5", true, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := scale{}.Plan(deployment(tc.replicas, ""), req)
			require.NoError(t, err)
			assert.Equal(t, tc.wantBefore, p.Change.Before)
			assert.Equal(t, "replicas: 5", p.Change.After)
			assert.Equal(t, tc.wantNoOp, p.NoOp)
			require.True(t, p.Rollback.Available)
			assert.Equal(t, "scale", p.Rollback.RollbackAction)
			assert.Equal(t, tc.wantBack, *p.Rollback.RollbackParameters.Replicas)
			assert.JSONEq(t, `{"metadata":{"resourceVersion":"42"},"spec":{"replicas":5}}`, p.Patch)
		})
	}
}

func TestRestartPlan(t *testing.T) {
	req := Request{Action: "restart", Target: target("Deployment"), Token: "2026-11-21T10:00:00Z"}
	p, err := restart{}.Plan(deployment(nil, ""), req)
	require.NoError(t, err)
	assert.False(t, p.NoOp)
	assert.False(t, p.Rollback.Available)
	assert.NotEmpty(t, p.Rollback.Reason)
	assert.Equal(t, v1alpha1.RestartedAtAnnotation+": never", p.Change.Before)
	assert.JSONEq(t, `{"metadata":{"resourceVersion":"42"},"spec":{"template":{"metadata":{"annotations":{"kubectl.kubernetes.io/restartedAt":"2026-11-21T10:00:00Z"}}}}}`, p.Patch)

	again, err := restart{}.Plan(deployment(nil, req.Token), req)
	require.NoError(t, err)
	assert.True(t, again.NoOp, "a retried restart must not roll the workload twice")
}

func TestCatalogRBACIsLeastPrivilege(t *testing.T) {
	for _, a := range All() {
		for _, r := range a.Rules() {
			for _, v := range r.Verbs {
				assert.NotEqual(t, "*", v, a.Name())
			}
			for _, res := range r.Resources {
				assert.NotEqual(t, "*", res, a.Name())
			}
		}
	}
}

func TestImpact(t *testing.T) {
	assert.Equal(t, "replicas: 3 -> 5", Impact(v1alpha1.ResourceChange{Before: "replicas: 3", After: "replicas: 5"}))
	assert.Equal(t, "a -> b", Impact(v1alpha1.ResourceChange{Before: "a", After: "b"}))
}

// A patch's before and after, which .status shows, never carry an env
// entry's valueFrom; its inverse keeps it, and a changed valueFrom is still
// a change.
func TestPatchSummariesHideValueFrom(t *testing.T) {
	obj := deployment(int64(1), "")
	env := []any{map[string]any{"name": "TOKEN", "valueFrom": map[string]any{"secretKeyRef": map[string]any{"name": "old", "key": "t"}}}}
	require.NoError(t, unstructured.SetNestedSlice(obj.Object, []any{map[string]any{"name": "web", "env": env}}, "spec", "template", "spec", "containers"))
	body := `{"spec":{"template":{"spec":{"containers":[{"name":"web","env":[{"name":"TOKEN","valueFrom":{"secretKeyRef":{"name":"new","key":"t"}}}]}]}}}}`
	plan, err := patch{}.Plan(obj, Request{Action: "patch", Target: target("Deployment"), Params: v1alpha1.ActionParameters{Patch: rawJSON([]byte(body))}})
	require.NoError(t, err)
	for _, s := range []string{plan.Change.Before, plan.Change.After} {
		assert.NotContains(t, s, "secretKeyRef")
		assert.Contains(t, s, SecretRefMarker)
	}
	assert.False(t, plan.NoOp, "the reference changed")
	assert.Contains(t, string(plan.Rollback.RollbackParameters.Patch.Raw), `"name":"old"`, "the inverse restores the real reference")
}

func TestScrubSecretRefs(t *testing.T) {
	in := map[string]any{"env": []any{
		map[string]any{"name": "A", "value": "inline"},
		map[string]any{"name": "B", "valueFrom": map[string]any{"secretKeyRef": map[string]any{"name": "s"}}},
		map[string]any{"name": "C", "valueFrom": nil},
	}}
	out := ScrubSecretRefs(in).(map[string]any)
	env := out["env"].([]any)
	assert.Equal(t, "inline", env[0].(map[string]any)["value"])
	assert.Equal(t, SecretRefMarker, env[1].(map[string]any)["valueFrom"])
	assert.Nil(t, env[2].(map[string]any)["valueFrom"], "a patch removing a valueFrom shows the removal")
	assert.NotNil(t, in["env"].([]any)[1].(map[string]any)["valueFrom"].(map[string]any)["secretKeyRef"], "the input is left alone")
}
