package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/activities/gate"
	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/devenv"
	"github.com/remedy-dev/remedy/test/harness"
)

func serviceAccountUser(name string) string {
	return "system:serviceaccount:" + devenv.Namespace + ":" + name
}

// allowed asks the API server whether the ServiceAccount name may do verb.
func allowed(t *testing.T, name string, attrs authorizationv1.ResourceAttributes) bool {
	t.Helper()
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:               serviceAccountUser(name),
		Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:" + devenv.Namespace, "system:authenticated"},
		ResourceAttributes: &attrs,
	}}
	res, err := admin(t).AuthorizationV1().SubjectAccessReviews().Create(context.Background(), sar, metav1.CreateOptions{})
	require.NoError(t, err)
	return res.Status.Allowed
}

// TestWorkerOwnIdentityCannotWriteWorkloads: workload writes belong to the
// accounts the worker impersonates, never to the worker itself.
func TestWorkerOwnIdentityCannotWriteWorkloads(t *testing.T) {
	ns := harness.Namespace(t)
	harness.Deployment(t, ns, "web", 1)

	_, err := workerClientset(t).AppsV1().Deployments(ns).Patch(context.Background(), "web", types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"owned":"by-worker"}}}`), metav1.PatchOptions{})
	require.Error(t, err)
	assert.True(t, apierrors.IsForbidden(err), "%v", err)

	write := func(group, resource, verb string) authorizationv1.ResourceAttributes {
		return authorizationv1.ResourceAttributes{Namespace: ns, Group: group, Resource: resource, Verb: verb, Name: "web"}
	}
	for _, tc := range []struct {
		account string
		attrs   authorizationv1.ResourceAttributes
		want    bool
	}{
		{"remedy-worker", write("apps", "deployments", "patch"), false},
		{"remedy-worker", write("apps", "statefulsets", "patch"), false},
		{"remedy-worker", write("apps", "daemonsets", "patch"), false},
		{"remedy-worker", write("apps", "replicasets", "patch"), false},
		{"remedy-worker", write("batch", "jobs", "patch"), false},
		// The workflows write their objects' status and phase Events; that is all the worker writes itself.
		{"remedy-worker", write("events.k8s.io", "events", "create"), true},
		{"remedy-worker", write("events.k8s.io", "events", "patch"), false},
		{"remedy-worker", authorizationv1.ResourceAttributes{Namespace: ns, Group: "remedy.dev", Resource: "kubernetesexecutions", Subresource: "status", Verb: "update"}, true},
		{"remedy-worker", authorizationv1.ResourceAttributes{Namespace: ns, Group: "remedy.dev", Resource: "remediationrequests", Subresource: "status", Verb: "update"}, true},
		{"remedy-worker", authorizationv1.ResourceAttributes{Namespace: ns, Group: "remedy.dev", Resource: "kubernetesexecutions", Verb: "update"}, false},
		{"remedy-worker", authorizationv1.ResourceAttributes{Namespace: ns, Group: "remedy.dev", Resource: "kubernetesexecutions", Verb: "patch"}, false},
		{"remedy-worker", authorizationv1.ResourceAttributes{Namespace: ns, Group: "remedy.dev", Resource: "remediationrequests", Subresource: "status", Verb: "patch"}, false},
		{"remedy-worker", write("apps", "deployments", "get"), true},
		{gate.ReloadServiceAccount, write("apps", "deployments", "patch"), true},
		{gate.ReloadServiceAccount, write("apps", "replicasets", "patch"), false},
		{gate.ReloadServiceAccount, write("apps", "deployments", "update"), false},
		{gate.DriftServiceAccount, write("apps", "replicasets", "patch"), true},
		{gate.DriftServiceAccount, write("batch", "jobs", "patch"), true},
		{gate.DriftServiceAccount, write("", "configmaps", "patch"), false},
		{"remedy-worker", authorizationv1.ResourceAttributes{Namespace: devenv.Namespace, Resource: "serviceaccounts", Verb: "impersonate", Name: gate.ReloadServiceAccount}, true},
		{"remedy-worker", authorizationv1.ResourceAttributes{Namespace: devenv.Namespace, Resource: "serviceaccounts", Verb: "impersonate", Name: gate.DriftServiceAccount}, true},
		{"remedy-worker", authorizationv1.ResourceAttributes{Namespace: devenv.Namespace, Resource: "serviceaccounts", Verb: "impersonate", Name: "remedy-operator"}, false},
	} {
		a := tc.attrs
		assert.Equal(t, tc.want, allowed(t, tc.account, a), "%s %s %s.%s in %s", tc.account, a.Verb, a.Resource, a.Group, a.Namespace)
	}
}

// TestReloadRestartRunsAsRemedyReload takes remedy-reload's binding away: the
// worker's restart is then refused in remedy-reload's name, and goes through
// once the binding is back. Nothing else could have authorized it.
func TestReloadRestartRunsAsRemedyReload(t *testing.T) {
	ctx := context.Background()
	ns, web, cm, _ := reloadedDeployment(t, time.Second)
	gen := waitBaseline(t, web, "app")
	baseline := currentHash(t, web, "app")

	var crb rbacv1.ClusterRoleBinding
	require.NoError(t, harness.Kube().Get(ctx, ctrlclient.ObjectKey{Name: gate.ReloadServiceAccount}, &crb))
	restore := func() {
		back := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: crb.Name, Labels: crb.Labels}, RoleRef: crb.RoleRef, Subjects: crb.Subjects}
		if err := harness.Kube().Create(ctx, back); err != nil && !apierrors.IsAlreadyExists(err) {
			require.NoError(t, err)
		}
	}
	require.NoError(t, harness.Kube().Delete(ctx, &crb))
	t.Cleanup(restore)
	require.Eventually(t, func() bool {
		return !allowed(t, gate.ReloadServiceAccount, authorizationv1.ResourceAttributes{Namespace: ns, Group: "apps", Resource: "deployments", Verb: "patch"})
	}, 10*time.Second, 100*time.Millisecond)

	setData(t, cm, "v1")
	id := v1alpha1.ReloadWorkflowID(ns, "Deployment", "web")
	var last string
	require.Eventually(t, func() bool {
		d, err := harness.Temporal().DescribeWorkflowExecution(ctx, id, "")
		if pa := d.GetPendingActivities(); err == nil && len(pa) == 1 && pa[0].GetAttempt() > 1 {
			last = harness.FailureMessage(pa[0].GetLastFailure())
			return true
		}
		return false
	}, reloadTimeout, 200*time.Millisecond, "the restart never failed")
	assert.Contains(t, last, `User "`+serviceAccountUser(gate.ReloadServiceAccount)+`" cannot`, "refused in remedy-reload's name")
	assert.Contains(t, strings.ToLower(last), "forbidden")
	requireGeneration(t, web, gen)

	restore()
	harness.Eventually(t, web, reloadTimeout, func(d *appsv1.Deployment) bool {
		h := d.Spec.Template.Annotations[hashKey("app")]
		return h != "" && h != baseline
	})
}
