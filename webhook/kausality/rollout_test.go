package kausality

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	kv1 "github.com/remedy-dev/remedy/api/kausality/v1alpha1"
)

// rolloutDeployment is Deployment demo/web wanting want replicas, its status
// counting replicas, updated ones and available ones, generation observed.
func rolloutDeployment(want, replicas, updated, available int64) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"namespace": "demo", "name": "web", "generation": int64(3)},
		"spec":     map[string]any{"replicas": want},
		"status": map[string]any{"observedGeneration": int64(3), "replicas": replicas,
			"updatedReplicas": updated, "availableReplicas": available, "readyReplicas": available},
	}}
}

func workload(kind string, spec, status map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": kind, "metadata": map[string]any{"name": "x"}, "spec": spec, "status": status,
	}}
}

// TestRollingOut: the steps of a rolling restart of three replicas (max
// surge 1, max unavailable 0), as the Deployment controller reports them
// after observedGeneration caught up, and the other kinds' rollout status.
func TestRollingOut(t *testing.T) {
	tests := []struct {
		name string
		obj  *unstructured.Unstructured
		want bool
	}{
		{"restart begun: new ReplicaSet surged to 1, no Pod of it yet", rolloutDeployment(3, 3, 0, 3), true},
		{"one new replica up, old ones still 3", rolloutDeployment(3, 4, 1, 4), true},
		{"old ReplicaSet scaled to 2: 1 of 3 updated (the stalled state of issue 23)", rolloutDeployment(3, 3, 1, 3), true},
		{"all new replicas up, last old Pod still there", rolloutDeployment(3, 4, 3, 4), true},
		{"rolled out", rolloutDeployment(3, 3, 3, 3), false},
		{"rolled out, one Pod briefly unavailable: not a rollout", rolloutDeployment(3, 3, 3, 2), false},
		{"settled, a person scaled its ReplicaSet up: more updated replicas than wanted", rolloutDeployment(2, 3, 3, 3), false},
		{"scaled to zero", rolloutDeployment(0, 0, 0, 0), false},
		{"no spec.replicas: the default 1, not yet updated", workload("Deployment", map[string]any{}, map[string]any{"replicas": int64(1)}), true},
		{"StatefulSet mid-update", workload("StatefulSet", map[string]any{"replicas": int64(2)},
			map[string]any{"currentRevision": "a", "updateRevision": "b", "updatedReplicas": int64(1)}), true},
		{"StatefulSet updated", workload("StatefulSet", map[string]any{"replicas": int64(2)},
			map[string]any{"currentRevision": "b", "updateRevision": "b", "updatedReplicas": int64(2)}), false},
		{"DaemonSet mid-update", workload("DaemonSet", nil,
			map[string]any{"desiredNumberScheduled": int64(3), "updatedNumberScheduled": int64(2)}), true},
		{"DaemonSet updated", workload("DaemonSet", nil,
			map[string]any{"desiredNumberScheduled": int64(3), "updatedNumberScheduled": int64(3)}), false},
		{"a ReplicaSet has no rollout", workload("ReplicaSet", map[string]any{"replicas": int64(3)}, map[string]any{"replicas": int64(1)}), false},
		{"no object", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, RollingOut(tt.obj))
		})
	}
}

// TestRolloutIsNotDrift: the Deployment controller's ReplicaSet writes
// while a rollout it has observed goes on are expected and continue the
// Deployment's trace, even enforced; once it is rolled out they are drift.
func TestRolloutIsNotDrift(t *testing.T) {
	enforced := func(r Request, dep *unstructured.Unstructured) Request {
		r.NamespaceMode = string(kv1.ModeEnforce)
		r.Parent.RollingOut = RollingOut(dep)
		return r
	}
	scaleDown := func() Request { r := update(); r.OldObject, r.Object = rs(3, childAnn()), rs(2, childAnn()); return r }
	extendsParent := func(t *testing.T, res Result) {
		t.Helper()
		trace, err := kv1.ParseTrace(res.Trace)
		require.NoError(t, err)
		require.Len(t, trace, 2, "the Deployment's origin, then the ReplicaSet hop: %s", res.Trace)
		assert.Equal(t, mustTrace(parentTrace)[0], trace[0])
		assert.Equal(t, dc, trace[1].User)
	}
	runDecide(t, []decideCase{
		{name: "old ReplicaSet scaled down mid-rollout", req: enforced(scaleDown(), rolloutDeployment(3, 4, 1, 4)),
			allowed: true, decision: DecisionExpected, reason: []string{"rolling out"}, check: extendsParent},
		{name: "new ReplicaSet scaled up mid-rollout", req: enforced(update(), rolloutDeployment(3, 3, 1, 3)),
			allowed: true, decision: DecisionExpected, check: extendsParent},
		{name: "new ReplicaSet created mid-rollout", req: enforced(create(), rolloutDeployment(3, 3, 0, 3)),
			allowed: true, decision: DecisionExpected, check: extendsParent},
		{name: "last old ReplicaSet scaled to zero", req: enforced(scaleDown(), rolloutDeployment(3, 4, 3, 4)),
			allowed: true, decision: DecisionExpected, check: extendsParent},
		{name: "rolled out and unchanged: drift, denied", req: enforced(scaleDown(), rolloutDeployment(3, 3, 3, 3)),
			code: http.StatusForbidden, decision: DecisionDriftDenied, reason: []string{"is unchanged (generation 3 observed)"}},
		{name: "a person scaled the ReplicaSet of a settled Deployment; the controller's revert is drift",
			req: enforced(scaleDown(), rolloutDeployment(2, 3, 3, 2)), code: http.StatusForbidden, decision: DecisionDriftDenied},
		{name: "rolled out, log mode: drift logged, a new origin", req: with(scaleDown(), func(r *Request) { r.Parent.RollingOut = RollingOut(rolloutDeployment(3, 3, 3, 3)) }),
			allowed: true, decision: DecisionDriftLogged, check: func(t *testing.T, res Result) {
				assert.Len(t, mustTrace(res.Trace), 1)
			}},
		{name: "someone else mid-rollout is still a new origin", req: with(enforced(scaleDown(), rolloutDeployment(3, 4, 1, 4)), func(r *Request) { r.User.Name = alice }),
			allowed: true, decision: DecisionNewOrigin},
		{name: "a freeze holds mid-rollout", req: with(enforced(scaleDown(), rolloutDeployment(3, 4, 1, 4)), func(r *Request) {
			r.Parent.Annotations[kv1.AnnotationFreeze] = "true"
		}), code: http.StatusForbidden, decision: DecisionFrozen},
	})
}
