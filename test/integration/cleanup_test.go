package integration

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/test/harness"
)

// awaitGone waits until obj no longer exists.
func awaitGone(t *testing.T, obj ctrlclient.Object, why string) {
	t.Helper()
	require.Eventually(t, func() bool {
		return apierrors.IsNotFound(harness.Kube().Get(context.Background(), ctrlclient.ObjectKeyFromObject(obj), obj))
	}, runTimeout, 100*time.Millisecond, "%s %s: %s", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName(), why)
}

// Finished executions, remediations and approval requests are deleted once
// their ttlSecondsAfterFinished is up; their workflows' histories stay in
// Temporal. A run in its rollback window is not finished, and a run whose
// spec sets no TTL stays (the harness's operator has no default).
func TestFinishedRunsAreDeletedAfterTheirTTL(t *testing.T) {
	ctx := context.Background()
	ns := harness.Namespace(t)
	for _, name := range []string{"approved", "kept", "window", "steps"} {
		harness.Deployment(t, ns, name, 1)
	}
	scale := func(name string, ttl *int32, window time.Duration) v1alpha1.KubernetesExecutionSpec {
		return v1alpha1.KubernetesExecutionSpec{Action: "scale", Target: target(ns, name), Parameters: &v1alpha1.ActionParameters{Replicas: ptr.To[int32](2)},
			RollbackWindow: v1alpha1.DurationOf(window), TTLSecondsAfterFinished: ttl}
	}
	spec := scale("approved", ptr.To[int32](1), 0)
	spec.Approval = &v1alpha1.ApprovalSpec{Required: true}
	approved := waitPhase(t, createExecution(t, ns, "ttl-approved", spec), v1alpha1.PhaseWaitingApproval)
	rar := &v1alpha1.RemediationApprovalRequest{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: approved.Status.ApprovalRequestRef.Name}}
	require.NoError(t, harness.Kube().Get(ctx, ctrlclient.ObjectKeyFromObject(rar), rar))
	assert.Equal(t, ptr.To[int32](1), rar.Spec.TTLSecondsAfterFinished, "the request takes its execution's TTL")

	kept := createExecution(t, ns, "ttl-kept", scale("kept", nil, 0))
	window := createExecution(t, ns, "ttl-window", scale("window", ptr.To[int32](0), time.Hour))
	rr := &v1alpha1.RemediationRequest{ObjectMeta: metav1.ObjectMeta{Name: "ttl-steps", Namespace: ns},
		Spec: v1alpha1.RemediationRequestSpec{TTLSecondsAfterFinished: ptr.To[int32](0),
			Steps: []v1alpha1.RemediationStep{{Name: "scale", Execution: scale("steps", nil, 0)}}}}
	require.NoError(t, harness.Kube().Create(ctx, rr))

	out, err := temporalCLIAs(t, ns, "carol", "workflow", "signal", "--workflow-id", approved.Status.WorkflowID, "--name", "approve",
		"--input", `{"approver":"carol","reason":"ok"}`)
	require.NoError(t, err, out)

	id := approved.Status.WorkflowID
	awaitGone(t, approved, "deleted a second after it completed")
	awaitGone(t, rar, "deleted with its execution")
	awaitGone(t, rr, "deleted once it completed (ttl 0)")
	awaitGone(t, &v1alpha1.KubernetesExecution{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ttl-steps-scale"}}, "a step goes with its request")

	d, err := harness.Temporal().DescribeWorkflowExecution(ctx, id, "")
	require.NoError(t, err, "Temporal keeps the history")
	assert.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED, d.WorkflowExecutionInfo.Status)
	assert.Equal(t, int32(2), replicasOf(t, ns, "approved"))

	waitPhase(t, kept, v1alpha1.PhaseCompleted)
	window = waitPhase(t, window, v1alpha1.PhaseRollbackReady)
	// The cleanup had its look at both: one made after them, with a TTL of 0,
	// is queued behind their last changes and goes.
	probe := createExecution(t, ns, "ttl-probe", scale("kept", ptr.To[int32](0), 0))
	awaitGone(t, probe, "deleted once it completed (ttl 0)")
	require.NoError(t, harness.Kube().Get(ctx, ctrlclient.ObjectKeyFromObject(kept), kept), "no TTL, no default: kept")
	require.NoError(t, harness.Kube().Get(ctx, ctrlclient.ObjectKeyFromObject(window), window), "a run in its rollback window has not finished")
	assert.Equal(t, v1alpha1.PhaseRollbackReady, window.Status.Phase)
}
