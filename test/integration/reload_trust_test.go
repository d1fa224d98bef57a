package integration

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/reloadrule"
	"github.com/remedy-dev/remedy/test/harness"
	"github.com/remedy-dev/remedy/workflows"
)

// editReloadPolicies lets a user edit ConfigMaps and ConfigReloadPolicies, and nothing else.
var editReloadPolicies = []rbacv1.PolicyRule{
	{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "create", "update", "patch"}},
	{APIGroups: []string{"remedy.dev"}, Resources: []string{"configreloadpolicies"}, Verbs: []string{"get", "list", "create", "update", "patch"}},
}

// authoredPolicy is the test's reload policy (reload=true ConfigMaps and
// workloads), with a body author the webhook must ignore.
func authoredPolicy(ns, name string, sel metav1.LabelSelector) *v1alpha1.ConfigReloadPolicy {
	return &v1alpha1.ConfigReloadPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1alpha1.ConfigReloadPolicySpec{
			ConfigMapSelector: metav1.LabelSelector{MatchLabels: map[string]string{"reload": "true"}},
			WorkloadSelector:  sel,
			Debounce:          v1alpha1.DurationOf(time.Second),
			Retry:             &v1alpha1.RetrySpec{InitialInterval: v1alpha1.DurationOf(time.Second), MaxInterval: v1alpha1.DurationOf(4 * time.Second)},
			Author:            &v1alpha1.Requester{Username: "mallory", Groups: []string{"system:masters"}},
		},
	}
}

var reloadSelector = metav1.LabelSelector{MatchLabels: map[string]string{"reload": "true"}}

// The finding's shape: a user who may edit only ConfigMaps and
// ConfigReloadPolicies writes a policy selecting a Deployment they cannot
// patch, or every workload, naming an admin as author. Each is refused at
// admission, naming the grant; so is a selector that does not parse.
func TestReloadPolicyAuthorWithoutRestartIsRefused(t *testing.T) {
	ctx := context.Background()
	ns := harness.Namespace(t)
	web := reloadDeployment(t, ns, "web", "prod")
	reloadConfigMap(t, ns, "app", "prod", "v0")
	grantRules(t, ns, "cm-editor-cleo", editReloadPolicies...)
	cleo := impersonating(t, "cm-editor-cleo")

	for name, sel := range map[string]metav1.LabelSelector{"selecting web": reloadSelector, "selecting every workload": {}} {
		t.Run(name, func(t *testing.T) {
			err := cleo.Create(ctx, authoredPolicy(ns, "sneaky", sel))
			requireForbidden(t, err, `grant the verb "execute" on actions.remedy.dev/restart`)
			assert.Contains(t, err.Error(), "the author of a ConfigReloadPolicy must be allowed to restart what it selects")
		})
	}

	t.Run("an invalid selector", func(t *testing.T) {
		bad := authoredPolicy(ns, "equals", metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "app", Operator: "Equals", Values: []string{"web"}}}})
		err := harness.Kube().Create(ctx, bad)
		require.Error(t, err)
		assert.True(t, apierrors.IsInvalid(err), "want 422, got %v", err)
		assert.Contains(t, err.Error(), "spec.workloadSelector.matchExpressions[0].operator")
	})

	// An admin's policy stays the admin's when cleo changes only its labels,
	// and cleo cannot make it hers by changing its spec.
	p := authoredPolicy(ns, "admins", reloadSelector)
	require.NoError(t, harness.Kube().Create(ctx, p))
	admin := *p.Spec.Author
	assert.NotEqual(t, "mallory", admin.Username, "the body's author is replaced by the authenticated user")
	before := p.DeepCopy()
	p.Labels = map[string]string{"team": "cleo"}
	p.Spec.Author = &v1alpha1.Requester{Username: "cm-editor-cleo"}
	require.NoError(t, cleo.Patch(ctx, p, ctrlclient.MergeFrom(before)))
	assert.Equal(t, admin, *p.Spec.Author, "a metadata-only update keeps the author, whatever the body says")
	before = p.DeepCopy()
	p.Spec.ScopeLabel = "tier"
	requireForbidden(t, cleo.Patch(ctx, p, ctrlclient.MergeFrom(before)), `grant the verb "execute" on actions.remedy.dev/restart`)

	require.NoError(t, harness.Kube().Get(ctx, ctrlclient.ObjectKeyFromObject(web), web))
	assert.Empty(t, web.Spec.Template.Annotations, "nothing restarted")
}

