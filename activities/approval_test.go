package activities

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/remedy-dev/remedy/api/v1alpha1"
)

func TestNamespaceApprovalTimeout(t *testing.T) {
	s := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(s))
	require.NoError(t, v1alpha1.AddToScheme(s))
	cm := func(ns, value string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: ConfigMapName}, Data: map[string]string{ConfigKeyApprovalTimeout: value}}
	}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(cm("set", "30m"), cm("typo", "thirty minutes")).Build()
	for ns, want := range map[string]time.Duration{"set": 30 * time.Minute, "typo": 0, "none": 0} {
		t.Run(ns, func(t *testing.T) {
			var suite testsuite.WorkflowTestSuite
			env := suite.NewTestActivityEnvironment()
			a := &Approvals{Client: c}
			env.RegisterActivity(a)
			v, err := env.ExecuteActivity(a.NamespaceApprovalTimeout, ns)
			require.NoError(t, err)
			var got time.Duration
			require.NoError(t, v.Get(&got))
			assert.Equal(t, want, got)
		})
	}
}

func TestApprovalRequestOwnershipAndFirstDecisionWins(t *testing.T) {
	s := runtime.NewScheme()
	require.NoError(t, v1alpha1.AddToScheme(s))
	rr := &v1alpha1.RemediationRequest{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "fix-web", UID: "rr-uid"}}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(rr).WithStatusSubresource(&v1alpha1.RemediationApprovalRequest{}).Build()
	a := &Approvals{Client: c}
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(a)

	in := ApprovalRequestInput{Namespace: "shop", Name: "fix-web-scale-approval", SubjectUID: "kexec-uid", RemediationRequest: "fix-web", WorkflowID: "kexec/shop/fix-web-scale/kexec-uid",
		Subject:    v1alpha1.ObjectRef{APIVersion: "remedy.dev/v1alpha1", Kind: "KubernetesExecution", Namespace: "shop", Name: "fix-web-scale"},
		Context:    v1alpha1.ApprovalContext{Reason: "r", Action: "scale"},
		RequiredBy: time.Now().Add(time.Hour).Truncate(time.Second)}
	for range 2 { // a retry finds the request it created
		_, err := env.ExecuteActivity(a.CreateApprovalRequest, in)
		require.NoError(t, err)
	}
	var rar v1alpha1.RemediationApprovalRequest
	require.NoError(t, c.Get(t.Context(), ctrlclient.ObjectKey{Namespace: "shop", Name: in.Name}, &rar))
	owner := metav1.GetControllerOf(&rar)
	require.NotNil(t, owner)
	assert.Equal(t, "RemediationRequest", owner.Kind, "flat hierarchy: the RemediationRequest owns the approval")
	assert.Equal(t, "rr-uid", string(owner.UID))

	record := func(d Decision) Decision {
		v, err := env.ExecuteActivity(a.RecordDecision, DecisionInput{Namespace: "shop", Name: in.Name, WorkflowID: in.WorkflowID, Decision: d})
		require.NoError(t, err)
		var got Decision
		require.NoError(t, v.Get(&got))
		return got
	}
	at := time.Now().Truncate(time.Second)
	first := Decision{Decision: v1alpha1.DecisionApproved, DecidedBy: "carol", Via: v1alpha1.DecidedViaKubectl, At: at}
	got := record(first)
	assert.True(t, at.Equal(got.At))
	got.At = at
	assert.Equal(t, first, got)
	got = record(Decision{Decision: v1alpha1.DecisionRejected, DecidedBy: "bob", Via: v1alpha1.DecidedViaSignal, At: at})
	assert.Equal(t, v1alpha1.DecisionApproved, got.Decision, "the decision already recorded wins")
	assert.Equal(t, "carol", got.DecidedBy)
}

func TestApprovalRequestOwnedByAnySubject(t *testing.T) {
	s := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(s))
	require.NoError(t, v1alpha1.AddToScheme(s))
	web := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: "web-uid"}}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(web).Build()
	a := &Approvals{Client: c}
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(a)
	ask := func(name, subject string, requiredBy time.Time) error {
		_, err := env.ExecuteActivity(a.CreateApprovalRequest, ApprovalRequestInput{Namespace: "shop", Name: name, WorkflowID: "reload/shop/Deployment/web",
			Subject: v1alpha1.ObjectRef{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: subject},
			Context: v1alpha1.ApprovalContext{Reason: "r", Action: "restart"}, RequiredBy: requiredBy})
		return err
	}
	at := time.Now().Add(time.Hour).Truncate(time.Second)
	require.NoError(t, ask("reload-deployment-web-1", "web", at))
	var rar v1alpha1.RemediationApprovalRequest
	require.NoError(t, c.Get(t.Context(), ctrlclient.ObjectKey{Namespace: "shop", Name: "reload-deployment-web-1"}, &rar))
	require.Len(t, rar.OwnerReferences, 1)
	owner := rar.OwnerReferences[0]
	assert.Equal(t, metav1.OwnerReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web", UID: "web-uid"}, owner,
		"the workload owns its request, read by name; it is not its controller")

	err := ask("reload-deployment-web-1", "web", at.Add(time.Minute))
	require.Error(t, err, "the same name for a different question is refused, not reused")
	assert.Contains(t, err.Error(), "already exists")

	err = ask("reload-deployment-gone-1", "gone", at)
	require.Error(t, err)
	var app *temporal.ApplicationError
	require.ErrorAs(t, err, &app)
	assert.Equal(t, ReasonNotFound, app.Type())
}
