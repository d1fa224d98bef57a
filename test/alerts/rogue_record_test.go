package alerts

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/activities/alerts"
	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/alertmanager"
	"github.com/remedy-dev/remedy/test/harness"
)

// TestRogueRunWritesNoRuleStatus: a workflow of the attacker's, on its own
// task queue, asks Remedy's worker to record on a rule what it likes (a
// refusal tripping the circuit breaker and putting the rule into storm
// mode), and replays the finished alert run's own record, from a workflow
// of its own and from a new run under the alert's closed workflow ID.
// Neither is the alert's open run: each is refused for good, and the
// rule's status is what the genuine run left.
func TestRogueRunWritesNoRuleStatus(t *testing.T) {
	ctx := context.Background()
	ns := tenant(t, "web")
	rule := createRule(t, restartRule(ns, "rogue-record", "RogueRecord"))
	l := labels(ns, "RogueRecord", "deployment", "web")
	fp := alertmanager.Fingerprint(l)
	id := v1alpha1.AlertWorkflowID(ns, rule.Name, fp)
	fire(t, l)
	rule = ruleStatus(t, rule, 60*time.Second, func(r *v1alpha1.RemediationRule) bool {
		rec := record(r, fp)
		return rec != nil && rec.Phase == v1alpha1.AlertDone
	})
	resolve(t, l)
	harness.WaitClosed(t, id, 60*time.Second)
	d, err := harness.Temporal().DescribeWorkflowExecution(ctx, id, "")
	require.NoError(t, err)
	replayed := harness.ScheduledInput(t, id, d.GetWorkflowExecutionInfo().GetExecution().GetRunId(), "RecordAlert")
	require.NoError(t, harness.Kube().Get(ctx, ctrlclient.ObjectKeyFromObject(rule), rule))
	before := rule.Status.DeepCopy()

	storm := time.Now().Add(time.Hour)
	forged := alerts.AlertRecordInput{Namespace: ns, Rule: rule.Name, RuleUID: string(rule.UID), Matched: true,
		Guard: "CircuitOpen", StormUntil: &storm,
		Record: v1alpha1.AlertRecord{Fingerprint: fp, AlertName: "RogueRecord", Phase: v1alpha1.AlertRefused, Reason: "CircuitOpen", Message: "forged"}}
	queue := "rogue-" + ns
	harness.StartRogue(t, queue)
	for name, wid := range map[string]string{
		"a workflow of its own":                 "rogue/" + ns,
		"a new run under the alert's closed ID": id,
	} {
		t.Run(name, func(t *testing.T) {
			out := harness.RunRogue(t, queue, wid,
				harness.RogueCall{Activity: "RecordAlert", Arg: forged},
				harness.RogueCall{Activity: "RecordAlert", Raw: replayed})
			for i, o := range out {
				assert.Equal(t, v1alpha1.ReasonSubjectMismatch, o.Type, "call %d: %s", i, o.Message)
				assert.True(t, o.NonRetryable, "call %d is refused for good", i)
			}
			var now v1alpha1.RemediationRule
			require.NoError(t, harness.Kube().Get(ctx, ctrlclient.ObjectKeyFromObject(rule), &now))
			assert.Equal(t, before.Matches, now.Status.Matches, "no match counted")
			assert.Nil(t, now.Status.StormUntil, "no storm mode")
			assert.Nil(t, meta.FindStatusCondition(now.Status.Conditions, "CircuitOpen"), "no breaker tripped")
			assert.True(t, equality.Semantic.DeepEqual(before.LastRefusal, now.Status.LastRefusal), "no refusal recorded")
			assert.True(t, equality.Semantic.DeepEqual(before.Alerts, now.Status.Alerts), "the alert's record is the run's own: %+v", now.Status.Alerts)
		})
	}
}
