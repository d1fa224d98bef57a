package operator

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrlfake "sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/reloadrule"
)

func TestConfigMapHashIgnoresMetadataAndOrder(t *testing.T) {
	base := &corev1.ConfigMap{Data: map[string]string{"a": "1", "b": "2"}, BinaryData: map[string][]byte{"z": {0, 1}}}
	relabelled := base.DeepCopy()
	relabelled.Labels = map[string]string{"team": "x"}
	relabelled.Annotations = map[string]string{"note": "y"}
	assert.Equal(t, configMapHash(base), configMapHash(relabelled), "metadata-only edits keep the hash")

	tests := map[string]*corev1.ConfigMap{
		"value changed":          {Data: map[string]string{"a": "1", "b": "3"}, BinaryData: base.BinaryData},
		"binary changed":         {Data: base.Data, BinaryData: map[string][]byte{"z": {0, 2}}},
		"key moved to binary":    {Data: map[string]string{"a": "1"}, BinaryData: map[string][]byte{"b": []byte("2"), "z": {0, 1}}},
		"boundary between k & v": {Data: map[string]string{"a": "1", "b2": ""}, BinaryData: base.BinaryData},
	}
	for name, cm := range tests {
		t.Run(name, func(t *testing.T) {
			assert.NotEqual(t, configMapHash(base), configMapHash(cm))
		})
	}
}

func crp(gated bool) *v1alpha1.ConfigReloadPolicy {
	p := &v1alpha1.ConfigReloadPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "shop", Generation: 2}}
	if gated {
		p.Spec.Approval = &v1alpha1.ApprovalSpec{Required: true}
	}
	return p
}

