package faults

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/test/harness"
)

// rrBetweenSteps: a RemediationRequest scales, then restarts. The worker's
// create of the second step is held before it reaches the API server, and
// the process is killed there. The request completes with each step done once.
func rrBetweenSteps(t *testing.T, p *parts, what string) string {
	ns := harness.Namespace(t)
	gen := target(t, ns)
	path := "/apis/remedy.dev/v1alpha1/namespaces/" + ns + "/kubernetesexecutions"
	hold := p.proxy.HoldBefore(t, func(r *http.Request, body []byte) bool {
		return r.Method == http.MethodPost && r.URL.Path == path && strings.Contains(string(body), `"fix-restart"`)
	})
	target := v1alpha1.ObjectRef{APIVersion: "apps/v1", Kind: "Deployment", Namespace: ns, Name: "web"}
	rr := &v1alpha1.RemediationRequest{
		ObjectMeta: metav1.ObjectMeta{Name: "fix", Namespace: ns},
		Spec: v1alpha1.RemediationRequestSpec{Steps: []v1alpha1.RemediationStep{
			{Name: "scale", Execution: v1alpha1.KubernetesExecutionSpec{Action: "scale", Target: target,
				Parameters: &v1alpha1.ActionParameters{Replicas: ptr.To[int32](3)}}},
			{Name: "restart", Execution: v1alpha1.KubernetesExecutionSpec{Action: "restart", Target: target}},
		}},
	}
	create(t, rr)
	select {
	case <-hold.Reached():
	case <-time.After(2 * time.Minute):
		require.FailNow(t, "the second step was never created")
	}
	require.Equal(t, gen+1, generation(t, ns, "web"), "the first step is done")
	p.kill(t, what)
	if what != worker {
		// The create goes on, and meets the part that is down.
		hold.Release()
	}
	time.Sleep(down[what]) // the fault itself: the part stays down; asserts nothing
	p.restart(t, what)
	hold.Release()

	rr = harness.Eventually(t, rr, 3*time.Minute, func(r *v1alpha1.RemediationRequest) bool { return r.Status.Phase.Terminal() })
	require.Equal(t, v1alpha1.PhaseCompleted, rr.Status.Phase, "reason %s: %s", rr.Status.Reason, rr.Status.Message)
	d := deployment(t, ns, "web")
	assert.Equal(t, gen+2, d.Generation, "one scale and one restart")
	assert.Equal(t, int32(3), *d.Spec.Replicas)
	assert.NotEmpty(t, d.Spec.Template.Annotations["kubectl.kubernetes.io/restartedAt"])
	var steps v1alpha1.KubernetesExecutionList
	require.NoError(t, harness.Kube().List(context.Background(), &steps, ctrlclient.InNamespace(ns)))
	assert.Len(t, steps.Items, 2, "one execution per step")
	rs := settledReplicaSets(t, ns, "web")
	assert.Equal(t, 2, rs, "one rollout: the restart")
	return fmt.Sprintf("killed with step 2 not yet created; generation +%d; %d executions; %d ReplicaSets; %s", d.Generation-gen, len(steps.Items), rs, rr.Status.Phase)
}

// rrCompensating: a RemediationRequest scales web, then api, and its third
// step fails. The compensation rolls api back, then web; the process is
// killed while web's rollback write is held. Once it is back the
// compensation finishes: both rolled back, newest first, each once.
func rrCompensating(t *testing.T, p *parts, what string) string {
	ns := harness.Namespace(t)
	gen := target(t, ns)
	harness.Deployment(t, ns, "api", 0)
	apiGen := settled(t, ns, "api")
	path := "/apis/apps/v1/namespaces/" + ns + "/deployments/web"
	hold := p.proxy.HoldBefore(t, func(r *http.Request, body []byte) bool {
		return r.Method == http.MethodPatch && r.URL.Path == path && r.URL.Query().Get("dryRun") == "" &&
			strings.Contains(string(body), `"spec":{"replicas":0}`)
	})
	ref := func(name string) v1alpha1.ObjectRef {
		return v1alpha1.ObjectRef{APIVersion: "apps/v1", Kind: "Deployment", Namespace: ns, Name: name}
	}
	scale := func(name string, replicas int32) v1alpha1.KubernetesExecutionSpec {
		return v1alpha1.KubernetesExecutionSpec{Action: "scale", Target: ref(name), Parameters: &v1alpha1.ActionParameters{Replicas: ptr.To(replicas)}}
	}
	fails := scale("api", 5)
	fails.PreConditions = []v1alpha1.Condition{{Name: "never", Rego: "package pre.never\n\npass if input.target.spec.replicas == 42\n",
		Required: true, Timeout: v1alpha1.DurationOf(time.Second)}}
	rr := &v1alpha1.RemediationRequest{
		ObjectMeta: metav1.ObjectMeta{Name: "undo", Namespace: ns},
		Spec: v1alpha1.RemediationRequestSpec{Steps: []v1alpha1.RemediationStep{
			{Name: "web", Execution: scale("web", 2)},
			{Name: "api", Execution: scale("api", 3)},
			{Name: "fails", Execution: fails},
		}},
	}
	create(t, rr)
	select {
	case <-hold.Reached():
	case <-time.After(2 * time.Minute):
		require.FailNow(t, "the rollback of the first step was never sent")
	}
	require.Equal(t, int32(0), *deployment(t, ns, "api").Spec.Replicas, "the second step was rolled back first")
	p.kill(t, what)
	if what != worker {
		// The write goes on, and meets the part that is down.
		hold.Release()
	}
	time.Sleep(down[what]) // the fault itself: the part stays down; asserts nothing
	p.restart(t, what)
	hold.Release()

	rr = harness.Eventually(t, rr, 3*time.Minute, func(r *v1alpha1.RemediationRequest) bool { return r.Status.Phase.Terminal() })
	require.Equal(t, v1alpha1.PhaseFailed, rr.Status.Phase)
	require.Equal(t, v1alpha1.ReasonRolledBack, rr.Status.Reason, rr.Status.Message)
	assert.Contains(t, rr.Status.Message, "rolled back, newest first: api, web")
	for _, s := range rr.Status.Steps[:2] {
		assert.Equal(t, v1alpha1.StepRolledBack, s.Rollback, s.Name)
	}
	web, api := deployment(t, ns, "web"), deployment(t, ns, "api")
	assert.Equal(t, int32(0), *web.Spec.Replicas)
	assert.Equal(t, int32(0), *api.Spec.Replicas)
	assert.Equal(t, gen+2, web.Generation, "one scale and one rollback")
	assert.Equal(t, apiGen+2, api.Generation, "one scale and one rollback")
	var steps v1alpha1.KubernetesExecutionList
	require.NoError(t, harness.Kube().List(context.Background(), &steps, ctrlclient.InNamespace(ns)))
	assert.Len(t, steps.Items, 3, "one execution per step")
	return fmt.Sprintf("killed with the first step's rollback write held; web generation +%d, api +%d; %s (%s)",
		web.Generation-gen, api.Generation-apiGen, rr.Status.Phase, rr.Status.Reason)
}
