package operator

import (
	"context"
	"errors"
	"fmt"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/client"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/runs"
	"github.com/remedy-dev/remedy/workflows"
)

// Run binding. Every activity that acts for a KubernetesExecution or a
// RemediationRequest accepts only the run its status.runID names
// (gate.Subjects.ownRun, the status push). The operator records the
// run ID that starting the workflow returns, in the same status write as the
// workflow ID. Two kinds of run have no such start to record, and are
// backfilled here by describing the open run of the object's deterministic
// workflow ID:
//
//   - a RemediationRequest's steps, whose execution workflows the request's
//     run starts as children: the open run is recorded only when its parent,
//     as Temporal's server records it, is the request's recorded run;
//   - runs started before v0.2 (no runID recorded), still open after an
//     upgrade: only one run of an ID can be open, and it is recorded only
//     when it is the workflow type the object runs on Remedy's task queue,
//     so it runs Remedy's code with the input its start was checked against
//     (VerifyExecution/VerifyRemediation).
//
// A closed run is never recorded: a closed run acts no more, and a new run
// under its ID is exactly the run that must not act.

// openRunOf returns the run ID of id's open run when it is a workflowType
// run on Remedy's task queue and, when parent is set, a child of that run;
// "" when there is no such run (yet).
func openRunOf(ctx context.Context, tc client.Client, id, workflowType string, parent *commonpb.WorkflowExecution) (string, error) {
	return runs.Open(ctx, tc, id, workflowType, workflows.TaskQueue, parent)
}

// needsRun says whether an object's run is started but not recorded.
func needsRun(workflowID, runID string, phase v1alpha1.Phase) bool {
	return workflowID != "" && runID == "" && !phase.Terminal()
}

// executionRunID finds the run to record for an execution (needsRun): for a
// step, the child its request's recorded run started.
func (r *ExecutionReconciler) executionRunID(ctx context.Context, kexec *v1alpha1.KubernetesExecution, id string) (string, error) {
	var parent *commonpb.WorkflowExecution
	if isStep(kexec) {
		var rr v1alpha1.RemediationRequest
		err := r.Get(ctx, ctrlclient.ObjectKey{Namespace: kexec.Namespace, Name: kexec.Spec.RemediationRequestRef.Name}, &rr)
		if err != nil {
			return "", ctrlclient.IgnoreNotFound(err)
		}
		if owner := metav1.GetControllerOf(kexec); owner == nil || rr.UID != owner.UID || rr.Status.RunID == "" {
			return "", nil
		}
		parent = &commonpb.WorkflowExecution{WorkflowId: rr.Status.WorkflowID, RunId: rr.Status.RunID}
	}
	return openRunOf(ctx, r.Temporal, id, "ExecutionWorkflow", parent)
}

// recordExecutionRun backfills the run of an execution that needs one
// (needsRun); recorded says the status was written, and the reconcile
// starts over from the new object.
func (r *ExecutionReconciler) recordExecutionRun(ctx context.Context, kexec *v1alpha1.KubernetesExecution, id string) (recorded bool, err error) {
	runID, err := r.executionRunID(ctx, kexec, id)
	if err != nil || runID == "" {
		return false, err
	}
	kexec.Status.RunID = runID
	if err := r.Status().Update(ctx, kexec); err != nil {
		return false, fmt.Errorf("record run %s of %s: %w", runID, id, err)
	}
	if kexec.Status.RunID != runID {
		return false, errors.New("status.runID was not stored: the KubernetesExecution CRD predates v0.2; apply this release's deploy/crd")
	}
	log.FromContext(ctx).Info("workflow run recorded", "workflowID", id, "runID", runID)
	return true, nil
}

// recordRemediationRun is recordExecutionRun for a RemediationRequest
// started before v0.2.
func (r *RemediationReconciler) recordRemediationRun(ctx context.Context, rr *v1alpha1.RemediationRequest, id string) (recorded bool, err error) {
	runID, err := openRunOf(ctx, r.Temporal, id, "RemediationWorkflow", nil)
	if err != nil || runID == "" {
		return false, err
	}
	rr.Status.RunID = runID
	if err := r.Status().Update(ctx, rr); err != nil {
		return false, fmt.Errorf("record run %s of %s: %w", runID, id, err)
	}
	if rr.Status.RunID != runID {
		return false, errors.New("status.runID was not stored: the RemediationRequest CRD predates v0.2; apply this release's deploy/crd")
	}
	log.FromContext(ctx).Info("workflow run recorded", "workflowID", id, "runID", runID)
	return true, nil
}
