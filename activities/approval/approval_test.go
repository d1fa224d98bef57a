package approval

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/remedy-dev/remedy/activities/gate"
	"github.com/remedy-dev/remedy/activities/internal/activitytest"
	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/seal"
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
	// The test activity environment's caller is testRun; the step records it as its run.
	step := &v1alpha1.KubernetesExecution{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "fix-web-scale", UID: "kexec-uid"},
		Status: v1alpha1.KubernetesExecutionStatus{WorkflowID: activitytest.TestWorkflowID, RunID: activitytest.TestRunID, Phase: v1alpha1.PhaseWaitingApproval}}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(rr, step).WithStatusSubresource(&v1alpha1.RemediationApprovalRequest{}).Build()
	a := &Approvals{Client: c}
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(a)

	in := ApprovalRequestInput{Namespace: "shop", Name: "fix-web-scale-approval", SubjectUID: "kexec-uid", RemediationRequest: "fix-web", WorkflowID: activitytest.TestWorkflowID,
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

	record := func(d gate.Decision) gate.Decision {
		v, err := env.ExecuteActivity(a.RecordDecision, DecisionInput{Namespace: "shop", Name: in.Name, WorkflowID: in.WorkflowID, Decision: d})
		require.NoError(t, err)
		var got gate.Decision
		require.NoError(t, v.Get(&got))
		return got
	}
	at := time.Now().Truncate(time.Second)
	first := gate.Decision{Decision: v1alpha1.DecisionApproved, DecidedBy: "carol", Via: v1alpha1.DecidedViaKubectl, At: at}
	got := record(first)
	assert.True(t, at.Equal(got.At))
	got.At = at
	assert.Equal(t, first, got)
	got = record(gate.Decision{Decision: v1alpha1.DecisionRejected, DecidedBy: "bob", Via: v1alpha1.DecidedViaSignal, At: at})
	assert.Equal(t, v1alpha1.DecisionApproved, got.Decision, "the decision already recorded wins")
	assert.Equal(t, "carol", got.DecidedBy)
}

// TestApprovalOnlyFromTheSubjectsRun: an approval request for an execution
// is asked and decided by the execution's recorded run only.
func TestApprovalOnlyFromTheSubjectsRun(t *testing.T) {
	s := runtime.NewScheme()
	require.NoError(t, v1alpha1.AddToScheme(s))
	k := func(name, workflowID, runID string) *v1alpha1.KubernetesExecution {
		return &v1alpha1.KubernetesExecution{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, UID: types.UID(name + "-uid")},
			Status: v1alpha1.KubernetesExecutionStatus{WorkflowID: workflowID, RunID: runID, Phase: v1alpha1.PhaseWaitingApproval}}
	}
	rar := func(name, workflowID string) *v1alpha1.RemediationApprovalRequest {
		return &v1alpha1.RemediationApprovalRequest{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name + "-approval"},
			Spec: v1alpha1.RemediationApprovalRequestSpec{WorkflowID: workflowID,
				SubjectRef: v1alpha1.ObjectRef{APIVersion: "remedy.dev/v1alpha1", Kind: "KubernetesExecution", Namespace: "shop", Name: name}}}
	}
	c := fake.NewClientBuilder().WithScheme(s).WithStatusSubresource(&v1alpha1.RemediationApprovalRequest{}).WithObjects(
		k("other-run", activitytest.TestWorkflowID, "an-earlier-run"), rar("other-run", activitytest.TestWorkflowID),
		k("other-workflow", "kexec/shop/other-workflow/x", activitytest.TestRunID), rar("other-workflow", "kexec/shop/other-workflow/x"),
	).Build()
	a := &Approvals{Client: c}
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(a)
	for _, name := range []string{"other-run", "other-workflow"} {
		t.Run(name, func(t *testing.T) {
			_, err := env.ExecuteActivity(a.CreateApprovalRequest, ApprovalRequestInput{Namespace: "shop", Name: name + "-new", WorkflowID: activitytest.TestWorkflowID,
				Subject: v1alpha1.ObjectRef{APIVersion: "remedy.dev/v1alpha1", Kind: "KubernetesExecution", Namespace: "shop", Name: name},
				Context: v1alpha1.ApprovalContext{Reason: "r", Action: "scale"}, RequiredBy: time.Now().Add(time.Hour)})
			requireMismatch(t, err)
			_, err = env.ExecuteActivity(a.RecordDecision, DecisionInput{Namespace: "shop", Name: name + "-approval", WorkflowID: activitytest.TestWorkflowID,
				Decision: gate.Decision{Decision: v1alpha1.DecisionApproved, DecidedBy: "mallory", Via: v1alpha1.DecidedViaSignal, At: time.Now()}})
			requireMismatch(t, err)
			_, err = env.ExecuteActivity(a.AuthorizeApprover, ApproverInput{Namespace: "shop", Name: name + "-approval", Person: seal.Person{Username: "mallory"}})
			requireMismatch(t, err)
			var got v1alpha1.RemediationApprovalRequest
			require.NoError(t, c.Get(t.Context(), ctrlclient.ObjectKey{Namespace: "shop", Name: name + "-approval"}, &got))
			assert.Empty(t, got.Status.Decision, "no decision recorded")
			assert.True(t, apierrors.IsNotFound(c.Get(t.Context(), ctrlclient.ObjectKey{Namespace: "shop", Name: name + "-new"}, &got)), "no request created")
		})
	}
}

