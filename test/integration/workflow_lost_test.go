package integration

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/operator"
	"github.com/remedy-dev/remedy/test/harness"
	"github.com/remedy-dev/remedy/workflows"
)

// runIdle starts a workflow with id on a task queue no worker polls, so it
// stays Running until the test ends.
func runIdle(t *testing.T, id string) {
	t.Helper()
	ctx := context.Background()
	_, err := harness.Temporal().ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: "idle-" + id}, "Idle")
	require.NoError(t, err)
	t.Cleanup(func() { _ = harness.Temporal().TerminateWorkflow(ctx, id, "", "test over") })
}

// workflowStatus is the status of id's latest run; NotFound is returned as is.
func workflowStatus(id string) (enumspb.WorkflowExecutionStatus, error) {
	d, err := harness.Temporal().DescribeWorkflowExecution(context.Background(), id, "")
	return d.GetWorkflowExecutionInfo().GetStatus(), err
}

// A pushing run whose workflow is terminated by hand never writes again: the
// operator, looking at the quiet run, fails it WorkflowLost with a Warning
// Event and Ready=False.
func TestTerminatedWorkflowFailsTheExecutionWorkflowLost(t *testing.T) {
	ctx := context.Background()
	ns := harness.Namespace(t)
	k, _ := awaitingApproval(t, ns, "scale-lost", time.Hour, 0)
	require.Positive(t, k.Status.Sequence, "the run writes its own status")
	id := k.Status.WorkflowID
	require.NoError(t, harness.Temporal().TerminateWorkflow(ctx, id, "", "terminated by hand"))

	k = harness.Eventually(t, k, runTimeout, func(k *v1alpha1.KubernetesExecution) bool { return k.Status.Phase.Terminal() })
	assertLost(t, ns, k.Name, k.Status.Phase, k.Status.Reason, k.Status.Message, k.Status.Conditions,
		"workflow "+id+" was terminated while in phase WaitingApproval; nothing will finish this run")
}

