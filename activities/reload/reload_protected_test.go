package reload

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/remedy-dev/remedy/activities/gate"
	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/reloadrule"
)

func TestReloadWritesRefusedInProtectedNamespaces(t *testing.T) {
	changes := []reloadrule.ConfigChange{{ConfigMap: "app", Hash: appHash}}
	calls := []struct {
		name string
		run  func(r *Reload) any
		in   any
	}{
		{"restart", func(r *Reload) any { return r.RestartWorkload },
			RestartInput{Namespace: "shop", Kind: "Deployment", Name: "web", Scope: "prod", Changes: changes, RestartedAt: "2026-01-01T00:00:00Z"}},
		{"approval check", func(r *Reload) any { return r.CheckApproval },
			ChangesInput{Namespace: "shop", Kind: "Deployment", Name: "web", Changes: changes}},
		{"decline", func(r *Reload) any { return r.DeclineReload },
			DeclineInput{Namespace: "shop", Kind: "Deployment", Name: "web", Scope: "prod", Changes: changes, Request: "reload-deployment-web-1",
				Decision: gate.Decision{Decision: v1alpha1.DecisionRejected, DecidedBy: "bob", Via: v1alpha1.DecidedViaKubectl}}},
	}
	namespaces := []struct {
		name      string
		labels    map[string]string
		protected bool
	}{
		{"labelled protected", map[string]string{v1alpha1.ProtectedLabel: "true"}, true},
		{"labelled false", map[string]string{v1alpha1.ProtectedLabel: "false"}, false},
		{"unlabelled", nil, false},
	}
	for _, c := range calls {
		for _, n := range namespaces {
			t.Run(c.name+"/"+n.name, func(t *testing.T) {
				ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop", Labels: n.labels}}
				r, kube, dyn, env := reloadFixtureIn(t, ns, nil, nil)
				_, err := env.ExecuteActivity(c.run(r), c.in)
				obj, getErr := dyn.Resource(appsv1.SchemeGroupVersion.WithResource("deployments")).Namespace("shop").Get(t.Context(), "web", metav1.GetOptions{})
				require.NoError(t, getErr)
				evs, listErr := kube.EventsV1().Events("shop").List(t.Context(), metav1.ListOptions{})
				require.NoError(t, listErr)
				if !n.protected {
					require.NoError(t, err)
					return
				}
				require.Error(t, err)
				var app *temporal.ApplicationError
				require.ErrorAs(t, err, &app)
				assert.Equal(t, v1alpha1.ReasonProtectedNamespace, app.Type())
				assert.True(t, app.NonRetryable())
				assert.Contains(t, app.Error(), "namespace shop is protected")
				assert.Empty(t, obj.GetAnnotations(), "nothing is written to the workload")
				tmpl, _, _ := unstructuredAnnotations(obj.Object)
				assert.Empty(t, tmpl, "nothing rolls")
				require.Len(t, evs.Items, 1)
				assert.Equal(t, corev1.EventTypeWarning, evs.Items[0].Type)
				assert.Equal(t, v1alpha1.ReasonProtectedNamespace, evs.Items[0].Reason)
				assert.Equal(t, "web", evs.Items[0].Regarding.Name)
			})
		}
	}
}

func TestIsProtectedNamespace(t *testing.T) {
	for _, tc := range []struct {
		ns   corev1.Namespace
		want bool
	}{
		{corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kube-system"}}, true},
		{corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop", Labels: map[string]string{v1alpha1.ProtectedLabel: "true"}}}, true},
		{corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop", Labels: map[string]string{v1alpha1.ProtectedLabel: "yes"}}}, false},
		{corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kube-public"}}, false},
	} {
		assert.Equal(t, tc.want, v1alpha1.IsProtectedNamespace(&tc.ns), "%s %v", tc.ns.Name, tc.ns.Labels)
	}
}
