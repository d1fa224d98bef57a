package gate

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/remedy-dev/remedy/activities/internal/activitytest"
	"github.com/remedy-dev/remedy/api/v1alpha1"
)

// TestOwnRunBindsTheRunID: a KubernetesExecution acts for the run its
// status records, and for no other run of the same workflow ID; an
// unrecorded run is retried, never accepted.
func TestOwnRunBindsTheRunID(t *testing.T) {
	s := runtime.NewScheme()
	require.NoError(t, v1alpha1.AddToScheme(s))
	spec := v1alpha1.KubernetesExecutionSpec{Action: "scale", Parameters: &v1alpha1.ActionParameters{Replicas: ptr.To[int32](2)}}
	for _, tc := range []struct {
		name, workflowID, runID string
		phase                   v1alpha1.Phase
		// want: "" passes, "retry" fails retryably, else the permanent reason.
		want string
	}{
		{"the recorded run", activitytest.TestWorkflowID, activitytest.TestRunID, v1alpha1.PhaseValidating, ""},
		{"another run of the same workflow ID", activitytest.TestWorkflowID, "the-closed-run", v1alpha1.PhaseValidating, v1alpha1.ReasonSubjectMismatch},
		{"another workflow", "kexec/shop/x/other", activitytest.TestRunID, v1alpha1.PhaseValidating, v1alpha1.ReasonSubjectMismatch},
		{"a run not recorded yet waits", activitytest.TestWorkflowID, "", v1alpha1.PhasePending, "retry"},
		{"a finished execution, whoever asks", activitytest.TestWorkflowID, "", v1alpha1.PhaseCompleted, v1alpha1.ReasonSubjectMismatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := &v1alpha1.KubernetesExecution{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "x", UID: "u1"}, Spec: spec,
				Status: v1alpha1.KubernetesExecutionStatus{WorkflowID: tc.workflowID, RunID: tc.runID, Phase: tc.phase}}
			sub := &Subjects{Client: fake.NewClientBuilder().WithScheme(s).WithObjects(k).Build()}
			ref := SubjectRef{Namespace: "shop", Name: "x", UID: "u1"}
			run := ownRun{want: activitytest.TestWorkflowID, workflowID: tc.workflowID, runID: tc.runID}
			var suite testsuite.WorkflowTestSuite
			env := suite.NewTestActivityEnvironment()
			check := func(ctx context.Context) error { return sub.ownRun(ctx, ref, "KubernetesExecution", run, tc.phase, "") }
			env.RegisterActivity(check)
			_, err := env.ExecuteActivity(check)
			switch tc.want {
			case "":
				require.NoError(t, err)
			case "retry":
				require.ErrorContains(t, err, "not recorded yet")
				var app *temporal.ApplicationError
				require.ErrorAs(t, err, &app)
				assert.False(t, app.NonRetryable())
			default:
				var app *temporal.ApplicationError
				require.ErrorAs(t, err, &app)
				assert.Equal(t, tc.want, app.Type())
				assert.True(t, app.NonRetryable())
			}
		})
	}
}
