package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/test/harness"
)

// storeUnchecked writes a ConfigReloadPolicy straight into etcd, as one
// stored before the schema checked its durations would be.
func storeUnchecked(t *testing.T, ns, name string, spec map[string]any) *v1alpha1.ConfigReloadPolicy {
	t.Helper()
	obj := map[string]any{
		"apiVersion": v1alpha1.GroupVersion.String(), "kind": "ConfigReloadPolicy",
		"metadata": map[string]any{"name": name, "namespace": ns, "uid": string(uuid.NewUUID()), "generation": 1,
			"creationTimestamp": time.Now().UTC().Format(time.RFC3339)},
		"spec": spec,
	}
	raw, err := json.Marshal(obj)
	require.NoError(t, err)
	harness.EtcdPut(t, "/registry/"+v1alpha1.GroupVersion.Group+"/configreloadpolicies/"+ns+"/"+name, raw)
	p := &v1alpha1.ConfigReloadPolicy{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	t.Cleanup(func() { _ = harness.Kube().Delete(context.Background(), p) })
	return p
}

// TestBadStoredPolicyBlocksNoOther: a policy whose debounce the API server
// never checked gets Ready=False and a Warning Event naming the field, and
// every other policy keeps working (the operator's List of policies does not
// fail on it).
func TestBadStoredPolicyBlocksNoOther(t *testing.T) {
	ctx := context.Background()
	badNS := harness.Namespace(t)
	selector := map[string]any{"matchLabels": map[string]any{"reload": "true"}}
	bad := storeUnchecked(t, badNS, "typo", map[string]any{"configMapSelector": selector, "workloadSelector": selector,
		"scopeLabel": "env", "debounce": "5 s", "retry": map[string]any{"initialInterval": "1s", "maxInterval": "30 s"}})
	require.NoError(t, harness.Kube().Get(ctx, ctrlclient.ObjectKeyFromObject(bad), bad), "the API server serves the bad object")
	assert.Equal(t, v1alpha1.Duration("5 s"), *bad.Spec.Debounce)

	bad = harness.Eventually(t, bad, reloadTimeout, func(p *v1alpha1.ConfigReloadPolicy) bool {
		c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady)
		return c != nil && c.Reason == v1alpha1.ReasonInvalidSpec
	})
	ready := meta.FindStatusCondition(bad.Status.Conditions, v1alpha1.ConditionReady)
	assert.Equal(t, metav1.ConditionFalse, ready.Status)
	assert.Contains(t, ready.Message, `spec.debounce: "5 s" is not a duration`)
	assert.Contains(t, ready.Message, `spec.retry.maxInterval: "30 s" is not a duration`)
	assert.Contains(t, warningEventWith(t, badNS, "ConfigReloadPolicy", "typo", v1alpha1.ReasonInvalidSpec).Note, "spec.debounce")

	// A policy created after the bad one is still seen and still rolls its workload.
	_, web, cm, good := reloadedDeployment(t, time.Second)
	harness.Eventually(t, good, reloadTimeout, func(p *v1alpha1.ConfigReloadPolicy) bool {
		c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady)
		return c != nil && c.Status == metav1.ConditionTrue && len(p.Status.Workloads) == 1
	})
	waitBaseline(t, web, cm.Name)
	setData(t, cm, "v1")
	harness.Eventually(t, web, reloadTimeout, func(d *appsv1.Deployment) bool { return d.Spec.Template.Annotations[hashKey(cm.Name)] != "" })
}

// TestScopeLabelThatMatchesNothingSaysWhy: a scopeLabel no workload carries
// is named, with the values the ConfigMaps have, in Ready and a Warning Event.
func TestScopeLabelThatMatchesNothingSaysWhy(t *testing.T) {
	ctx := context.Background()
	ns := harness.Namespace(t)
	reloadDeployment(t, ns, "web", "dev")
	reloadConfigMap(t, ns, "app", "dev", "v0")
	require.NoError(t, harness.Kube().Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "tiered", Namespace: ns,
		Labels: map[string]string{"reload": "true", "tier": "front"}}}))
	sel := metav1.LabelSelector{MatchLabels: map[string]string{"reload": "true"}}
	p := &v1alpha1.ConfigReloadPolicy{ObjectMeta: metav1.ObjectMeta{Name: "tiers", Namespace: ns},
		Spec: v1alpha1.ConfigReloadPolicySpec{ConfigMapSelector: sel, WorkloadSelector: sel, ScopeLabel: "tier"}}
	require.NoError(t, harness.Kube().Create(ctx, p))

	const hint = "no Deployment/StatefulSet/DaemonSet in %s matching workloadSelector has label tier=front"
	p = harness.Eventually(t, p, reloadTimeout, func(p *v1alpha1.ConfigReloadPolicy) bool {
		c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady)
		return c != nil && c.ObservedGeneration == p.Generation && c.Reason == v1alpha1.ReasonNothingToReload
	})
	ready := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady)
	assert.Equal(t, metav1.ConditionFalse, ready.Status, "a policy that restarts nothing is not ready")
	assert.Contains(t, ready.Message, "watching 2 ConfigMaps and 0 workloads")
	assert.Contains(t, ready.Message, fmt.Sprintf(hint, ns))
	assert.Contains(t, warningEventWith(t, ns, "ConfigReloadPolicy", p.Name, v1alpha1.ReasonNothingToReload).Note, fmt.Sprintf(hint, ns))
}
