package plugin

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/remedy-dev/remedy/api/v1alpha1"
)

func TestAlertLabelsAreShownAsAlertmanagerDoes(t *testing.T) {
	assert.Equal(t, `{alertname="DemoHighLatency", deployment="web", namespace="demo"}`,
		alertLabels(map[string]string{"namespace": "demo", "alertname": "DemoHighLatency", "deployment": "web"}))
}

func TestAlertRunOfFindsTheRunThatMadeTheRequest(t *testing.T) {
	rule := &v1alpha1.RemediationRule{Status: v1alpha1.RemediationRuleStatus{Alerts: []v1alpha1.AlertRecord{
		{Fingerprint: "a", Request: "other", Phase: v1alpha1.AlertDone},
		{Fingerprint: "b", Request: "mine", Phase: v1alpha1.AlertVerified, Reason: v1alpha1.ReasonVerified, Message: "resolved\nafter acting"},
	}}}
	rec := alertRunOf(rule, "mine")
	require.NotNil(t, rec)
	assert.Equal(t, "Verified: resolved after acting", alertRunText(rec))
	assert.Nil(t, alertRunOf(rule, "gone"))
}
