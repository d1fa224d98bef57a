package reload

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/activities/gate"
	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/reloadrule"
)

// TestGateReloadRestart: a restart is written only for live policies that
// select the workload, authored by someone who may restart it, recording
// the data its ConfigMaps hold, and approved when any policy requires it.
func TestGateReloadRestart(t *testing.T) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}
	policy := func(t *testing.T, c ctrlclient.Client, edit func(*v1alpha1.ConfigReloadPolicy)) {
		var p v1alpha1.ConfigReloadPolicy
		require.NoError(t, c.Get(t.Context(), ctrlclient.ObjectKey{Namespace: "shop", Name: "reload"}, &p))
		edit(&p)
		require.NoError(t, c.Update(t.Context(), &p))
	}
	requireApproval := func(t *testing.T, c ctrlclient.Client, _ *kubefake.Clientset) {
		policy(t, c, func(p *v1alpha1.ConfigReloadPolicy) { p.Spec.Approval = &v1alpha1.ApprovalSpec{Required: true} })
	}
	approved := func(t *testing.T, c ctrlclient.Client) string {
		var rar v1alpha1.RemediationApprovalRequest
		require.NoError(t, c.Get(t.Context(), ctrlclient.ObjectKey{Namespace: "shop", Name: "reload-deployment-web-1"}, &rar))
		rar.Status.Decision = v1alpha1.DecisionApproved
		require.NoError(t, c.Update(t.Context(), &rar))
		return rar.Name
	}
	cases := []struct {
		name     string
		setup    func(t *testing.T, c ctrlclient.Client, kube *kubefake.Clientset)
		hash     string
		approval func(t *testing.T, c ctrlclient.Client) string
		// wantType is the refusal's type; "" restarts, "retry" is a retryable refusal.
		wantType, wantMsg string
	}{
		{name: "a selecting policy by an authorized author restarts"},
		{name: "no policy selects the workload",
			setup: func(t *testing.T, c ctrlclient.Client, _ *kubefake.Clientset) {
				policy(t, c, func(p *v1alpha1.ConfigReloadPolicy) {
					p.Spec.WorkloadSelector.MatchLabels = map[string]string{"app": "other"}
				})
			},
			wantType: v1alpha1.ReasonSubjectMismatch, wantMsg: "no ConfigReloadPolicy in shop selects Deployment web"},
		{name: "a ConfigMap no selecting policy scopes to the workload",
			setup: func(t *testing.T, c ctrlclient.Client, _ *kubefake.Clientset) {
				policy(t, c, func(p *v1alpha1.ConfigReloadPolicy) { p.Spec.ScopeLabel = "tier" })
			},
			wantType: v1alpha1.ReasonSubjectMismatch, wantMsg: "selects ConfigMap app in its scope"},
		{name: "a hash of the caller's choosing", hash: "forged", wantType: "retry", wantMsg: "not forged"},
		{name: "a policy without an author",
			setup: func(t *testing.T, c ctrlclient.Client, _ *kubefake.Clientset) {
				policy(t, c, func(p *v1alpha1.ConfigReloadPolicy) { p.Spec.Author = nil })
			},
			wantType: v1alpha1.ReasonForbidden, wantMsg: "has no spec.author"},
		{name: "an author who lost the grant",
			setup: func(t *testing.T, _ ctrlclient.Client, kube *kubefake.Clientset) {
				kube.PrependReactor("create", "subjectaccessreviews", func(k8stesting.Action) (bool, runtime.Object, error) {
					return true, &authorizationv1.SubjectAccessReview{}, nil
				})
			},
			wantType: v1alpha1.ReasonForbidden, wantMsg: "the author of ConfigReloadPolicy shop/reload: user \"alice\" cannot execute"},
		{name: "approval required and none given", setup: requireApproval,
			wantType: v1alpha1.ReasonSubjectMismatch, wantMsg: "ConfigReloadPolicy reload requires approval, and none was approved"},
		{name: "approval required and a rejected request named", setup: requireApproval,
			approval: func(*testing.T, ctrlclient.Client) string { return "reload-deployment-web-1" },
			wantType: v1alpha1.ReasonSubjectMismatch, wantMsg: `is decided "Rejected"`},
		{name: "approval required and approved", setup: requireApproval, approval: approved},
		{name: "an approval of myapp=H does not cover app=H", setup: requireApproval,
			approval: func(t *testing.T, c ctrlclient.Client) string {
				var rar v1alpha1.RemediationApprovalRequest
				require.NoError(t, c.Get(t.Context(), ctrlclient.ObjectKey{Namespace: "shop", Name: "reload-deployment-web-1"}, &rar))
				rar.Spec.ApprovalContext.Reason = gate.ReloadApprovalReason("Deployment", "shop", "web", []reloadrule.ConfigChange{{ConfigMap: "myapp", Hash: appHash}})
				rar.Status.Decision = v1alpha1.DecisionApproved
				require.NoError(t, c.Update(t.Context(), &rar))
				return rar.Name
			},
			wantType: v1alpha1.ReasonSubjectMismatch, wantMsg: "did not ask about ConfigMap app data " + appHash},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, kube, dyn, env := reloadFixtureIn(t, ns, nil, nil)
			c := r.Gate.Subjects.(ctrlclient.Client)
			if tc.setup != nil {
				tc.setup(t, c, kube)
			}
			in := RestartInput{Namespace: "shop", Kind: "Deployment", Name: "web", Scope: "prod", Policy: "reload",
				Changes: []reloadrule.ConfigChange{{ConfigMap: "app", Hash: appHash}}, RestartedAt: "2026-01-01T00:00:00Z"}
			if tc.hash != "" {
				in.Changes[0].Hash = tc.hash
			}
			if tc.approval != nil {
				in.ApprovalRequest = tc.approval(t, c)
			}
			_, err := env.ExecuteActivity(r.RestartWorkload, in)
			obj, getErr := dyn.Resource(appsv1.SchemeGroupVersion.WithResource("deployments")).Namespace("shop").Get(t.Context(), "web", metav1.GetOptions{})
			require.NoError(t, getErr)
			tmpl, _, _ := unstructuredAnnotations(obj.Object)
			if tc.wantType == "" {
				require.NoError(t, err)
				assert.Equal(t, appHash, tmpl[v1alpha1.ConfigHashAnnotation("app")])
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.wantMsg)
			assert.Empty(t, tmpl, "nothing rolls")
			assert.Empty(t, obj.GetAnnotations(), "nothing is written to the workload")
			var app *temporal.ApplicationError
			require.ErrorAs(t, err, &app)
			if tc.wantType == "retry" {
				assert.False(t, app.NonRetryable(), "the operator's signal of the new data supersedes it")
				return
			}
			assert.True(t, app.NonRetryable())
			assert.Equal(t, tc.wantType, app.Type())
			evs, err := kube.EventsV1().Events("shop").List(t.Context(), metav1.ListOptions{})
			require.NoError(t, err)
			require.Len(t, evs.Items, 1)
			assert.Equal(t, tc.wantType, evs.Items[0].Reason)
			assert.Contains(t, evs.Items[0].Note, "nothing restarted")
		})
	}
}

func TestCombineReloadApproval(t *testing.T) {
	gated := func(name string, timeout string) v1alpha1.ConfigReloadPolicy {
		p := v1alpha1.ConfigReloadPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.ConfigReloadPolicySpec{Approval: &v1alpha1.ApprovalSpec{Required: true}}}
		if timeout != "" {
			d := v1alpha1.Duration(timeout)
			p.Spec.Approval.Timeout = &d
		}
		return p
	}
	open := v1alpha1.ConfigReloadPolicy{ObjectMeta: metav1.ObjectMeta{Name: "open"}}
	assert.Equal(t, reloadrule.ApprovalRule{}, reloadrule.CombineApproval([]v1alpha1.ConfigReloadPolicy{open}))
	got := reloadrule.CombineApproval([]v1alpha1.ConfigReloadPolicy{open, gated("a", "30m"), gated("b", "10m"), gated("c", "")})
	assert.True(t, got.Required, "any policy requiring approval makes the restart wait")
	assert.Equal(t, []string{"a", "b", "c"}, got.Policies)
	assert.Equal(t, "10m0s", got.Timeout.String(), "the shortest timeout set")
}
