package alerts

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/remedy-dev/remedy/alerts"
	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/alertmanager"
	"github.com/remedy-dev/remedy/test/harness"
)

// notify posts a webhook notification straight to the receiver, as a
// second Alertmanager replica (or a replay) would, with token as bearer.
func notify(t testing.TB, token string, msg alerts.Message) int {
	t.Helper()
	body, err := json.Marshal(msg)
	require.NoError(t, err)
	return notifyRaw(t, token, body)
}

func notifyRaw(t testing.TB, token string, body []byte) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, harness.AlertsURL(), bytes.NewReader(body))
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	return resp.StatusCode
}

// message is a version 4 notification of firing alerts with these labels.
func message(status string, startsAt time.Time, ls ...map[string]string) alerts.Message {
	m := alerts.Message{Version: "4", GroupKey: "{}:{alertname=\"replay\"}", Status: status, Receiver: "remedy"}
	for _, l := range ls {
		m.Alerts = append(m.Alerts, alerts.Alert{Status: status, Labels: l, StartsAt: startsAt, Fingerprint: alertmanager.Fingerprint(l)})
	}
	return m
}

// The same alert posted 5 times to Alertmanager, then its notification
// replayed 3 times as a second replica would send it, makes one run.
func TestSameAlertFiveTimesAndReplayedIsOneRun(t *testing.T) {
	ns := tenant(t, "web")
	rule := createRule(t, restartRule(ns, "dedup", "Dup"))
	l := labels(ns, "Dup", "deployment", "web")
	for range 5 {
		fire(t, l)
	}
	fp := alertmanager.Fingerprint(l)
	ruleStatus(t, rule, 60*time.Second, func(r *v1alpha1.RemediationRule) bool {
		rec := record(r, fp)
		return rec != nil && rec.Phase == v1alpha1.AlertDone
	})
	for range 3 {
		assert.Equal(t, http.StatusOK, notify(t, harness.AlertsToken(), message("firing", time.Now().Add(-time.Minute), l)))
	}
	// Each replay was answered at once or signalled; the run has handled them all.
	harness.WaitQuiet(t, v1alpha1.AlertWorkflowID(ns, rule.Name, fp), 30*time.Second)
	r := ruleStatus(t, rule, time.Second, func(*v1alpha1.RemediationRule) bool { return true })
	assert.Equal(t, int64(1), r.Status.Matches)
	assert.Equal(t, int64(1), r.Status.RunsStarted)
	assert.Len(t, requestsOf(t, ns, rule.Name), 1)
}

// Three alerts Alertmanager groups into one notification make three runs.
func TestGroupOfThreeIsThreeRuns(t *testing.T) {
	ns := tenant(t, "a", "b", "c")
	rule := createRule(t, restartRule(ns, "group", "Grouped"))
	var batch []amAlert
	for _, d := range []string{"a", "b", "c"} {
		batch = append(batch, amAlert{Labels: labels(ns, "Grouped", "deployment", d), StartsAt: time.Now(), EndsAt: time.Now().Add(time.Hour)})
	}
	post(t, batch...)
	r := ruleStatus(t, rule, 90*time.Second, func(r *v1alpha1.RemediationRule) bool {
		done := 0
		for _, a := range r.Status.Alerts {
			if a.Phase == v1alpha1.AlertDone {
				done++
			}
		}
		return done == 3
	})
	assert.Equal(t, int64(3), r.Status.RunsStarted)
	targets := map[string]bool{}
	for _, rr := range requestsOf(t, ns, rule.Name) {
		targets[rr.Spec.Steps[0].Execution.Target.Name] = true
	}
	assert.Equal(t, map[string]bool{"a": true, "b": true, "c": true}, targets)
}
