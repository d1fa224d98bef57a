package integration

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/temporal"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/test/harness"
	"github.com/remedy-dev/remedy/workflows"
)

func protect(t *testing.T, ns string) {
	t.Helper()
	require.NoError(t, harness.Kube().Patch(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		ctrlclient.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"`+v1alpha1.ProtectedLabel+`":"true"}}}`))))
}

// warningEvent waits for a Warning Event with reason ProtectedNamespace about the named object.
func warningEvent(t *testing.T, ns, kind, name string) eventsv1.Event {
	t.Helper()
	return warningEventWith(t, ns, kind, name, v1alpha1.ReasonProtectedNamespace)
}

// warningEventWith waits for a Warning Event with reason about the named object.
func warningEventWith(t *testing.T, ns, kind, name, reason string) eventsv1.Event {
	t.Helper()
	var found eventsv1.Event
	require.Eventually(t, func() bool {
		var list eventsv1.EventList
		require.NoError(t, harness.Kube().List(context.Background(), &list, ctrlclient.InNamespace(ns)))
		for _, e := range list.Items {
			if e.Type == corev1.EventTypeWarning && e.Reason == reason && e.Regarding.Kind == kind && e.Regarding.Name == name {
				found = e
				return true
			}
		}
		return false
	}, reloadTimeout, 100*time.Millisecond, "no %s Warning Event on %s %s/%s", reason, kind, ns, name)
	return found
}

// reloadedDeployment is a Deployment web in a fresh namespace, reloaded from ConfigMap app by policy reload.
func reloadedDeployment(t *testing.T, debounce time.Duration) (string, *appsv1.Deployment, *corev1.ConfigMap, *v1alpha1.ConfigReloadPolicy) {
	t.Helper()
	ns := harness.Namespace(t)
	web := reloadDeployment(t, ns, "web", "env-"+ns)
	cm := reloadConfigMap(t, ns, "app", "env-"+ns, "v0")
	return ns, web, cm, reloadPolicy(t, ns, debounce)
}

// TestReloadInProtectedNamespaceRestartsNothing: the operator refuses the
// policy up front, and never writes a baseline or starts a workflow.
func TestReloadInProtectedNamespaceRestartsNothing(t *testing.T) {
	ctx := context.Background()
	// Labelled from creation, so no cache can have seen it unprotected.
	ns := "p-" + string(uuid.NewUUID())[:8]
	require.NoError(t, harness.Kube().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns,
		Labels: map[string]string{v1alpha1.ProtectedLabel: "true"}}}))
	env := "protected-" + ns
	web := reloadDeployment(t, ns, "web", env)
	cm := reloadConfigMap(t, ns, "app", env, "v0")
	p := reloadPolicy(t, ns, time.Second)

	p = harness.Eventually(t, p, reloadTimeout, func(p *v1alpha1.ConfigReloadPolicy) bool {
		c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady)
		return c != nil && c.Reason == v1alpha1.ReasonProtectedNamespace
	})
	ready := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady)
	assert.Equal(t, metav1.ConditionFalse, ready.Status)
	assert.Contains(t, ready.Message, "namespace "+ns+" is protected")
	assert.Contains(t, warningEvent(t, ns, "ConfigReloadPolicy", "reload").Note, "is protected")

	setData(t, cm, "v1")
	// The refusal comes before the operator reads a ConfigMap, on every look
	// (the Ready condition above): no look can write or signal.
	requireGeneration(t, web, web.Generation)
	assert.Empty(t, web.Annotations[hashKey("app")], "not even a baseline is written")
	assert.Empty(t, web.Spec.Template.Annotations)
	_, err := harness.Temporal().DescribeWorkflowExecution(ctx, v1alpha1.ReloadWorkflowID(ns, "Deployment", "web"), "")
	var nf *serviceerror.NotFound
	assert.ErrorAs(t, err, &nf, "no reload workflow is started")
}

// TestReloadRefusedWhenNamespaceBecomesProtected labels the namespace while
// a restart is already pending: the worker's restart activity refuses it.
func TestReloadRefusedWhenNamespaceBecomesProtected(t *testing.T) {
	ctx := context.Background()
	ns, web, cm, p := reloadedDeployment(t, 10*time.Second)
	waitBaseline(t, web, "app")
	gen := openWindow(t, web, cm, "v0.1")

	setData(t, cm, "v1")
	id := v1alpha1.ReloadWorkflowID(ns, "Deployment", "web")
	waitPending(t, id, func(st workflows.ReloadStatus) bool { return len(st.Pending) == 1 && st.DueAt != "" })
	protect(t, ns)

	harness.WaitClosed(t, id, reloadTimeout)
	err := harness.Temporal().GetWorkflow(ctx, id, "").Get(ctx, nil)
	require.Error(t, err)
	var app *temporal.ApplicationError
	require.ErrorAs(t, err, &app)
	assert.Equal(t, v1alpha1.ReasonProtectedNamespace, app.Type())
	assert.Contains(t, app.Error(), "namespace "+ns+" is protected")
	harness.ReplayRun(t, id, "", "reload-protected-namespace.json")
	assert.Contains(t, warningEvent(t, ns, "Deployment", "web").Note, "nothing restarted")
	requireGeneration(t, web, gen)

	// The operator sees the label too and stops signalling.
	harness.Eventually(t, p, reloadTimeout, func(p *v1alpha1.ConfigReloadPolicy) bool {
		c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady)
		return c != nil && c.Reason == v1alpha1.ReasonProtectedNamespace
	})
	var d appsv1.Deployment
	require.NoError(t, harness.Kube().Get(ctx, ctrlclient.ObjectKeyFromObject(web), &d))
	assert.Equal(t, gen, d.Generation)
}
