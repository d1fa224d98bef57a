package alerts

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
	"github.com/remedy-dev/remedy/internal/alertmanager"
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
	a := &Alerts{Alertmanager: &alertmanager.Client{URL: am.URL}}

	g := a.gated(context.Background(), "demo", spec)
	assert.Equal(t, v1alpha1.ReasonGatedByAlert, g.Reason)
	assert.Contains(t, g.Message, "ClusterDegraded (abc)")
	assert.Equal(t, []string{`alertname="ClusterDegraded"`, `severity=~"crit|page"`}, filters, "Alertmanager filters")

	firing = false
	assert.Equal(t, AlertGates{}, a.gated(context.Background(), "demo", spec))

	am.Close()
	g = a.gated(context.Background(), "demo", spec)
	assert.Equal(t, v1alpha1.ReasonGateUnknown, g.Reason)
	assert.Contains(t, g.Message, "Alertmanager cannot be read")

	g = (&Alerts{}).gated(context.Background(), "demo", spec)
	assert.Equal(t, v1alpha1.ReasonGateUnknown, g.Reason)
	assert.Contains(t, g.Message, "--alertmanager-url")
}

// The gate reads every namespace's alerts, but the rule's status names
// only an alert of the rule's own namespace or a cluster-wide one (no
// namespace label): another tenant's alert holds the run unnamed.
func TestGateNamesOnlyAlertsOfItsOwnNamespace(t *testing.T) {
	var firing []map[string]any
	am := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(firing)
	}))
	defer am.Close()
	alert := func(fp string, labels map[string]string) map[string]any {
		return map[string]any{"fingerprint": fp, "labels": labels, "status": map[string]string{"state": "active"}}
	}
	theirs := alert("f0e1", map[string]string{"alertname": "TheirSecretOutage", "namespace": "theirs"})
	mine := alert("a1b2", map[string]string{"alertname": "MyDegraded", "namespace": "demo"})
	cluster := alert("c3d4", map[string]string{"alertname": "ClusterDegraded"})
	spec := &v1alpha1.RemediationRuleSpec{BlockWhileFiring: []string{`severity="page"`}}
	a := &Alerts{Alertmanager: &alertmanager.Client{URL: am.URL}}
	for _, tc := range []struct {
		name   string
		firing []map[string]any
		want   string
	}{
		{"another namespace's alert only", []map[string]any{theirs}, "an alert of another namespace fires"},
		{"another namespace's alert, then one of its own", []map[string]any{theirs, mine}, "alert MyDegraded (a1b2) fires"},
		{"another namespace's alert, then a cluster-wide one", []map[string]any{theirs, cluster}, "alert ClusterDegraded (c3d4) fires"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			firing = tc.firing
			g := a.gated(context.Background(), "demo", spec)
			assert.Equal(t, v1alpha1.ReasonGatedByAlert, g.Reason, "held all the same")
			assert.Contains(t, g.Message, tc.want)
			assert.NotContains(t, g.Message, "TheirSecretOutage")
			assert.NotContains(t, g.Message, "f0e1")
			assert.NotContains(t, g.Message, "theirs")
		})
	}
}

func TestFrozenSaysUntilWhen(t *testing.T) {
	f := &v1alpha1.FreezeSpec{TimeIntervals: []v1alpha1.TimeInterval{{Times: []v1alpha1.TimeRange{{StartTime: "10:00", EndTime: "10:30"}}}}}
	g, err := frozen(f, time.Date(2026, 11, 26, 10, 12, 7, 0, time.UTC))
	require.NoError(t, err)
	assert.Equal(t, v1alpha1.ReasonFrozen, g.Reason)
	require.NotNil(t, g.Until)
	assert.Equal(t, time.Date(2026, 11, 26, 10, 30, 0, 0, time.UTC), *g.Until)
	g, err = frozen(f, time.Date(2026, 11, 26, 10, 30, 0, 0, time.UTC))
	require.NoError(t, err)
	assert.Empty(t, g.Reason)
}
