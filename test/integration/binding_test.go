package integration

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/utils/ptr"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/activities/approval"
	"github.com/remedy-dev/remedy/activities/gate"
	"github.com/remedy-dev/remedy/activities/status"
	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/seal"
	"github.com/remedy-dev/remedy/test/harness"
)

// TestRogueWorkflowReplayingAFinishedRunWritesNothing is the rogue-worker
// attack on a finished KubernetesExecution: a workflow of the attacker's,
// on its own task queue, schedules Remedy's activities on Remedy's task
// queue. It pushes a status that offers a rollback of its choosing, then
// asks for that "rollback" through the inline execution, with the write
// copied byte for byte from the finished run's history. From a workflow
// of its own, and from a new run under the finished run's own workflow ID,
// nothing is written: the status and the Deployment stay as the run left
// them.
func TestRogueWorkflowReplayingAFinishedRunWritesNothing(t *testing.T) {
	ctx := context.Background()
	ns := harness.Namespace(t)
	harness.Deployment(t, ns, "web", 1)
	k := waitPhase(t, createExecution(t, ns, "scale", scaleSpec(ns, "web", 2)), v1alpha1.PhaseCompleted)
	require.NotEmpty(t, k.Status.RunID, "the operator recorded the run it started")
	d, err := harness.Temporal().DescribeWorkflowExecution(ctx, k.Status.WorkflowID, "")
	require.NoError(t, err)
	assert.Equal(t, d.GetWorkflowExecutionInfo().GetExecution().GetRunId(), k.Status.RunID, "the recorded run is the one that ran")
	require.Equal(t, int32(2), replicasOf(t, ns, "web"))
	var dep appsv1.Deployment
	require.NoError(t, harness.Kube().Get(ctx, ctrlclient.ObjectKey{Namespace: ns, Name: "web"}, &dep))
	generation := dep.Generation

	// The write the run made, as its history holds it.
	write := harness.ScheduledInput(t, k.Status.WorkflowID, k.Status.RunID, "ExecuteInline")
	var w gate.Write
	require.NoError(t, seal.DataConverter(harness.Keys()).FromPayload(write, &w))
	require.Equal(t, string(k.UID), w.Subject.UID)

	// The forged status: not finished, offering a "rollback" to 7 replicas.
	forged := *k.Status.DeepCopy()
	forged.Sequence += 10
	forged.Phase, forged.Reason, forged.Message = v1alpha1.PhaseRollbackReady, v1alpha1.ReasonRollbackAvailable, "forged"
	forged.RollbackInformation = &v1alpha1.RollbackInformation{Available: true, RollbackAction: "scale",
		RollbackParameters: &v1alpha1.ActionParameters{Replicas: ptr.To[int32](7)}}
	push := status.ExecutionStatusPush{Namespace: ns, Name: k.Name, UID: string(k.UID), Action: "scale", Status: forged}
	rollback := w
	rollback.Request.Params = v1alpha1.ActionParameters{Replicas: ptr.To[int32](7)}

	queue := "rogue-" + ns
	harness.StartRogue(t, queue)
	for name, id := range map[string]string{
		"a workflow of its own":                     "rogue/" + ns,
		"a new run under the finished run's own ID": k.Status.WorkflowID,
	} {
		t.Run(name, func(t *testing.T) {
			out := harness.RunRogue(t, queue, id,
				harness.RogueCall{Activity: "PushExecutionStatus", Arg: push},
				harness.RogueCall{Activity: "ExecuteInline", Raw: write},
				harness.RogueCall{Activity: "ExecuteInline", Arg: rollback})
			for i, o := range out {
				assert.Equal(t, v1alpha1.ReasonSubjectMismatch, o.Type, "call %d: %s", i, o.Message)
			}
			var now v1alpha1.KubernetesExecution
			require.NoError(t, harness.Kube().Get(ctx, ctrlclient.ObjectKeyFromObject(k), &now))
			assert.True(t, equality.Semantic.DeepEqual(k.Status, now.Status), "the status is the run's own: %+v", now.Status)
			require.NoError(t, harness.Kube().Get(ctx, ctrlclient.ObjectKey{Namespace: ns, Name: "web"}, &dep))
			assert.Equal(t, int32(2), *dep.Spec.Replicas, "nothing was scaled")
			assert.Equal(t, generation, dep.Generation, "nothing was written to the Deployment")
		})
	}
}

// TestRogueWorkflowCannotDecideAnApproval: a decision recorded on a waiting
// approval request from any run but the execution's own is refused, and the
// run still waits for a person.
func TestRogueWorkflowCannotDecideAnApproval(t *testing.T) {
	ctx := context.Background()
	ns := harness.Namespace(t)
	k, rar := awaitingApproval(t, ns, "held", 10*time.Minute, 0)
	require.NotEmpty(t, k.Status.RunID)
	decision := approval.DecisionInput{Namespace: ns, Name: rar.Name, WorkflowID: k.Status.WorkflowID,
		Decision: gate.Decision{Decision: v1alpha1.DecisionApproved, DecidedBy: "mallory", Via: v1alpha1.DecidedViaSignal, At: time.Now()}}
	queue := "rogue-" + ns
	harness.StartRogue(t, queue)
	out := harness.RunRogue(t, queue, "rogue/"+ns, harness.RogueCall{Activity: "RecordDecision", Arg: decision})
	assert.Equal(t, v1alpha1.ReasonSubjectMismatch, out[0].Type, out[0].Message)
	require.NoError(t, harness.Kube().Get(ctx, ctrlclient.ObjectKeyFromObject(rar), rar))
	assert.Empty(t, rar.Status.Decision, "no decision recorded")
	require.NoError(t, harness.Kube().Get(ctx, ctrlclient.ObjectKeyFromObject(k), k))
	assert.Equal(t, v1alpha1.PhaseWaitingApproval, k.Status.Phase)
}
