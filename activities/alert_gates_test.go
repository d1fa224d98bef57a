package activities

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/remedy-dev/remedy/api/v1alpha1"
)

// The health gate fails closed: an Alertmanager that cannot be read, or
// none at all, holds the run with its own reason.
func TestGateHoldsWhileAMatchingAlertFiresAndWhenAlertmanagerIsUnreadable(t *testing.T) {
	var filters []string
	firing := true
	am := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		filters = r.URL.Query()["filter"]
		out := []map[string]any{}
		if firing {
			out = append(out, map[string]any{"fingerprint": "abc", "labels": map[string]string{"alertname": "ClusterDegraded"}, "status": map[string]string{"state": "active"}})
		}
		_ = json.NewEncoder(w).Encode(out)
	}))
	defer am.Close()
	spec := &v1alpha1.RemediationRuleSpec{BlockWhileFiring: []string{`{alertname="ClusterDegraded",severity=~"crit|page"}`}}
	a := &Alerts{Alertmanager: &Alertmanager{URL: am.URL}}

	g := a.gated(context.Background(), spec)
	assert.Equal(t, ReasonGatedByAlert, g.Reason)
	assert.Contains(t, g.Message, "ClusterDegraded (abc)")
	assert.Equal(t, []string{`alertname="ClusterDegraded"`, `severity=~"crit|page"`}, filters, "Alertmanager filters")

	firing = false
	assert.Equal(t, AlertGates{}, a.gated(context.Background(), spec))

	am.Close()
	g = a.gated(context.Background(), spec)
	assert.Equal(t, ReasonGateUnknown, g.Reason)
	assert.Contains(t, g.Message, "Alertmanager cannot be read")

	g = (&Alerts{}).gated(context.Background(), spec)
	assert.Equal(t, ReasonGateUnknown, g.Reason)
	assert.Contains(t, g.Message, "--alertmanager-url")
}

func TestFrozenSaysUntilWhen(t *testing.T) {
	f := &v1alpha1.FreezeSpec{TimeIntervals: []v1alpha1.TimeInterval{{Times: []v1alpha1.TimeRange{{StartTime: "10:00", EndTime: "10:30"}}}}}
	g, err := frozen(f, time.Date(2026, 11, 26, 10, 12, 7, 0, time.UTC))
	require.NoError(t, err)
	assert.Equal(t, ReasonFrozen, g.Reason)
	require.NotNil(t, g.Until)
	assert.Equal(t, time.Date(2026, 11, 26, 10, 30, 0, 0, time.UTC), *g.Until)
	g, err = frozen(f, time.Date(2026, 11, 26, 10, 30, 0, 0, time.UTC))
	require.NoError(t, err)
	assert.Empty(t, g.Reason)
}
