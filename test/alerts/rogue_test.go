package alerts

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/alertmanager"
	"github.com/remedy-dev/remedy/test/harness"
)

// silencesFor lists the IDs of Alertmanager's silences whose comment names
// the alert workflow id (Remedy's comment names the workflow and its run).
func silencesFor(t *testing.T, id string) []string {
	t.Helper()
	var ids []string
	for _, s := range silencesNaming(t, id) {
		ids = append(ids, s.ID)
	}
	return ids
}

// TestRogueRunUnderAClosedAlertRunSilencesNothing: a workflow of the
// attacker's, on its own task queue, schedules the silence and the
// RemediationRequest of a finished alert run on Remedy's task queue, with
// the inputs copied byte for byte from that run's history, from a workflow
// of its own and from a new run under the alert's own (closed) workflow ID.
// Neither holds a permit of the namespace's guard: no silence is held and
// no request is created; nor does either expire a person's silence.
func TestRogueRunUnderAClosedAlertRunSilencesNothing(t *testing.T) {
	ctx := context.Background()
	ns := tenant(t, "web")
	r := restartRule(ns, "rogue", "RogueLatency")
	r.Spec.Silence = &v1alpha1.SilenceSpec{Enabled: true, Duration: v1alpha1.DurationOf(time.Minute)}
	rule := createRule(t, r)
	l := labels(ns, "RogueLatency", "deployment", "web")
	fp := alertmanager.Fingerprint(l)
	id := v1alpha1.AlertWorkflowID(ns, rule.Name, fp)
	fire(t, l)
	ruleStatus(t, rule, 60*time.Second, func(r *v1alpha1.RemediationRule) bool {
		rec := record(r, fp)
		return rec != nil && rec.Phase == v1alpha1.AlertDone
	})
	resolve(t, l)
	harness.WaitClosed(t, id, 60*time.Second)
	d, err := harness.Temporal().DescribeWorkflowExecution(ctx, id, "")
	require.NoError(t, err)
	runID := d.GetWorkflowExecutionInfo().GetExecution().GetRunId()
	hold := harness.ScheduledInput(t, id, runID, "HoldSilence")
	request := harness.ScheduledInput(t, id, runID, "CreateAlertRequest")

	silences := silencesFor(t, id)
	require.Len(t, silences, 1, "the run held its one silence")
	var requests v1alpha1.RemediationRequestList
	require.NoError(t, harness.Kube().List(ctx, &requests, ctrlclient.InNamespace(ns)))
	require.Len(t, requests.Items, 1, "the run made its one request")

	theirs := personSilence(t, l)
	queue := "rogue-" + ns
	harness.StartRogue(t, queue)
	for name, wid := range map[string]string{
		"a workflow of its own":                 "rogue/" + ns,
		"a new run under the alert's closed ID": id,
	} {
		t.Run(name, func(t *testing.T) {
			out := harness.RunRogue(t, queue, wid,
				harness.RogueCall{Activity: "HoldSilence", Raw: hold},
				harness.RogueCall{Activity: "CreateAlertRequest", Raw: request},
				harness.RogueCall{Activity: "EndSilence", Arg: theirs})
			for i, o := range out {
				assert.Equal(t, v1alpha1.ReasonSubjectMismatch, o.Type, "call %d: %s", i, o.Message)
			}
			assert.Equal(t, silences, silencesFor(t, id), "no silence held")
			assert.Equal(t, "active", silence(t, theirs).Status.State, "a person's silence is not expired")
			var now v1alpha1.RemediationRequestList
			require.NoError(t, harness.Kube().List(ctx, &now, ctrlclient.InNamespace(ns)))
			assert.Len(t, now.Items, 1, "no request created")
		})
	}
}