// Long because it is a table: one row per ConfigMap and workload state the plan answers.
func TestPlanReload(t *testing.T) {
	key := v1alpha1.ConfigHashAnnotation
	cms := []reloadConfigMap{{Name: "app", Scope: "prod", Hash: "new"}, {Name: "other", Scope: "test", Hash: "t1"}}
	tests := []struct {
		name  string
		gated bool
		// seen: the policy's status already lists the workload.
		seen          bool
		workload      reloadWorkload
		wantSignals   []reloadSignal
		wantBaselines []reloadBaseline
		wantDeclined  []reloadDeclinedUpdate
		wantPending   int
		// unmatched: the workload uses no ConfigMap, so status and a Warning Event say why.
		unmatched bool
	}{
		{
			name:          "first sight records a baseline without a rollout",
			workload:      reloadWorkload{Kind: "Deployment", Name: "web", Scope: "prod"},
			wantBaselines: []reloadBaseline{{Kind: "Deployment", Name: "web", Annotations: map[string]string{key("app"): "new"}}},
		},
		{
			name:     "recorded hash equal: nothing to do",
			workload: reloadWorkload{Kind: "Deployment", Name: "web", Scope: "prod", Meta: map[string]string{key("app"): "new"}},
		},
		{
			name:        "recorded hash differs: signal",
			workload:    reloadWorkload{Kind: "Deployment", Name: "web", Scope: "prod", Meta: map[string]string{key("app"): "old"}},
			wantSignals: []reloadSignal{{Kind: "Deployment", Name: "web", Scope: "prod", Change: reloadrule.ConfigChange{ConfigMap: "app", Hash: "new"}}},
			wantPending: 1,
		},
		{
			name:        "pod-template hash counts when metadata has none",
			workload:    reloadWorkload{Kind: "StatefulSet", Name: "db", Scope: "prod", Template: map[string]string{key("app"): "old"}},
			wantSignals: []reloadSignal{{Kind: "StatefulSet", Name: "db", Scope: "prod", Change: reloadrule.ConfigChange{ConfigMap: "app", Hash: "new"}}},
			wantPending: 1,
		},
		{
			name:        "seen workload restarted without hashes: one repair restart",
			seen:        true,
			workload:    reloadWorkload{Kind: "DaemonSet", Name: "agent", Scope: "prod", Template: map[string]string{v1alpha1.RestartedAtAnnotation: "2024-01-15T08:30:00Z"}},
			wantSignals: []reloadSignal{{Kind: "DaemonSet", Name: "agent", Scope: "prod", Change: reloadrule.ConfigChange{ConfigMap: "app", Hash: "new"}, Repair: true}},
			wantPending: 1,
		},
		{
			name:          "first sight of a workload restarted without hashes: a baseline, no rollout",
			workload:      reloadWorkload{Kind: "DaemonSet", Name: "agent", Scope: "prod", Template: map[string]string{v1alpha1.RestartedAtAnnotation: "2024-01-15T08:30:00Z"}},
			wantBaselines: []reloadBaseline{{Kind: "DaemonSet", Name: "agent", Annotations: map[string]string{key("app"): "new"}}},
		},
		{
			name:          "another workload seen does not make this one seen",
			seen:          true,
			workload:      reloadWorkload{Kind: "Deployment", Name: "agent", Scope: "prod", Template: map[string]string{v1alpha1.RestartedAtAnnotation: "2024-01-15T08:30:00Z"}},
			wantBaselines: []reloadBaseline{{Kind: "Deployment", Name: "agent", Annotations: map[string]string{key("app"): "new"}}},
		},
		{
			name:      "workload without the scope label matches nothing",
			workload:  reloadWorkload{Kind: "Deployment", Name: "web", Meta: map[string]string{key("app"): "old"}},
			unmatched: true,
		},
		{
			name:      "workload in another scope is untouched",
			workload:  reloadWorkload{Kind: "Deployment", Name: "web", Scope: "staging", Meta: map[string]string{key("app"): "old"}},
			unmatched: true,
		},
		{
			name:        "approval required: signalled like any change, the workflow asks",
			gated:       true,
			workload:    reloadWorkload{Kind: "Deployment", Name: "web", Scope: "prod", Meta: map[string]string{key("app"): "old"}},
			wantSignals: []reloadSignal{{Kind: "Deployment", Name: "web", Scope: "prod", Change: reloadrule.ConfigChange{ConfigMap: "app", Hash: "new"}}},
			wantPending: 1,
		},
		{
			name:  "declined data is not signalled again",
			gated: true,
			workload: reloadWorkload{Kind: "Deployment", Name: "web", Scope: "prod", Meta: map[string]string{key("app"): "old",
				v1alpha1.DeclinedAnnotation: declinedValue(map[string]string{"app": "new"})}},
		},
		{
			name:  "data changed since the decline: signalled, stale entry removed",
			gated: true,
			workload: reloadWorkload{Kind: "Deployment", Name: "web", Scope: "prod", ResourceVersion: "7", Meta: map[string]string{key("app"): "old",
				v1alpha1.DeclinedAnnotation: declinedValue(map[string]string{"app": "older"})}},
			wantSignals:  []reloadSignal{{Kind: "Deployment", Name: "web", Scope: "prod", Change: reloadrule.ConfigChange{ConfigMap: "app", Hash: "new"}}},
			wantDeclined: []reloadDeclinedUpdate{{Kind: "Deployment", Name: "web", ResourceVersion: "7"}},
			wantPending:  1,
		},
		{
			name:  "data back to what rolled: stale entry removed, nothing signalled",
			gated: true,
			workload: reloadWorkload{Kind: "Deployment", Name: "web", Scope: "prod", ResourceVersion: "8", Meta: map[string]string{key("app"): "new",
				v1alpha1.DeclinedAnnotation: declinedValue(map[string]string{"app": "older", "gone": "g1"})}},
			wantDeclined: []reloadDeclinedUpdate{{Kind: "Deployment", Name: "web", ResourceVersion: "8", Value: declinedValue(map[string]string{"gone": "g1"})}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			policy := crp(tt.gated)
			if tt.seen {
				policy.Status.Workloads = []v1alpha1.WorkloadRestart{{Kind: "DaemonSet", Name: "agent"}}
			}
			p := planReload(policy, append([]reloadConfigMap(nil), cms...), []reloadWorkload{tt.workload}, time.Unix(100, 0))
			assert.Equal(t, tt.wantSignals, p.signals)
			assert.Equal(t, tt.wantBaselines, p.baselines)
			assert.Equal(t, tt.wantDeclined, p.declined)
			assert.Equal(t, tt.wantPending, p.pending)
			require.NotNil(t, p.status)
			assert.Equal(t, []string{"app", "other"}, p.status.WatchedConfigMaps)
			ready := meta.FindStatusCondition(p.status.Conditions, v1alpha1.ConditionReady)
			require.NotNil(t, ready)
			if tt.unmatched {
				assert.Equal(t, metav1.ConditionFalse, ready.Status, "a policy that restarts nothing is not ready")
				assert.Equal(t, v1alpha1.ReasonNothingToReload, ready.Reason)
			} else {
				assert.Equal(t, metav1.ConditionTrue, ready.Status, "approval needs no warning: it works")
				assert.Equal(t, v1alpha1.ReasonWatching, ready.Reason)
			}
			assert.Equal(t, tt.gated, strings.Contains(ready.Message, "waits for an approved"), ready.Message)
			const hint = "no Deployment/StatefulSet/DaemonSet in shop matching workloadSelector has label env=prod or env=test"
			assert.Equal(t, tt.unmatched, strings.Contains(ready.Message, hint), ready.Message)
			if tt.unmatched {
				require.Len(t, p.events, 1)
				assert.Equal(t, event{corev1.EventTypeWarning, v1alpha1.ReasonNothingToReload, hint + " (scopeLabel, as on the selected ConfigMaps)"}, p.events[0])
			} else {
				assert.Empty(t, p.events)
			}
		})
	}
}

func declinedValue(hashes map[string]string) string {
	return reloadrule.Declined{ConfigMaps: hashes}.Encode()
}

