package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/metrics"
	"github.com/remedy-dev/remedy/test/harness"
)

func TestReloadCoalescesBurstIntoOneRolloutPerWorkload(t *testing.T) {
	ctx := context.Background()
	ns := harness.Namespace(t)
	web, api := reloadDeployment(t, ns, "web", "prod"), reloadDeployment(t, ns, "api", "prod")
	batch := reloadDeployment(t, ns, "batch", "test")
	cm := reloadConfigMap(t, ns, "app", "prod", "v0")
	reloadConfigMap(t, ns, "app-test", "test", "v0")
	reloadPolicy(t, ns, 5*time.Second)
	gens := map[*appsv1.Deployment]int64{web: waitBaseline(t, web, "app"), api: waitBaseline(t, api, "app"), batch: waitBaseline(t, batch, "app-test")}
	// The first edit restarts at once (the leading edge); the burst after it falls within its window.
	openWindow(t, web, cm, "v0.1")
	first := waitTemplateHash(t, api, "app", currentHash(t, web, "app")).Spec.Template.Annotations[hashKey("app")]
	baselineHash := currentHash(t, web, "app")
	restarts := counterValue(metrics.ReloadRestarts.WithLabelValues("prod"))
	debounced := counterValue(metrics.ReloadDebounced.WithLabelValues("prod"))

	for i := 1; i <= 20; i++ {
		setData(t, cm, fmt.Sprintf("v%d", i))
		time.Sleep(30 * time.Millisecond) // paces the burst (the input), asserts nothing
	}

	// The last edit's hash reaches both prod workloads, in one pod-template change each.
	web = harness.Eventually(t, web, reloadTimeout, func(d *appsv1.Deployment) bool {
		return d.Spec.Template.Annotations[hashKey("app")] != "" && d.Annotations[hashKey("app")] != baselineHash
	})
	final := web.Spec.Template.Annotations[hashKey("app")]
	waitTemplateHash(t, api, "app", final)
	for d, g := range gens {
		if d == batch {
			continue
		}
		settledGeneration(t, d, g+2) // the first edit at once, the burst once when its window closed
	}
	requireGeneration(t, batch, gens[batch]) // another scope: the same signals never reached it
	assert.Equal(t, final, currentHash(t, api, "app"), "baseline follows the restart")
	assert.NotEmpty(t, web.Spec.Template.Annotations[v1alpha1.RestartedAtAnnotation])
	assert.GreaterOrEqual(t, counterValue(metrics.ReloadRestarts.WithLabelValues("prod"))-restarts, 2.0)
	assert.Greater(t, counterValue(metrics.ReloadDebounced.WithLabelValues("prod")), debounced, "edits folded into the restart are counted")

	// One Event per restart names the ConfigMap and its hash.
	var evs eventsv1.EventList
	require.NoError(t, harness.Kube().List(ctx, &evs, ctrlclient.InNamespace(ns)))
	var notes []string
	for _, e := range evs.Items {
		if e.Reason == "ConfigReloaded" && e.Regarding.Name == "web" {
			notes = append(notes, e.Note)
		}
	}
	require.Len(t, notes, 2)
	assert.ElementsMatch(t, []bool{true, true}, []bool{
		strings.Contains(notes[0], "app="+final) || strings.Contains(notes[1], "app="+final),
		strings.Contains(notes[0], "app="+first) || strings.Contains(notes[1], "app="+first)})

	// The policy's status lists what it watches and the last restart.
	p := harness.Eventually(t, &v1alpha1.ConfigReloadPolicy{ObjectMeta: metav1.ObjectMeta{Name: "reload", Namespace: ns}}, reloadTimeout,
		func(p *v1alpha1.ConfigReloadPolicy) bool {
			for _, w := range p.Status.Workloads {
				if w.Name == "web" && w.LastRestart != nil && w.ConfigHash == final {
					return true
				}
			}
			return false
		})
	assert.Equal(t, []string{"app", "app-test"}, p.Status.WatchedConfigMaps)
	assert.True(t, meta.IsStatusConditionTrue(p.Status.Conditions, v1alpha1.ConditionReady))

	harness.ReplayHistory(t, v1alpha1.ReloadWorkflowID(ns, "Deployment", "web"), "reload-coalesced.json")
}

func TestReloadTwoConfigMapsEditedTogetherGiveOneRollout(t *testing.T) {
	ns := harness.Namespace(t)
	web := reloadDeployment(t, ns, "web", "prod")
	app, flags := reloadConfigMap(t, ns, "app", "prod", "a0"), reloadConfigMap(t, ns, "flags", "prod", "f0")
	reloadPolicy(t, ns, 5*time.Second)
	waitBaseline(t, web, "app")
	waitBaseline(t, web, "flags")
	gen := openWindow(t, web, app, "a0.1")
	oldApp, oldFlags := currentHash(t, web, "app"), currentHash(t, web, "flags")

	// Two edits, each its own signal: the second is made once the first reached the run.
	id := v1alpha1.ReloadWorkflowID(ns, "Deployment", "web")
	signals := harness.SignalsReceived(t, id, "")
	setData(t, app, "a1")
	require.Eventually(t, func() bool { return harness.SignalsReceived(t, id, "") > signals }, reloadTimeout, 50*time.Millisecond)
	setData(t, flags, "f1")

	web = harness.Eventually(t, web, reloadTimeout, func(d *appsv1.Deployment) bool {
		a, f := d.Spec.Template.Annotations[hashKey("app")], d.Spec.Template.Annotations[hashKey("flags")]
		return a != "" && a != oldApp && f != "" && f != oldFlags
	})
	settledGeneration(t, web, gen+1)
}

func TestReloadNoRolloutWithoutDataChange(t *testing.T) {
	ctx := context.Background()
	ns := harness.Namespace(t)
	web := reloadDeployment(t, ns, "web", "prod")
	other := reloadDeployment(t, ns, "other", "staging")
	cm := reloadConfigMap(t, ns, "app", "prod", "v0")
	reloadPolicy(t, ns, time.Second)
	gen := waitBaseline(t, web, "app")
	otherGen := other.Generation
	id := v1alpha1.ReloadWorkflowID(ns, "Deployment", "web")

	tests := []struct {
		name string
		edit func(t *testing.T)
	}{
		{"metadata-only edit", func(t *testing.T) {
			cm.Annotations = map[string]string{"touched": time.Now().String()}
			require.NoError(t, harness.Kube().Update(ctx, cm))
		}},
		{"identical re-apply", func(t *testing.T) { setData(t, cm, "v0") }},
		{"operator restart with unchanged data", func(t *testing.T) {
			// A second operator starting from scratch lists everything again, as after a restart or leader change.
			runPrivateReloadOperator(t)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			signals := harness.SignalsReceived(t, id, "")
			tt.edit(t)
			reconciledAfter(t, ns, "reload", "probe")
			assert.Equal(t, signals, harness.SignalsReceived(t, id, ""), "no change signalled")
			requireGeneration(t, web, gen)
			requireGeneration(t, other, otherGen)
		})
	}
	assert.Empty(t, other.Spec.Template.Annotations, "a workload in another scope is never touched")
}
