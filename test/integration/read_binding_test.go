package integration

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/ptr"

	"github.com/remedy-dev/remedy/activities/gate"
	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/actions"
	"github.com/remedy-dev/remedy/test/harness"
)

// TestRogueWorkflowReadsNothingForAPerson: a rogue workflow, on its own task
// queue, asks Remedy's worker to read for a person: inspect an execution's
// target, dry-run its write and evaluate a condition on it, as its requester,
// with its action and target. From a workflow of its own (while the
// execution waits for approval) and from a new run under a finished
// execution's workflow ID, every read is refused, non-retryable
// SubjectMismatch, before anything is read: the worker makes no request to
// the target or its pods. The executions' own runs read their targets, dry-run
// and evaluate their conditions as before.
func TestRogueWorkflowReadsNothingForAPerson(t *testing.T) {
	ns := harness.Namespace(t)
	held, _ := awaitingApproval(t, ns, "held", 10*time.Minute, 0)
	require.NotEmpty(t, held.Status.RunID)
	assert.Equal(t, ptr.To(true), held.Status.ValidationResults.ResourceExists, "the held run read its own target")

	// The positive path: a run of its own inspects, evaluates its precondition and dry-runs.
	harness.Deployment(t, ns, "api", 1)
	spec := scaleSpec(ns, "api", 2)
	spec.DryRun = true
	spec.PreConditions = []v1alpha1.Condition{{Name: "up", Rego: "package up\npass := true", Required: true}}
	done := waitPhase(t, createExecution(t, ns, "done", spec), v1alpha1.PhaseCompleted)
	vr := done.Status.ValidationResults
	require.Len(t, vr.PreConditionResults, 1)
	assert.True(t, vr.PreConditionResults[0].Passed, vr.PreConditionResults[0].Message)
	require.NotNil(t, vr.DryRunResults)
	assert.True(t, vr.DryRunResults.Success, vr.DryRunResults.Warnings)
	assert.Equal(t, int32(2), replicasOf(t, ns, "api"))

	queue := "rogue-" + ns
	harness.StartRogue(t, queue)
	for name, tc := range map[string]struct {
		id string
		k  *v1alpha1.KubernetesExecution
	}{
		"a workflow of its own, for a waiting execution": {"rogue/" + ns, held},
		"a new run under a finished execution's own ID":  {done.Status.WorkflowID, done},
	} {
		t.Run(name, func(t *testing.T) {
			req := actions.Request{Action: tc.k.Spec.Action, Target: tc.k.Spec.Target, Params: *tc.k.Spec.Parameters, Requester: tc.k.Spec.Requester}
			cond := gate.ConditionRequest{Target: tc.k.Spec.Target, Requester: tc.k.Spec.Requester,
				Condition: v1alpha1.Condition{Name: "echo", Required: true, Timeout: v1alpha1.DurationOf(2 * time.Second),
					Rego: "package pre.echo\n\npass := true\n\nmessage := json.marshal(input)\n"}}
			before := harness.APIRequests()
			out := harness.RunRogue(t, queue, tc.id,
				harness.RogueCall{Activity: "InspectTarget", Arg: req},
				harness.RogueCall{Activity: "DryRun", Arg: req},
				harness.RogueCall{Activity: "EvaluateCondition", Arg: cond})
			after := harness.APIRequests()
			for i, o := range out {
				assert.Equal(t, v1alpha1.ReasonSubjectMismatch, o.Type, "call %d: %s", i, o.Message)
				assert.True(t, o.NonRetryable, "call %d is refused for good: %s", i, o.Message)
			}
			for _, read := range []string{"get deployments", "patch deployments", "list pods"} {
				assert.Equal(t, before[read], after[read], "%s: the worker read nothing for the rogue", read)
			}
		})
	}
}