func requireMismatch(t *testing.T, err error) {
	t.Helper()
	var app *temporal.ApplicationError
	require.ErrorAs(t, err, &app)
	assert.Equal(t, v1alpha1.ReasonSubjectMismatch, app.Type())
	assert.True(t, app.NonRetryable())
}

func TestApprovalRequestOwnedByAnySubject(t *testing.T) {
	s := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(s))
	require.NoError(t, v1alpha1.AddToScheme(s))
	web := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: "web-uid"}}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(web).Build()
	a := &Approvals{Client: c, Runs: openRunsOf(gate.ReloadWorkflowType)}
	// Asked as the workload's reload run.
	ask := func(name, subject string, requiredBy time.Time) error {
		id := v1alpha1.ReloadWorkflowID("shop", "Deployment", subject)
		return activitytest.AsRun(t, id, a, a.CreateApprovalRequest, ApprovalRequestInput{Namespace: "shop", Name: name, WorkflowID: id,
			Subject: v1alpha1.ObjectRef{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: subject},
			Context: v1alpha1.ApprovalContext{Reason: "r", Action: "restart"}, RequiredBy: requiredBy}, nil)
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
	assert.Equal(t, v1alpha1.ReasonNotFound, app.Type())
}

// A request about anything but an execution is asked only by the open
// reload, drift or alert run of its workflow ID: not by another workflow
// that names itself, nor by a rogue run of another type under the ID.
func TestApprovalOfAWorkloadOnlyFromItsOpenRun(t *testing.T) {
	s := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(s))
	require.NoError(t, v1alpha1.AddToScheme(s))
	web := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: "web-uid"}}
	reload := v1alpha1.ReloadWorkflowID("shop", "Deployment", "web")
	for name, tc := range map[string]struct{ id, runType string }{
		"a workflow of no kind that asks": {id: "rogue/shop", runType: gate.ReloadWorkflowType},
		"a rogue run under the reload ID": {id: reload, runType: "Rogue"},
	} {
		t.Run(name, func(t *testing.T) {
			c := fake.NewClientBuilder().WithScheme(s).WithObjects(web.DeepCopy()).Build()
			a := &Approvals{Client: c, Runs: openRunsOf(tc.runType)}
			err := activitytest.AsRun(t, tc.id, a, a.CreateApprovalRequest, ApprovalRequestInput{Namespace: "shop", Name: "asked", WorkflowID: tc.id,
				Subject: v1alpha1.ObjectRef{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "web"},
				Context: v1alpha1.ApprovalContext{Reason: "r", Action: "restart"}, RequiredBy: time.Now().Add(time.Hour)}, nil)
			requireMismatch(t, err)
			var got v1alpha1.RemediationApprovalRequest
			assert.True(t, apierrors.IsNotFound(c.Get(t.Context(), ctrlclient.ObjectKey{Namespace: "shop", Name: "asked"}, &got)), "no request created")
		})
	}
}

// TestRecordDecisionRetriesARefusedRead: the worker reading its own approval
// request is refused only while the API server's authorizer is not ready
// (just restarted): the decision is retried, never failed for good.
func TestRecordDecisionRetriesARefusedRead(t *testing.T) {
	s := runtime.NewScheme()
	require.NoError(t, v1alpha1.AddToScheme(s))
	forbidden := apierrors.NewForbidden(schema.GroupResource{Group: "remedy.dev", Resource: "remediationapprovalrequests"}, "web-approval", errors.New("RBAC: not ready"))
	c := fake.NewClientBuilder().WithScheme(s).WithInterceptorFuncs(interceptor.Funcs{
		Get: func(context.Context, ctrlclient.WithWatch, ctrlclient.ObjectKey, ctrlclient.Object, ...ctrlclient.GetOption) error {
			return forbidden
		},
	}).Build()
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(&Approvals{Client: c})
	_, err := env.ExecuteActivity((&Approvals{}).RecordDecision, DecisionInput{Namespace: "shop", Name: "web-approval", WorkflowID: activitytest.TestWorkflowID,
		Decision: gate.Decision{Decision: v1alpha1.DecisionApproved, DecidedBy: "carol", Via: v1alpha1.DecidedViaKubectl, At: time.Now()}})
	require.Error(t, err)
	var app *temporal.ApplicationError
	require.ErrorAs(t, err, &app)
	assert.False(t, app.NonRetryable(), "retried: %v", err)
	assert.Contains(t, err.Error(), "retrying")
}
