package integration

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/metrics"
	"github.com/remedy-dev/remedy/internal/reloadrule"
	"github.com/remedy-dev/remedy/test/harness"
	"github.com/remedy-dev/remedy/workflows"
)

// gatedReload sets up web in its own scope, a ConfigMap app and a policy
// that requires approval, and returns them once the baseline is recorded.
func gatedReload(t *testing.T) (ns, env string, web *appsv1.Deployment, cm *corev1.ConfigMap, gen int64) {
	t.Helper()
	ns = harness.Namespace(t)
	env = "approval-" + ns
	web = reloadDeployment(t, ns, "web", env)
	cm = reloadConfigMap(t, ns, "app", env, "v0")
	p := &v1alpha1.ConfigReloadPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "reload", Namespace: ns},
		Spec: v1alpha1.ConfigReloadPolicySpec{
			ConfigMapSelector: metav1.LabelSelector{MatchLabels: map[string]string{"reload": "true"}},
			WorkloadSelector:  metav1.LabelSelector{MatchLabels: map[string]string{"reload": "true"}},
			Debounce:          v1alpha1.DurationOf(time.Second),
			Approval:          &v1alpha1.ApprovalSpec{Required: true, Timeout: v1alpha1.DurationOf(time.Hour)},
		},
	}
	require.NoError(t, harness.Kube().Create(context.Background(), p))
	gen = waitBaseline(t, web, "app")
	harness.Eventually(t, p, reloadTimeout, func(p *v1alpha1.ConfigReloadPolicy) bool {
		return meta.IsStatusConditionTrue(p.Status.Conditions, v1alpha1.ConditionReady)
	})
	return ns, env, web, cm, gen
}

// approvalRequests lists the RARs whose subject is the workload.
func approvalRequests(t *testing.T, ns, workload string) []v1alpha1.RemediationApprovalRequest {
	t.Helper()
	var list v1alpha1.RemediationApprovalRequestList
	require.NoError(t, harness.Kube().List(context.Background(), &list, ctrlclient.InNamespace(ns)))
	var out []v1alpha1.RemediationApprovalRequest
	for _, r := range list.Items {
		if r.Spec.SubjectRef.Kind == "Deployment" && r.Spec.SubjectRef.Name == workload {
			out = append(out, r)
		}
	}
	return out
}

// waitApprovalRequests waits until the workload has n requests and returns the newest.
func waitApprovalRequests(t *testing.T, ns, workload string, n int) *v1alpha1.RemediationApprovalRequest {
	t.Helper()
	var rars []v1alpha1.RemediationApprovalRequest
	require.Eventually(t, func() bool {
		rars = approvalRequests(t, ns, workload)
		return len(rars) == n
	}, reloadTimeout, 100*time.Millisecond, "want %d approval requests for %s", n, workload)
	newest := rars[0]
	for _, r := range rars[1:] {
		if r.Name > newest.Name { // names end in the ask's Unix milliseconds
			newest = r
		}
	}
	return &newest
}

func TestReloadApprovedByKubectlRollsOnce(t *testing.T) {
	ctx := context.Background()
	ns, _, web, cm, gen := gatedReload(t)
	grant(t, ns, "carol", "approve")
	grant(t, ns, "eve")
	id := v1alpha1.ReloadWorkflowID(ns, "Deployment", "web")

	setData(t, cm, "v1")
	rar := waitApprovalRequests(t, ns, "web", 1)
	require.NoError(t, harness.Kube().Get(ctx, ctrlclient.ObjectKeyFromObject(web), web))
	assert.Equal(t, id, rar.Spec.WorkflowID)
	require.Len(t, rar.OwnerReferences, 1)
	assert.Equal(t, metav1.OwnerReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web", UID: web.UID}, rar.OwnerReferences[0],
		"owned by the workload, so deleting it collects the request")
	assert.Equal(t, "restart", rar.Spec.ApprovalContext.Action)
	assert.WithinDuration(t, time.Now().Add(time.Hour), rar.Spec.RequiredBy.Time, time.Minute, "spec.approval.timeout applies")
	awaitApprovalStatus(t, id, workflows.ApprovalPending)
	requireGeneration(t, web, gen)

	err := impersonating(t, "eve").Status().Patch(ctx, rar.DeepCopy(), decisionPatch("Approved", "let me", "carol"))
	require.Error(t, err)
	assert.True(t, apierrors.IsForbidden(err), "want 403, got %v", err)
	assert.Contains(t, err.Error(), `needs the verb "approve"`)
	requireGeneration(t, web, gen)

	require.NoError(t, impersonating(t, "carol").Status().Patch(ctx, rar, decisionPatch("Approved", "ship it", "mallory")))
	require.NotNil(t, rar.Status.RequestedDecision)
	assert.Equal(t, "carol", rar.Status.RequestedDecision.RequestedBy)

	web = harness.Eventually(t, web, reloadTimeout, func(d *appsv1.Deployment) bool { return d.Generation > gen })
	hash := web.Spec.Template.Annotations[hashKey("app")]
	assert.Contains(t, rar.Spec.ApprovalContext.Reason, "app="+hash)
	settledGeneration(t, web, gen+1)
	assert.Equal(t, hash, currentHash(t, web, "app"), "the baseline follows the approved restart")
	require.Eventually(t, func() bool { return replicaSets(t, web) == 2 }, reloadTimeout, 100*time.Millisecond, "one new ReplicaSet: one rollout")
	assert.Empty(t, web.Annotations[v1alpha1.DeclinedAnnotation])

	require.NoError(t, harness.Kube().Get(ctx, ctrlclient.ObjectKeyFromObject(rar), rar))
	assert.Equal(t, v1alpha1.DecisionApproved, rar.Status.Decision)
	assert.Equal(t, "carol", rar.Status.DecidedBy, "the workflow keeps the kubectl attribution")
	assert.Equal(t, v1alpha1.DecidedViaKubectl, rar.Status.DecidedVia)
	assert.Len(t, approvalRequests(t, ns, "web"), 1, "approved data is not asked about again")
	awaitApprovalStatus(t, id, string(v1alpha1.DecisionApproved))
	harness.ReplayHistory(t, id, "reload-approval-approved.json")
}