func TestPlanReloadStatusIsStable(t *testing.T) {
	p := crp(false)
	wl := reloadWorkload{Kind: "Deployment", Name: "web", Scope: "prod", Meta: map[string]string{
		v1alpha1.ConfigHashAnnotation("app"): "h1", v1alpha1.LastReloadAnnotation: "2026-01-02T03:04:05Z",
	}}
	first := planReload(p, []reloadConfigMap{{Name: "app", Scope: "prod", Hash: "h1"}}, []reloadWorkload{wl}, time.Unix(100, 0))
	require.NotNil(t, first.status)
	require.Len(t, first.status.Workloads, 1)
	assert.Equal(t, "h1", first.status.Workloads[0].ConfigHash)
	assert.Equal(t, time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), first.status.Workloads[0].LastRestart.UTC())

	p.Status = *first.status
	again := planReload(p, []reloadConfigMap{{Name: "app", Scope: "prod", Hash: "h1"}}, []reloadWorkload{wl}, time.Unix(200, 0))
	assert.Nil(t, again.status, "an unchanged world writes no status")
}

func TestConfigHashAnnotationFitsLongNames(t *testing.T) {
	long := "a-very-long-configmap-name-that-goes-on-and-on-beyond-the-limit-of-annotations"
	k := v1alpha1.ConfigHashAnnotation(long)
	assert.LessOrEqual(t, len(k)-len("remedy.dev/"), 63)
	assert.NotEqual(t, k, v1alpha1.ConfigHashAnnotation(long+"x"))
	assert.Equal(t, "remedy.dev/config-hash-app", v1alpha1.ConfigHashAnnotation("app"))
}

func TestProtectedStatus(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	p := crp(false)
	p.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonWatching}}
	st := protectedStatus(p, now)
	require.NotNil(t, st)
	ready := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionReady)
	require.NotNil(t, ready)
	assert.Equal(t, metav1.ConditionFalse, ready.Status)
	assert.Equal(t, v1alpha1.ReasonProtectedNamespace, ready.Reason)
	assert.Contains(t, ready.Message, "namespace shop is protected")
	assert.Equal(t, int64(2), st.ObservedGeneration)

	p.Status = *st
	assert.Nil(t, protectedStatus(p, now.Add(time.Minute)), "an unchanged refusal writes no status, so no second Event")
}

func TestReloadHintSaysWhyNothingMatches(t *testing.T) {
	prod := []reloadConfigMap{{Name: "app", Scope: "prod"}}
	tests := []struct {
		name string
		cms  []reloadConfigMap
		wls  []reloadWorkload
		want string
	}{
		{"no ConfigMap selected", nil, []reloadWorkload{{Kind: "Deployment", Name: "web", Scope: "prod"}},
			"no ConfigMap in shop matches configMapSelector"},
		{"ConfigMaps lack the scope label", []reloadConfigMap{{Name: "app"}}, nil,
			"no selected ConfigMap has label tier (scopeLabel), so none applies to a workload"},
		{"no workload selected", prod, nil,
			"no Deployment/StatefulSet/DaemonSet in shop matches workloadSelector"},
		{"workloads lack the scope label", prod, []reloadWorkload{{Kind: "Deployment", Name: "web"}},
			"no Deployment/StatefulSet/DaemonSet in shop matching workloadSelector has label tier=prod (scopeLabel, as on the selected ConfigMaps)"},
		{"one workload matches", prod, []reloadWorkload{{Kind: "Deployment", Name: "web"}, {Kind: "DaemonSet", Name: "agent", Scope: "prod"}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, reloadHint("shop", "tier", tt.cms, tt.wls))
		})
	}
}

func TestInvalidSpecStatusNamesTheField(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	p := crp(false)
	bad := v1alpha1.Duration("5 s")
	p.Spec.Debounce = &bad
	invalid := p.Spec.ValidateDurations()
	require.Error(t, invalid)
	st := invalidSpecStatus(p, invalid, now)
	require.NotNil(t, st)
	ready := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionReady)
	require.NotNil(t, ready)
	assert.Equal(t, metav1.ConditionFalse, ready.Status)
	assert.Equal(t, v1alpha1.ReasonInvalidSpec, ready.Reason)
	assert.Contains(t, ready.Message, `spec.debounce: "5 s" is not a duration`)

	p.Status = *st
	assert.Nil(t, invalidSpecStatus(p, invalid, now.Add(time.Minute)), "an unchanged refusal writes no status, so no second Event")
}

// A repair restart is signalled only if the live workload still has no
// hash: the policy's status may list a workload whose baseline the cache
// does not show yet.
func TestRepairWaitsForACacheBehindTheBaseline(t *testing.T) {
	key := v1alpha1.ConfigHashAnnotation("app")
	cached := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop"}}
	tests := []struct {
		name       string
		live       *appsv1.Deployment
		wantBehind bool
	}{
		{"baseline recorded since", &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop", Annotations: map[string]string{key: "h"}}}, true},
		{"pod template hash since", &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop"},
			Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{key: "h"}}}}}, true},
		{"still no hash", cached.DeepCopy(), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &ReloadReconciler{Live: ctrlfake.NewClientBuilder().WithScheme(Scheme()).WithObjects(tt.live).Build()}
			behind, err := r.cacheBehind(context.Background(), cached.DeepCopy())
			require.NoError(t, err)
			assert.Equal(t, tt.wantBehind, behind)
		})
	}
	behind, err := (&ReloadReconciler{}).cacheBehind(context.Background(), cached)
	require.NoError(t, err)
	assert.False(t, behind, "no live reader: no check")
}
