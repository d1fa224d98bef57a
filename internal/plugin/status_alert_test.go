package plugin

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestAlertLabelsAreShownAsAlertmanagerDoes(t *testing.T) {
	assert.Equal(t, `{alertname="DemoHighLatency", deployment="web", namespace="demo"}`,
		alertLabels(map[string]string{"namespace": "demo", "alertname": "DemoHighLatency", "deployment": "web"}))
}
