package actions

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	"github.com/remedy-dev/remedy/api/v1alpha1"
)

func podTemplate(image string, env map[string]any, annotations map[string]any) map[string]any {
	c := map[string]any{"name": "web", "image": image}
	if env != nil {
		c["env"] = []any{env}
	}
	md := map[string]any{"labels": map[string]any{"app": "web"}}
	if annotations != nil {
		md["annotations"] = annotations
	}
	return map[string]any{"metadata": md, "spec": map[string]any{"containers": []any{c}}}
}

func undoDeployment(tmpl map[string]any, annotations map[string]any) *unstructured.Unstructured {
	d := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "web", "namespace": "shop", "uid": "d-1", "resourceVersion": "9"},
		"spec":     map[string]any{"selector": map[string]any{"matchLabels": map[string]any{"app": "web"}}, "template": tmpl},
	}}
	if annotations != nil {
		d.Object["metadata"].(map[string]any)["annotations"] = annotations
	}
	return d
}

// replicaSet is the controller's copy of tmpl at revision rev, hash label added.
func replicaSet(rev string, tmpl map[string]any) unstructured.Unstructured {
	cp := runtimeCopy(tmpl)
	cp["metadata"].(map[string]any)["labels"].(map[string]any)[podTemplateHash] = "h" + rev
	return unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "ReplicaSet",
		"metadata": map[string]any{"name": "web-" + rev, "namespace": "shop", "annotations": map[string]any{revisionAnnotation: rev},
			"labels": map[string]any{podTemplateHash: "h" + rev}},
		"spec": map[string]any{"template": cp},
	}}
}

func runtimeCopy(m map[string]any) map[string]any {
	return (&unstructured.Unstructured{Object: m}).DeepCopy().Object
}

func TestRolloutUndoPlan(t *testing.T) {
	good := podTemplate("web:1", nil, nil)
	bad := podTemplate("web:1", map[string]any{"name": "DEMO_MODE", "value": "crash"}, map[string]any{v1alpha1.RestartedAtAnnotation: "t0"})
	rss := []unstructured.Unstructured{replicaSet("1", podTemplate("web:0", nil, nil)), replicaSet("2", good), replicaSet("3", bad)}
	req := Request{Action: "rollout-undo", Target: target("Deployment"), Token: "run-1"}
	require.NoError(t, rolloutUndo{}.Validate(req))

	p, err := rolloutUndo{}.PlanRelated(undoDeployment(bad, nil), rss, req)
	require.NoError(t, err)
	assert.False(t, p.NoOp)
	assert.Equal(t, "template: revision 3 -> revision 2", Impact(p.Change))
	assert.Equal(t, "rollout-undo", p.Rollback.RollbackAction)
	assert.Equal(t, ptr.To[int64](3), p.Rollback.RollbackParameters.Revision, "the inverse restores the revision that was current")
	// The patch nulls what only the bad template had, so a merge leaves
	// exactly the good template; the hash label stays the controller's.
	assert.JSONEq(t, `{"metadata":{"resourceVersion":"9","annotations":{"remedy.dev/rollout-undone-at":"run-1","remedy.dev/rollout-restored":"h2"}},
		"spec":{"template":{"metadata":{"annotations":null},"spec":{"containers":[{"name":"web","image":"web:1"}]}}}}`, p.Patch)

	// After the write: the same run's retry recognises it, whatever the
	// controller has renumbered.
	undone := undoDeployment(good, map[string]any{v1alpha1.RolloutUndoneAtAnnotation: "run-1", v1alpha1.RolloutRestoredAnnotation: "h2"})
	renumbered := replicaSet("4", good)
	renumbered.SetLabels(map[string]string{podTemplateHash: "h2"})
	undone.SetUID("d-1")
	undone.SetResourceVersion("10")
	prior := p
	prior.UID, prior.ResourceVersion = "d-1", "9"
	assert.True(t, rolloutUndo{}.Landed(undone, prior), "a retried undo recognises its own write and does not undo it")
	assert.False(t, rolloutUndo{}.Landed(undoDeployment(bad, nil), prior), "a write that did not land is sent again")
	other := undoDeployment(good, map[string]any{v1alpha1.RolloutUndoneAtAnnotation: "run-0", v1alpha1.RolloutRestoredAnnotation: "h2"})
	other.SetResourceVersion("10")
	assert.False(t, rolloutUndo{}.Landed(other, prior), "another run's marks are not this run's write")

	// Any undo of the restored revision would bring the bad one back:
	// refused while the Deployment runs what the undo restored.
	_, err = rolloutUndo{}.PlanRelated(undone, []unstructured.Unstructured{rss[0], renumbered, rss[2]}, Request{Action: "rollout-undo", Token: "run-2"})
	var inv *InvalidError
	require.ErrorAs(t, err, &inv)
	assert.ErrorContains(t, err, "Deployment shop/web runs revision 4, which a rollout-undo restored (run-1): undoing it would bring back the revision that undo replaced")
	// After a new rollout by a person, an undo is an undo again.
	fixed := podTemplate("web:2", nil, nil)
	next, err := rolloutUndo{}.PlanRelated(undoDeployment(fixed, map[string]any{v1alpha1.RolloutUndoneAtAnnotation: "run-1", v1alpha1.RolloutRestoredAnnotation: "h2"}),
		[]unstructured.Unstructured{rss[0], renumbered, rss[2], replicaSet("5", fixed)}, Request{Action: "rollout-undo", Token: "run-2"})
	require.NoError(t, err)
	assert.Equal(t, "template: revision 5 -> revision 4", Impact(next.Change))

	// The rollback, planned on the undone Deployment, restores revision 3
	// and takes the run's mark away.
	back := Request{Action: "rollout-undo", Target: target("Deployment"), Token: "run-1", Params: *p.Rollback.RollbackParameters}
	require.NoError(t, rolloutUndo{}.Validate(back))
	rb, err := rolloutUndo{}.PlanRelated(undone, []unstructured.Unstructured{rss[0], replicaSet("4", good), rss[2]}, back)
	require.NoError(t, err)
	assert.Equal(t, "template: revision 4 -> revision 3", Impact(rb.Change))
	var body map[string]any
	require.NoError(t, json.Unmarshal([]byte(rb.Patch), &body))
	assert.Equal(t, map[string]any{v1alpha1.RolloutUndoneAtAnnotation: nil, v1alpha1.RolloutRestoredAnnotation: nil}, body["metadata"].(map[string]any)["annotations"])
	assert.Equal(t, bad["spec"], body["spec"].(map[string]any)["template"].(map[string]any)["spec"])
	// Retried after it landed, the rollback changes nothing.
	restored, err := rolloutUndo{}.PlanRelated(undoDeployment(bad, nil), []unstructured.Unstructured{rss[0], replicaSet("4", good), rss[2]}, back)
	require.NoError(t, err)
	assert.True(t, restored.NoOp)
}