// The positive path, then revocation: a policy authored by a user who may
// restart rolls its workload; once the author's grant is gone, the next
// change restarts nothing, with a Warning Event naming the policy.
func TestReloadPolicyAuthorMayRestartUntilTheGrantIsRevoked(t *testing.T) {
	ctx := context.Background()
	ns := harness.Namespace(t)
	web := reloadDeployment(t, ns, "web", "prod")
	cm := reloadConfigMap(t, ns, "app", "prod", "v0")
	grantRules(t, ns, "oncall-olga", append([]rbacv1.PolicyRule{execute("restart")}, editReloadPolicies...)...)

	p := authoredPolicy(ns, "reload", reloadSelector)
	require.NoError(t, impersonating(t, "oncall-olga").Create(ctx, p))
	assert.Equal(t, &v1alpha1.Requester{Username: "oncall-olga", Groups: []string{"system:authenticated"}}, p.Spec.Author,
		"the webhook stamps the authenticated user over the body's author")
	waitBaseline(t, web, "app")
	gen := openWindow(t, web, cm, "v1")

	// Revoke: nothing the author may restart, nothing restarted.
	require.NoError(t, harness.Kube().Delete(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "trust-oncall-olga", Namespace: ns}}))
	require.Eventually(t, func() bool {
		return !allowedFor(t, "oncall-olga", ns, v1alpha1.GroupVersion.Group, "actions", "execute", "restart")
	}, reloadTimeout, 100*time.Millisecond)
	// The run ends once the window after its restart has passed: the next change is a leading edge.
	harness.WaitClosed(t, v1alpha1.ReloadWorkflowID(ns, "Deployment", "web"), reloadTimeout)
	setData(t, cm, "v2")

	ev := warningEventWith(t, ns, "Deployment", "web", v1alpha1.ReasonForbidden)
	assert.Contains(t, ev.Note, "nothing restarted")
	assert.Contains(t, ev.Note, "the author of ConfigReloadPolicy "+ns+"/reload")
	assert.Contains(t, ev.Note, `user "oncall-olga" cannot execute`)
	id := v1alpha1.ReloadWorkflowID(ns, "Deployment", "web")
	harness.WaitClosed(t, id, reloadTimeout)
	err := harness.Temporal().GetWorkflow(ctx, id, "").Get(ctx, nil)
	var app *temporal.ApplicationError
	require.ErrorAs(t, err, &app)
	assert.Equal(t, v1alpha1.ReasonForbidden, app.Type())
	requireGeneration(t, web, gen)
}

// The finding's shape: a workload selected by a policy that requires
// approval and by a second one that does not. A change is put to a person;
// nothing restarts until it is approved.
func TestReloadOverlappingPolicyWaitsForTheOtherApproval(t *testing.T) {
	ctx := context.Background()
	ns, _, web, cm, gen := gatedReload(t)
	require.NoError(t, harness.Kube().Create(ctx, authoredPolicy(ns, "fast", reloadSelector)))
	grant(t, ns, "carol", "approve")

	setData(t, cm, "v1")
	rar := waitApprovalRequests(t, ns, "web", 1)
	id := v1alpha1.ReloadWorkflowID(ns, "Deployment", "web")
	awaitApprovalStatus(t, id, workflows.ApprovalPending)
	reconciledAfter(t, ns, "fast", "probe") // the policy that asks no one has signalled too
	harness.WaitHandled(t, id, reloadTimeout)
	requireGeneration(t, web, gen)

	require.NoError(t, impersonating(t, "carol").Status().Patch(ctx, rar, decisionPatch("Approved", "ship it", "carol")))
	harness.Eventually(t, web, reloadTimeout, func(d *appsv1.Deployment) bool { return d.Generation > gen })
	settledGeneration(t, web, gen+1)
}