func TestReloadRejectedRollsNothingUntilDataChanges(t *testing.T) {
	ctx := context.Background()
	ns, env, web, cm, gen := gatedReload(t)
	grant(t, ns, "carol", "approve")
	id := v1alpha1.ReloadWorkflowID(ns, "Deployment", "web")
	declined := counterValue(metrics.ReloadDeclined.WithLabelValues(env, string(v1alpha1.DecisionRejected)))

	setData(t, cm, "v1")
	rar := waitApprovalRequests(t, ns, "web", 1)
	require.NoError(t, impersonating(t, "carol").Status().Patch(ctx, rar, decisionPatch("Rejected", "change freeze", "")))

	web = harness.Eventually(t, web, reloadTimeout, func(d *appsv1.Deployment) bool {
		return d.Annotations[v1alpha1.DeclinedAnnotation] != ""
	})
	// The API server bumps a Deployment's generation for metadata annotations
	// too; the pod template, and so the ReplicaSet, stay as they were.
	assert.Equal(t, gen+1, web.Generation)
	template := web.Spec.Template.Annotations
	assert.Empty(t, template[hashKey("app")], "the pod template is untouched")
	assert.Empty(t, template[v1alpha1.RestartedAtAnnotation])
	gen = web.Generation
	harness.WaitClosed(t, id, reloadTimeout)
	d := reloadrule.ParseDeclined(web.Annotations[v1alpha1.DeclinedAnnotation])
	assert.Equal(t, rar.Name, d.Request)
	assert.Equal(t, string(v1alpha1.DecisionRejected), d.Decision)
	require.Contains(t, d.ConfigMaps, "app")
	v1 := d.ConfigMaps["app"]
	assert.Contains(t, rar.Spec.ApprovalContext.Reason, "app="+v1)
	assert.NotEqual(t, v1, currentHash(t, web, "app"), "the baseline keeps what the pods run")
	assert.Equal(t, 1.0, counterValue(metrics.ReloadDeclined.WithLabelValues(env, string(v1alpha1.DecisionRejected)))-declined)
	// Events are recorded asynchronously, after the activity that records the decline.
	var warnings []eventsv1.Event
	require.Eventually(t, func() bool {
		var evs eventsv1.EventList
		require.NoError(t, harness.Kube().List(ctx, &evs, ctrlclient.InNamespace(ns)))
		warnings = nil
		for _, e := range evs.Items {
			if e.Reason == "ReloadDeclined" && e.Regarding.Name == "web" {
				warnings = append(warnings, e)
			}
		}
		return len(warnings) > 0
	}, reloadTimeout, 100*time.Millisecond, "a ReloadDeclined Warning Event on the workload")
	require.Len(t, warnings, 1)
	assert.Equal(t, corev1.EventTypeWarning, warnings[0].Type)
	assert.Contains(t, warnings[0].Note, "app="+v1)

	// Nothing rolls and nobody is asked again about the declined data, even
	// when the operator looks again (a metadata-only edit requeues it).
	cm.Annotations = map[string]string{"touched": "yes"}
	require.NoError(t, harness.Kube().Update(ctx, cm))
	reconciledAfter(t, ns, "reload", "probe")
	requireGeneration(t, web, gen)
	assert.Equal(t, template, web.Spec.Template.Annotations)
	assert.Equal(t, 1, replicaSets(t, web), "no rollout")
	assert.Len(t, approvalRequests(t, ns, "web"), 1)
	harness.ReplayHistory(t, id, "reload-approval-rejected.json")

	// Newer data is asked about afresh; the stale decline is cleared.
	setData(t, cm, "v2")
	next := waitApprovalRequests(t, ns, "web", 2)
	assert.NotEqual(t, rar.Name, next.Name)
	assert.NotContains(t, next.Spec.ApprovalContext.Reason, "app="+v1)
	web = harness.Eventually(t, web, reloadTimeout, func(d *appsv1.Deployment) bool {
		return d.Annotations[v1alpha1.DeclinedAnnotation] == ""
	})
	out, err := temporalCLIAs(t, ns, "alice", "workflow", "signal", "--workflow-id", id, "--name", "reject",
		"--input", `{"approver":"alice","request":"`+next.Name+`"}`)
	require.NoError(t, err, out)
	harness.WaitClosed(t, id, reloadTimeout)
	web = harness.Eventually(t, web, reloadTimeout, func(d *appsv1.Deployment) bool {
		return reloadrule.ParseDeclined(d.Annotations[v1alpha1.DeclinedAnnotation]).Request == next.Name
	})
	assert.Equal(t, template, web.Spec.Template.Annotations)
	assert.Equal(t, 1, replicaSets(t, web), "no rollout")
}

// replicaSets counts the Deployment's ReplicaSets: one per pod template it rolled out.
func replicaSets(t *testing.T, d *appsv1.Deployment) int {
	t.Helper()
	var list appsv1.ReplicaSetList
	require.NoError(t, harness.Kube().List(context.Background(), &list, ctrlclient.InNamespace(d.Namespace)))
	n := 0
	for _, rs := range list.Items {
		if owner := metav1.GetControllerOf(&rs); owner != nil && owner.UID == d.UID {
			n++
		}
	}
	return n
}
