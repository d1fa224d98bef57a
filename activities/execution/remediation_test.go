package execution

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	ctrlfake "sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/remedy-dev/remedy/activities/internal/activitytest"
	"github.com/remedy-dev/remedy/api/v1alpha1"
)

// A step found under its name is used only when it is this request's own:
// anything else put there fails the request naming it, and is never read
// past what it is (no index into its owner references).
func TestCreateStepExecutionChecksWhatItFinds(t *testing.T) {
	in := StepInput{Namespace: "shop", Request: "recover", RequestUID: "rr-uid",
		Step: v1alpha1.RemediationStep{Name: "scale", Execution: v1alpha1.KubernetesExecutionSpec{
			Action: "scale", Target: v1alpha1.ObjectRef{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "web"},
			Parameters: &v1alpha1.ActionParameters{Replicas: ptr.To[int32](2)}}},
		Requester: &v1alpha1.Requester{Username: "alice"}}
	owner := metav1.OwnerReference{APIVersion: v1alpha1.GroupVersion.String(), Kind: "RemediationRequest", Name: "recover",
		UID: types.UID("rr-uid"), Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}
	labels := map[string]string{"remedy.dev/remediation-request": "recover", "remedy.dev/step": "scale"}
	own := func() *v1alpha1.KubernetesExecution {
		spec := in.Step.Execution
		spec.RemediationRequestRef = &v1alpha1.LocalRef{Name: "recover"}
		spec.Requester = in.Requester
		return &v1alpha1.KubernetesExecution{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "recover-scale", UID: "step-uid",
			Labels: labels, OwnerReferences: []metav1.OwnerReference{owner}}, Spec: spec}
	}
	for _, tc := range []struct {
		name    string
		found   func() *v1alpha1.KubernetesExecution
		wantErr string
	}{
		{name: "its own step, from a lost answer", found: own},
		{name: "no owner references", wantErr: "(it has no controller)", found: func() *v1alpha1.KubernetesExecution {
			k := own()
			k.OwnerReferences = nil
			return k
		}},
		{name: "another request's", wantErr: "(it belongs to RemediationRequest recover)", found: func() *v1alpha1.KubernetesExecution {
			k := own()
			k.OwnerReferences[0].UID = "other-uid"
			return k
		}},
		{name: "another step's labels", wantErr: "(its labels differ)", found: func() *v1alpha1.KubernetesExecution {
			k := own()
			k.Labels = map[string]string{"remedy.dev/step": "other"}
			return k
		}},
		{name: "another spec under the request's owner reference", wantErr: "(its spec is not the step's)", found: func() *v1alpha1.KubernetesExecution {
			k := own()
			k.Spec.Parameters = &v1alpha1.ActionParameters{Replicas: ptr.To[int32](50)}
			return k
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := runtime.NewScheme()
			require.NoError(t, v1alpha1.AddToScheme(s))
			// The request's own run asks: what is checked is the step found under its name.
			id := "rr/shop/recover/rr-uid"
			rr := &v1alpha1.RemediationRequest{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "recover", UID: "rr-uid"},
				Status: v1alpha1.RemediationRequestStatus{Phase: v1alpha1.PhaseExecuting, WorkflowID: id, RunID: activitytest.TestRunID}}
			r := &Remediation{Client: ctrlfake.NewClientBuilder().WithScheme(s).WithObjects(rr, tc.found()).Build()}
			var suite testsuite.WorkflowTestSuite
			env := suite.NewTestWorkflowEnvironment()
			env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: id})
			env.RegisterActivity(r)
			var ref StepRef
			env.ExecuteWorkflow(func(ctx workflow.Context) error {
				ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute,
					RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1}})
				return workflow.ExecuteActivity(ctx, r.CreateStepExecution, in).Get(ctx, &ref)
			})
			require.True(t, env.IsWorkflowCompleted())
			err := env.GetWorkflowError()
			if tc.wantErr == "" {
				require.NoError(t, err)
				assert.Equal(t, StepRef{Name: "recover-scale", UID: "step-uid"}, ref)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), "KubernetesExecution shop/recover-scale already exists and is not this request's step "+tc.wantErr)
			var app *temporal.ApplicationError
			require.ErrorAs(t, err, &app)
			assert.True(t, app.NonRetryable())
			assert.Equal(t, v1alpha1.ReasonInvalidParameters, app.Type())
		})
	}
}

// TestStepsOnlyFromTheRequestsRun: a RemediationRequest's steps are created
// by its recorded run only, not by another run under its workflow ID.
func TestStepsOnlyFromTheRequestsRun(t *testing.T) {
	s := runtime.NewScheme()
	require.NoError(t, v1alpha1.AddToScheme(s))
	const id = "rr/shop/fix/rr-uid"
	for _, tc := range []struct {
		name, runID string
		created     bool
	}{
		{"the recorded run", activitytest.TestRunID, true},
		{"another run of the same workflow ID", "the-closed-run", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rr := &v1alpha1.RemediationRequest{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "fix", UID: "rr-uid"},
				Status: v1alpha1.RemediationRequestStatus{Phase: v1alpha1.PhaseExecuting, WorkflowID: id, RunID: tc.runID}}
			c := fake.NewClientBuilder().WithScheme(s).WithObjects(rr).Build()
			r := &Remediation{Client: c}
			var suite testsuite.WorkflowTestSuite
			env := suite.NewTestWorkflowEnvironment()
			env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: id})
			env.RegisterActivity(r)
			env.ExecuteWorkflow(func(ctx workflow.Context) error {
				ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute,
					RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1}})
				return workflow.ExecuteActivity(ctx, r.CreateStepExecution, StepInput{Namespace: "shop", Request: "fix", RequestUID: "rr-uid",
					Step: v1alpha1.RemediationStep{Name: "scale", Execution: v1alpha1.KubernetesExecutionSpec{Action: "scale"}}}).Get(ctx, nil)
			})
			require.True(t, env.IsWorkflowCompleted())
			var steps v1alpha1.KubernetesExecutionList
			require.NoError(t, c.List(t.Context(), &steps))
			if tc.created {
				require.NoError(t, env.GetWorkflowError())
				assert.Len(t, steps.Items, 1)
				return
			}
			var app *temporal.ApplicationError
			require.ErrorAs(t, env.GetWorkflowError(), &app)
			assert.Equal(t, v1alpha1.ReasonSubjectMismatch, app.Type())
			assert.Empty(t, steps.Items)
		})
	}
}