// The finding's shape: a ReloadWorkflow started by hand, by someone who
// reaches Temporal, for a workload no policy selects, with changes (so
// pod-template annotations) of their choosing. It writes nothing.
func TestForgedReloadStartWritesNothing(t *testing.T) {
	ctx := context.Background()
	ns := harness.Namespace(t)
	web := reloadDeployment(t, ns, "web", "prod")
	reloadConfigMap(t, ns, "app", "prod", "v0")
	// The Deployment controller's own annotation first, so only a write of Remedy's would show.
	web = harness.Eventually(t, web, reloadTimeout, func(d *appsv1.Deployment) bool { return d.Annotations["deployment.kubernetes.io/revision"] != "" })
	gen, annotations := web.Generation, web.Annotations

	id := v1alpha1.ReloadWorkflowID(ns, "Deployment", "web")
	in := workflows.ReloadInput{Namespace: ns, Kind: "Deployment", Name: "web", Scope: "prod", Policy: "reload"}
	in.Pending = []reloadrule.ConfigChange{{ConfigMap: "app", Hash: "chosen-by-the-caller"}, {ConfigMap: "kubectl.kubernetes.io/restartedAt", Hash: "now"}}
	run, err := harness.Temporal().ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: workflows.TaskQueue}, workflows.ReloadWorkflow, in)
	require.NoError(t, err)
	err = run.Get(ctx, nil)
	var app *temporal.ApplicationError
	require.ErrorAs(t, err, &app)
	assert.Equal(t, v1alpha1.ReasonSubjectMismatch, app.Type())
	assert.Contains(t, app.Error(), "no ConfigReloadPolicy in "+ns+" selects Deployment web")
	assert.Contains(t, warningEventWith(t, ns, "Deployment", "web", v1alpha1.ReasonSubjectMismatch).Note, "nothing restarted")

	require.NoError(t, harness.Kube().Get(ctx, ctrlclient.ObjectKeyFromObject(web), web))
	assert.Equal(t, gen, web.Generation, "the pod template is unchanged")
	assert.Equal(t, annotations, web.Annotations, "no annotation written")
	assert.Empty(t, web.Spec.Template.Annotations)
	harness.ReplayRun(t, id, "", "reload-forged.json")
}

// A forged start without approval, for a workload whose policy requires it
// and with data its ConfigMap could hold: the run learns the rule from the
// live policy and asks; nothing rolls.
func TestForgedReloadStartCannotSkipApproval(t *testing.T) {
	ctx := context.Background()
	ns, env, web, cm, gen := gatedReload(t)
	next := cm.DeepCopy()
	next.Data = map[string]string{"value": "v1"}
	hash := reloadrule.ConfigMapHash(next)

	id := v1alpha1.ReloadWorkflowID(ns, "Deployment", "web")
	in := workflows.ReloadInput{Namespace: ns, Kind: "Deployment", Name: "web", Scope: env, Policy: "reload", Debounce: time.Second}
	in.Pending = []reloadrule.ConfigChange{{ConfigMap: "app", Hash: hash}}
	_, err := harness.Temporal().ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: workflows.TaskQueue}, workflows.ReloadWorkflow, in)
	require.NoError(t, err)
	t.Cleanup(func() { _ = harness.Temporal().TerminateWorkflow(ctx, id, "", "test over") })
	rar := waitApprovalRequests(t, ns, "web", 1)
	assert.Contains(t, rar.Spec.ApprovalContext.Reason, "app="+hash)
	awaitApprovalStatus(t, id, workflows.ApprovalPending)
	requireGeneration(t, web, gen)
}

// allowedFor asks the API server whether user may verb group/resource name in ns.
func allowedFor(t *testing.T, user, ns, group, resource, verb, name string) bool {
	t.Helper()
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: user, Groups: []string{"system:authenticated"},
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Group: group, Resource: resource, Verb: verb, Name: name},
	}}
	res, err := admin(t).AuthorizationV1().SubjectAccessReviews().Create(context.Background(), sar, metav1.CreateOptions{})
	require.NoError(t, err)
	return res.Status.Allowed
}
