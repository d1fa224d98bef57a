package integration

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	temporalworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/activities/reload"
	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/reloadrule"
	"github.com/remedy-dev/remedy/test/harness"
	"github.com/remedy-dev/remedy/workflows"
)

// rogueRestart schedules Remedy's RestartWorkload activity on Remedy's task
// queue with an input of the caller's choosing, as anyone reaching Temporal can.
func rogueRestart(ctx workflow.Context, in reload.RestartInput) error {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{TaskQueue: workflows.TaskQueue,
		StartToCloseTimeout: 30 * time.Second, RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1}})
	return workflow.ExecuteActivity(ctx, "RestartWorkload", in).Get(ctx, nil)
}

// The finding's shape: approval coverage was a substring of the request's
// reason, so a request approved for myapp=H covered app=H. A gated workload
// uses ConfigMaps app and myapp; myapp's new data is approved and rolled;
// then app gets the same data (the same hash H), and a restart for app=H
// naming myapp's approved request is scheduled by hand. Nothing rolls.
func TestReloadApprovalOfMyappDoesNotCoverApp(t *testing.T) {
	ctx := context.Background()
	ns := harness.Namespace(t)
	env := "coverage-" + ns
	web := reloadDeployment(t, ns, "web", env)
	app := reloadConfigMap(t, ns, "app", env, "v0")
	myapp := reloadConfigMap(t, ns, "myapp", env, "v0")
	p := &v1alpha1.ConfigReloadPolicy{ObjectMeta: metav1.ObjectMeta{Name: "reload", Namespace: ns},
		Spec: v1alpha1.ConfigReloadPolicySpec{
			ConfigMapSelector: metav1.LabelSelector{MatchLabels: map[string]string{"reload": "true"}},
			WorkloadSelector:  metav1.LabelSelector{MatchLabels: map[string]string{"reload": "true"}},
			Debounce:          v1alpha1.DurationOf(time.Second),
			Approval:          &v1alpha1.ApprovalSpec{Required: true, Timeout: v1alpha1.DurationOf(time.Hour)},
		}}
	require.NoError(t, harness.Kube().Create(ctx, p))
	waitBaseline(t, web, "app")
	waitBaseline(t, web, "myapp")
	harness.Eventually(t, p, reloadTimeout, func(p *v1alpha1.ConfigReloadPolicy) bool {
		return meta.IsStatusConditionTrue(p.Status.Conditions, v1alpha1.ConditionReady)
	})
	grant(t, ns, "carol", "approve")

	setData(t, myapp, "v1")
	approved := waitApprovalRequests(t, ns, "web", 1)
	require.NoError(t, impersonating(t, "carol").Status().Patch(ctx, approved, decisionPatch("Approved", "ship myapp", "carol")))
	h := reloadrule.ConfigMapHash(&corev1.ConfigMap{Data: map[string]string{"value": "v1"}})
	web = waitTemplateHash(t, web, "myapp", h)
	assert.Contains(t, approved.Spec.ApprovalContext.Reason, "myapp="+h)
	assert.NotContains(t, approved.Spec.ApprovalContext.Reason, " app="+h)

	setData(t, app, "v1") // the same data: the same hash
	waitApprovalRequests(t, ns, "web", 2)
	require.NoError(t, harness.Kube().Get(ctx, ctrlclient.ObjectKeyFromObject(web), web))
	gen := web.Generation

	queue := "rogue-" + ns
	w := temporalworker.New(harness.Temporal(), queue, temporalworker.Options{})
	w.RegisterWorkflowWithOptions(rogueRestart, workflow.RegisterOptions{Name: "RogueRestart"})
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)
	in := reload.RestartInput{Namespace: ns, Kind: "Deployment", Name: "web", Scope: env, Policy: "reload",
		Changes: []reloadrule.ConfigChange{{ConfigMap: "app", Hash: h}}, RestartedAt: time.Now().UTC().Format(time.RFC3339),
		ApprovalRequest: approved.Name}
	run, err := harness.Temporal().ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "rogue-restart-" + ns, TaskQueue: queue}, "RogueRestart", in)
	require.NoError(t, err)
	err = run.Get(ctx, nil)
	require.Error(t, err, "the restart is refused")
	t.Logf("refused: %v", err)
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	assert.Equal(t, v1alpha1.ReasonSubjectMismatch, appErr.Type())

	requireGeneration(t, web, gen) // the rogue run has closed
	assert.NotEqual(t, h, web.Spec.Template.Annotations[hashKey("app")], "app's new data did not roll without its approval")
}