func TestRolloutUndoRefusals(t *testing.T) {
	only := podTemplate("web:1", nil, nil)
	req := Request{Action: "rollout-undo", Target: target("Deployment"), Token: "run-1"}
	for _, tc := range []struct {
		name    string
		rss     []unstructured.Unstructured
		req     Request
		want    string
		invalid bool
	}{
		{"first revision", []unstructured.Unstructured{replicaSet("1", only)}, req,
			"nothing to undo: Deployment shop/web has no revision before its current revision 1 (its ReplicaSets hold revisions [1])", true},
		{"revision gone", []unstructured.Unstructured{replicaSet("2", only)}, Request{Action: "rollout-undo", Token: "t", Params: v1alpha1.ActionParameters{Revision: ptr.To[int64](1)}},
			"Deployment shop/web has no revision 1 (its ReplicaSets hold revisions [2])", true},
		{"controller behind", []unstructured.Unstructured{replicaSet("1", podTemplate("web:0", nil, nil))}, req,
			"no ReplicaSet runs its current template yet", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := rolloutUndo{}.PlanRelated(undoDeployment(only, nil), tc.rss, tc.req)
			require.ErrorContains(t, err, tc.want)
			var inv *InvalidError
			assert.Equal(t, tc.invalid, errors.As(err, &inv), "a permanent refusal is an InvalidError; a lagging controller is retried")
		})
	}
}

func TestRolloutUndoValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		req  Request
		want string
	}{
		{"a StatefulSet", Request{Action: "rollout-undo", Target: target("StatefulSet"), Token: "t"}, "does not support target kind StatefulSet"},
		{"other parameters", Request{Action: "rollout-undo", Target: target("Deployment"), Token: "t", Params: v1alpha1.ActionParameters{Image: "x"}}, "takes parameters.revision only"},
		{"revision 0", Request{Action: "rollout-undo", Target: target("Deployment"), Token: "t", Params: v1alpha1.ActionParameters{Revision: ptr.To[int64](0)}}, "at least 1"},
		{"no token", Request{Action: "rollout-undo", Target: target("Deployment")}, "needs the run's token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Validate(tc.req)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

func TestDiffMerge(t *testing.T) {
	from := map[string]any{"a": "1", "m": map[string]any{"x": "1", "y": "2"}, "l": []any{"1"}, "gone": map[string]any{"k": "v"}}
	to := map[string]any{"a": "1", "m": map[string]any{"x": "9"}, "l": []any{"1", "2"}, "new": "n"}
	assert.Equal(t, map[string]any{"m": map[string]any{"x": "9", "y": nil}, "l": []any{"1", "2"}, "gone": nil, "new": "n"}, diffMerge(from, to))
	assert.Empty(t, diffMerge(to, to))
}