// A RemediationRequest whose workflow is terminated fails WorkflowLost too;
// its step, canceled by Temporal's parent-close policy, says Canceled.
func TestTerminatedWorkflowFailsTheRemediationWorkflowLost(t *testing.T) {
	ctx := context.Background()
	ns := harness.Namespace(t)
	harness.Deployment(t, ns, "web", 1)
	step := scaleSpec(ns, "web", 2)
	step.Approval = &v1alpha1.ApprovalSpec{Required: true, Timeout: v1alpha1.DurationOf(time.Hour)}
	rr := &v1alpha1.RemediationRequest{ObjectMeta: metav1.ObjectMeta{Name: "fix", Namespace: ns},
		Spec: v1alpha1.RemediationRequestSpec{Steps: []v1alpha1.RemediationStep{{Name: "scale", Execution: step}}}}
	require.NoError(t, harness.Kube().Create(ctx, rr))
	k := &v1alpha1.KubernetesExecution{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fix-scale"}}
	k = waitPhase(t, k, v1alpha1.PhaseWaitingApproval)
	require.NoError(t, harness.Kube().Get(ctx, ctrlclient.ObjectKeyFromObject(rr), rr))
	require.Positive(t, rr.Status.Sequence, "the run writes its own status")
	id := rr.Status.WorkflowID
	require.NoError(t, harness.Temporal().TerminateWorkflow(ctx, id, "", "terminated by hand"))

	rr = harness.Eventually(t, rr, runTimeout, func(rr *v1alpha1.RemediationRequest) bool { return rr.Status.Phase.Terminal() })
	assertLost(t, ns, rr.Name, rr.Status.Phase, rr.Status.Reason, rr.Status.Message, rr.Status.Conditions,
		"workflow "+id+" was terminated while in phase Executing; nothing will finish this run")

	k = waitPhase(t, k, v1alpha1.PhaseFailed)
	assert.Equal(t, v1alpha1.ReasonCanceled, k.Status.Reason, "the step was canceled with its parent, not lost")
}

// An approval request past requiredBy whose workflow is gone has no timer
// left to expire it: the operator does, on time, in its own name.
func TestRequestOfAGoneWorkflowIsExpiredAtRequiredBy(t *testing.T) {
	ctx := context.Background()
	ns := harness.Namespace(t)
	k, rar := awaitingApproval(t, ns, "scale-orphan", 15*time.Second, 0)
	id := k.Status.WorkflowID
	require.NoError(t, harness.Temporal().TerminateWorkflow(ctx, id, "", "terminated by hand"))
	requiredBy := rar.Spec.RequiredBy.Time
	require.True(t, time.Now().Before(requiredBy), "the workflow was terminated before its timer fired")

	rar = harness.Eventually(t, rar, time.Until(requiredBy)+runTimeout, func(r *v1alpha1.RemediationApprovalRequest) bool {
		return r.Status.Decision != ""
	})
	assert.Equal(t, v1alpha1.DecisionExpired, rar.Status.Decision)
	assert.Equal(t, operator.OperatorName, rar.Status.DecidedBy)
	assert.Equal(t, v1alpha1.DecidedViaTimer, rar.Status.DecidedVia)
	assert.Equal(t, "expired by remedy-operator: workflow "+id+" closed Terminated, so its timer cannot record the expiry of "+
		requiredBy.UTC().Format(time.RFC3339), rar.Status.DecisionMessage)
	require.NotNil(t, rar.Status.DecidedAt)
	late := rar.Status.DecidedAt.Sub(requiredBy)
	assert.True(t, late >= 0 && late < 5*time.Second, "expired %s after requiredBy", late)
	assertWarning(t, ns, rar.Name, "Expired", "Expired by remedy-operator (timer): expired by remedy-operator: workflow "+id)
	ready := meta.FindStatusCondition(rar.Status.Conditions, v1alpha1.ConditionReady)
	assert.Equal(t, metav1.ConditionTrue, ready.Status)
	assert.Equal(t, "Expired", ready.Reason)
}

// An execution deleted after its workflow started but before
// status.workflowID was written still has its workflow canceled, by the ID
// derived from the object, instead of leaving it to run for an object that is
// gone. Here every status write in the namespace is refused (as if the
// operator's write after the start failed), the run's own pushes included.
// With no status.runID recorded, the run waits (its push and its subject
// check retry until the operator records its run) and does nothing for the
// object: no approval request, nothing written.
func TestDeletingAnExecutionBeforeItsWorkflowIDIsWrittenCancelsItsWorkflow(t *testing.T) {
	ctx := context.Background()
	ns := harness.Namespace(t)
	harness.Deployment(t, ns, "web", 1)
	refuseStatusWrites(t, ns)
	spec := scaleSpec(ns, "web", 2)
	spec.Approval = &v1alpha1.ApprovalSpec{Required: true, Timeout: v1alpha1.DurationOf(time.Hour)}
	k := createExecution(t, ns, "scale-doomed", spec)
	id := v1alpha1.ExecutionWorkflowID(ns, k.Name, string(k.UID))

	require.Eventually(t, func() bool {
		s, err := workflowStatus(id)
		return err == nil && s == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING
	}, runTimeout, 100*time.Millisecond, "the operator started the workflow")
	require.NoError(t, harness.Kube().Get(ctx, ctrlclient.ObjectKeyFromObject(k), k))
	require.Contains(t, k.Finalizers, operator.Finalizer, "the finalizer came before the start")
	require.Empty(t, k.Status.WorkflowID, "no status was written")
	err := harness.Kube().Get(ctx, ctrlclient.ObjectKey{Namespace: ns, Name: v1alpha1.ApprovalRequestName(k.Name)}, &v1alpha1.RemediationApprovalRequest{})
	require.True(t, apierrors.IsNotFound(err), "a run whose run ID is not recorded asks nothing: %v", err)

	require.NoError(t, harness.Kube().Delete(ctx, k))
	require.Eventually(t, func() bool {
		return apierrors.IsNotFound(harness.Kube().Get(ctx, ctrlclient.ObjectKeyFromObject(k), &v1alpha1.KubernetesExecution{}))
	}, runTimeout, 100*time.Millisecond, "the finalizer was removed")

	require.Eventually(t, func() bool {
		s, err := workflowStatus(id)
		var nf *serviceerror.NotFound
		return errors.As(err, &nf) || (err == nil && s != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING)
	}, runTimeout, 200*time.Millisecond, "workflow %s is left running", id)
	var res workflows.ExecutionResult
	require.NoError(t, workflows.FinalResult(harness.Temporal().GetWorkflow(ctx, id, "").Get(ctx, &res), &res))
	assert.Equal(t, v1alpha1.ReasonCanceled, res.Status.Reason, res.Status.Message)
}

// refuseStatusWrites installs a ValidatingAdmissionPolicy that refuses every
// write of a KubernetesExecution's status in ns, by anyone, and waits until
// the API server enforces it (a dry-run create labelled probe is refused too).
func refuseStatusWrites(t *testing.T, ns string) {
	ctx := context.Background()
	denyInNamespace(t, ns, "refuse-status-"+ns, []admissionv1.OperationType{admissionv1.Create, admissionv1.Update},
		admissionv1.Rule{APIGroups: []string{v1alpha1.GroupVersion.Group}, APIVersions: []string{v1alpha1.GroupVersion.Version},
			Resources: []string{"kubernetesexecutions", "kubernetesexecutions/status"}},
		`(!has(request.subResource) || request.subResource != 'status') && !(has(object.metadata.labels) && 'probe' in object.metadata.labels)`,
		"status writes are refused")
	probe := &v1alpha1.KubernetesExecution{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: ns, Labels: map[string]string{"probe": "yes"}},
		Spec: scaleSpec(ns, "web", 1)}
	require.Eventually(t, func() bool {
		return harness.Kube().Create(ctx, probe.DeepCopy(), ctrlclient.DryRunAll) != nil
	}, runTimeout, 100*time.Millisecond, "admission policy never enforced")
}

// assertLost checks a status failed WorkflowLost with message, Ready=False
// and a Warning Event saying so.
func assertLost(t *testing.T, ns, name string, phase v1alpha1.Phase, reason, message string, conds []metav1.Condition, want string) {
	t.Helper()
	assert.Equal(t, v1alpha1.PhaseFailed, phase)
	assert.Equal(t, v1alpha1.ReasonWorkflowLost, reason)
	assert.Equal(t, want, message)
	ready := meta.FindStatusCondition(conds, v1alpha1.ConditionReady)
	require.NotNil(t, ready)
	assert.Equal(t, metav1.ConditionFalse, ready.Status)
	assert.Equal(t, v1alpha1.ReasonWorkflowLost, ready.Reason)
	assertWarning(t, ns, name, "Failed", "WorkflowLost: "+want)
}

// assertWarning waits for a Warning Event on ns/name with reason whose note contains note.
func assertWarning(t *testing.T, ns, name, reason, note string) {
	t.Helper()
	assertEvents(t, ns, name, reason)
	var list eventsv1.EventList
	require.NoError(t, harness.Kube().List(context.Background(), &list, ctrlclient.InNamespace(ns)))
	for _, e := range list.Items {
		if e.Regarding.Name == name && e.Reason == reason && e.Type == "Warning" && strings.Contains(e.Note, note) {
			return
		}
	}
	assert.Failf(t, "no Warning Event", "%s/%s has no Warning %s containing %q", ns, name, reason, note)
}
