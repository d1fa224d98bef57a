package alerts

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/remedy-dev/remedy/test/harness"
)

// An alert posted without endsAt, as `amtool alert add` without --end posts
// it, is held firing for the configured resolve_timeout (24h), not
// Alertmanager's default 5m: docs/alerts.md says the run stays open until
// the alert is resolved.
func TestAlertWithoutAnEndFiresUntilResolved(t *testing.T) {
	am := harness.Alertmanager()
	body, err := json.Marshal([]map[string]any{{"labels": map[string]string{"alertname": "NoEnd", "namespace": "nowhere"}}})
	require.NoError(t, err)
	resp, err := am.Client().Post(am.URL+"/api/v2/alerts", "application/json", bytes.NewReader(body))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	resp, err = am.Client().Get(am.URL + "/api/v2/alerts?filter=" + url.QueryEscape(`alertname="NoEnd"`))
	require.NoError(t, err)
	defer resp.Body.Close()
	var got []struct {
		EndsAt time.Time `json:"endsAt"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&got))
	require.Len(t, got, 1)
	require.WithinDuration(t, time.Now().Add(24*time.Hour), got[0].EndsAt, time.Hour, "held for resolve_timeout")
}
