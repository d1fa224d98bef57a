package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/reloadrule"
	"github.com/remedy-dev/remedy/test/harness"
)

// Coalescing through the operator and worker: 10 edits 0.5 s
// apart with a 3 s window roll the workload twice, once at the first edit
// and once a window after the last (pushing the due time, not once per
// window, which would be three).
func TestReloadBurstRollsAtOnceAndOnceAfterTheBurst(t *testing.T) {
	ctx := context.Background()
	ns, web, cm, _ := reloadedDeployment(t, 3*time.Second)
	gen := waitBaseline(t, web, "app")

	var lastEdit time.Time
	for i := 1; i <= 10; i++ {
		if i > 1 {
			time.Sleep(500 * time.Millisecond) // paces the edits (the input), asserts nothing
		}
		setData(t, cm, fmt.Sprintf("v%d", i))
		lastEdit = time.Now()
	}
	final := reloadrule.ConfigMapHash(cm)
	web = waitTemplateHash(t, web, "app", final)
	rolled := time.Now()
	assert.GreaterOrEqual(t, rolled.Sub(lastEdit), 3*time.Second, "the trailing restart comes a window after the last edit")
	settledGeneration(t, web, gen+2) // the run closed a window after the trailing restart: no third rollout

	var evs eventsv1.EventList
	require.NoError(t, harness.Kube().List(ctx, &evs, ctrlclient.InNamespace(ns)))
	reloaded := 0
	for _, e := range evs.Items {
		if e.Reason == "ConfigReloaded" && e.Regarding.Name == "web" {
			reloaded++
		}
	}
	assert.Equal(t, 2, reloaded, "one ConfigReloaded Event per rollout")
}

// maxWait is defaulted, bounded at 1h, and parsed like every duration.
func TestReloadMaxWaitAtAdmission(t *testing.T) {
	ctx := context.Background()
	ns := harness.Namespace(t)
	policy := func(maxWait *v1alpha1.Duration) *v1alpha1.ConfigReloadPolicy {
		return &v1alpha1.ConfigReloadPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: ns},
			Spec: v1alpha1.ConfigReloadPolicySpec{MaxWait: maxWait}}
	}
	defaulted := policy(nil)
	require.NoError(t, harness.Kube().Create(ctx, defaulted, ctrlclient.DryRunAll))
	require.NotNil(t, defaulted.Spec.MaxWait)
	assert.Equal(t, v1alpha1.Duration("5m"), *defaulted.Spec.MaxWait)

	for _, v := range []v1alpha1.Duration{"1h", "30s", "0s"} {
		assert.NoError(t, harness.Kube().Create(ctx, policy(&v), ctrlclient.DryRunAll), "%q refused", v)
	}
	tests := []struct {
		value v1alpha1.Duration
		want  string
	}{
		{"1h1s", `spec.maxWait: Invalid value: "1h1s": must be at most 1h`},
		{"5 m", `spec.maxWait: Invalid value: "5 m": must be a duration such as 30s, 5m or 1h30m`},
	}
	for _, tt := range tests {
		err := harness.Kube().Create(ctx, policy(&tt.value), ctrlclient.DryRunAll)
		require.Error(t, err, "%q accepted", tt.value)
		assert.True(t, apierrors.IsInvalid(err), "want 422 Invalid, got %v", err)
		assert.Contains(t, err.Error(), tt.want)
	}
}

// A policy applied to a workload restarted before (restartedAt on its pod
// template, no hash) records the baseline and rolls nothing; once the
// policy has seen the workload, a pod template restarted without hashes
// gets a repair restart.
func TestReloadNewPolicyRecordsBaselineOfRestartedWorkload(t *testing.T) {
	ctx := context.Background()
	ns := harness.Namespace(t)
	scope := "env-" + ns
	const restartedAt = "2026-01-02T03:04:05Z"
	web := reloadDeployment(t, ns, "web", scope, func(d *appsv1.Deployment) {
		d.Spec.Template.Annotations = map[string]string{v1alpha1.RestartedAtAnnotation: restartedAt}
	})
	cm := reloadConfigMap(t, ns, "app", scope, "v0")
	reloadPolicy(t, ns, 3*time.Second)

	gen := waitBaseline(t, web, "app")
	assert.Equal(t, reloadrule.ConfigMapHash(cm), web.Annotations[hashKey("app")])
	reconciledAfter(t, ns, "reload", "probe")
	requireGeneration(t, web, gen)
	assert.Equal(t, map[string]string{v1alpha1.RestartedAtAnnotation: restartedAt}, web.Spec.Template.Annotations, "the pod template was not touched")
	_, err := harness.Temporal().DescribeWorkflowExecution(ctx, v1alpha1.ReloadWorkflowID(ns, "Deployment", "web"), "")
	assert.Error(t, err, "no reload run was started")

	// The policy lists the workload now; its recorded hash is wiped (a
	// deploy tool replacing annotations): the repair restart seeds it again.
	harness.Eventually(t, &v1alpha1.ConfigReloadPolicy{ObjectMeta: metav1.ObjectMeta{Name: "reload", Namespace: ns}}, reloadTimeout,
		func(p *v1alpha1.ConfigReloadPolicy) bool { return len(p.Status.Workloads) == 1 })
	wipe := fmt.Sprintf(`{"metadata":{"annotations":{%q:null}}}`, hashKey("app"))
	require.NoError(t, harness.Kube().Patch(ctx, web, ctrlclient.RawPatch(types.MergePatchType, []byte(wipe))))
	web = waitTemplateHash(t, web, "app", reloadrule.ConfigMapHash(cm))
	assert.NotEqual(t, restartedAt, web.Spec.Template.Annotations[v1alpha1.RestartedAtAnnotation], "the repair restart rolled the pods")
}
