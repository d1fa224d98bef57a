package alerts

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/remedy-dev/remedy/api/v1alpha1"
)

// A rule is Ready from its own check as soon as it is created, and again
// for each spec change, without any alert.
func TestRuleIsReadyBeforeAnyAlert(t *testing.T) {
	ns := tenant(t, "web")
	rule := createRule(t, restartRule(ns, "ready", "NeverFires"))
	readyAt := func(gen int64, status, reason string) *v1alpha1.RemediationRule {
		t.Helper()
		return ruleStatus(t, rule, 30*time.Second, func(r *v1alpha1.RemediationRule) bool {
			c := meta.FindStatusCondition(r.Status.Conditions, v1alpha1.ConditionReady)
			return r.Status.ObservedGeneration == gen && c != nil && c.ObservedGeneration == gen && string(c.Status) == status && c.Reason == reason
		})
	}
	got := readyAt(rule.Generation, "True", v1alpha1.ReasonRuleValid)
	assert.Contains(t, meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReady).Message, alertAuthor)
	assert.Zero(t, got.Status.Matches, "no alert came")

	got.Spec.Suspend = true
	require.NoError(t, impersonating(t, alertAuthor).Update(context.Background(), got))
	got = readyAt(got.Generation, "False", v1alpha1.ReasonRuleSuspended)

	got.Spec.Suspend = false
	got.Spec.DryRun = true
	require.NoError(t, impersonating(t, alertAuthor).Update(context.Background(), got))
	got = readyAt(got.Generation, "True", v1alpha1.ReasonRuleValid)
	assert.Contains(t, meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReady).Message, "shadow mode")
}
