package alerts

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/alertmanager"
	"github.com/remedy-dev/remedy/test/harness"
)

// Alertmanager's own API admits only its basic-auth users: an alert posted
// without credentials, or with a wrong password, is refused 401 and never
// held, so it starts nothing; the same alert group's authenticated alert
// is delivered and its run completes. Reading the API needs credentials too.
func TestUnauthenticatedAlertmanagerPostStartsNothing(t *testing.T) {
	ns := tenant(t, "web", "admin")
	rule := createRule(t, restartRule(ns, "amauth", "AMAuth"))
	am := harness.Alertmanager()
	forged := labels(ns, "AMAuth", "deployment", "admin")
	body, err := json.Marshal([]amAlert{{Labels: forged, StartsAt: time.Now().Add(-time.Second), EndsAt: time.Now().Add(time.Hour)}})
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		auth func(*http.Request)
	}{
		{"no credentials", func(*http.Request) {}},
		{"wrong password", func(r *http.Request) { r.SetBasicAuth("remedy", "not-the-password") }},
		{"another user", func(r *http.Request) { r.SetBasicAuth("admin", am.Password) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodPost, am.URL+"/api/v2/alerts", bytes.NewReader(body))
			require.NoError(t, err)
			req.Header.Set("Content-Type", "application/json")
			tc.auth(req)
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			resp.Body.Close()
			assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
		})
	}
	resp, err := http.Get(am.URL + "/api/v2/alerts")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "reading needs credentials too")

	// Same alertname and namespace: one group, so a notification carrying
	// the authenticated alert would carry the forged one, had it been held.
	real := labels(ns, "AMAuth", "deployment", "web")
	fire(t, real)
	fp := alertmanager.Fingerprint(real)
	done := ruleStatus(t, rule, 60*time.Second, func(r *v1alpha1.RemediationRule) bool {
		rec := record(r, fp)
		return rec != nil && rec.Phase == v1alpha1.AlertDone
	})
	assert.Nil(t, record(done, alertmanager.Fingerprint(forged)), "the forged alert never reached the rule")
	assert.Equal(t, int64(1), done.Status.Matches)
	held, err := (&alertmanager.Client{URL: am.URL, Client: am.Client()}).Active(context.Background(), ns)
	require.NoError(t, err)
	require.Len(t, held, 1, "Alertmanager holds only the authenticated alert")
	assert.Equal(t, fp, held[0].Fingerprint)
	_, err = harness.Temporal().DescribeWorkflowExecution(context.Background(), v1alpha1.AlertWorkflowID(ns, rule.Name, alertmanager.Fingerprint(forged)), "")
	var nf *serviceerror.NotFound
	assert.ErrorAs(t, err, &nf, "no run for the forged alert")
	assert.Len(t, requestsOf(t, ns, rule.Name), 1)
	resolve(t, real)
	harness.WaitClosed(t, v1alpha1.AlertWorkflowID(ns, rule.Name, fp), 60*time.Second)
}

// A notification posted straight to the receiver without its credentials
// is refused 401 and starts no run, though its alert matches a rule.
func TestUnauthenticatedNotificationToTheReceiverStartsNothing(t *testing.T) {
	ns := tenant(t, "web")
	rule := createRule(t, restartRule(ns, "direct", "Direct"))
	l := labels(ns, "Direct", "deployment", "web")
	for _, token := range []string{"", "not-the-token"} {
		assert.Equal(t, http.StatusUnauthorized, notify(t, token, message("firing", time.Now(), l)))
	}
	// The receiver answers only once it handed every alert to Temporal.
	_, err := harness.Temporal().DescribeWorkflowExecution(context.Background(), v1alpha1.AlertWorkflowID(ns, rule.Name, alertmanager.Fingerprint(l)), "")
	var nf *serviceerror.NotFound
	assert.ErrorAs(t, err, &nf, "no run started")
	got := ruleStatus(t, rule, time.Second, func(*v1alpha1.RemediationRule) bool { return true })
	assert.Zero(t, got.Status.Matches)
}
