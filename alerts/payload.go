// Package alerts is Remedy's Alertmanager webhook receiver, served by the
// worker (`remedy worker --alerts-addr`). It reads Alertmanager's webhook
// payload (version 4) whole, matches every alert against the
// RemediationRules of the alert's own namespace, and hands each match to
// Temporal as a signal-with-start of the alert's workflow. It answers 2xx
// only once every alert is durably in Temporal.
package alerts

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/remedy-dev/remedy/internal/alertmanager"
)

// Message is Alertmanager's webhook payload, version 4. Fields added by
// later Alertmanager versions are accepted and ignored.
type Message struct {
	Version           string            `json:"version"`
	GroupKey          string            `json:"groupKey"`
	TruncatedAlerts   int               `json:"truncatedAlerts"`
	Status            string            `json:"status"`
	Receiver          string            `json:"receiver"`
	GroupLabels       map[string]string `json:"groupLabels"`
	CommonLabels      map[string]string `json:"commonLabels"`
	CommonAnnotations map[string]string `json:"commonAnnotations"`
	ExternalURL       string            `json:"externalURL"`
	Alerts            []Alert           `json:"alerts"`
}

// Alert is one alert of a notification.
type Alert struct {
	Status       string            `json:"status"`
	Labels       map[string]string `json:"labels"`
	Annotations  map[string]string `json:"annotations"`
	StartsAt     time.Time         `json:"startsAt"`
	EndsAt       time.Time         `json:"endsAt"`
	GeneratorURL string            `json:"generatorURL"`
	Fingerprint  string            `json:"fingerprint"`
}

var fingerprintRE = regexp.MustCompile(`^[0-9a-f]{16}$`)

// maxAlertsPerMessage bounds one notification: Alertmanager's max_alerts
// truncates above it anyway, and the body cap bounds the bytes.
const maxAlertsPerMessage = 1000

// decode reads and checks a payload; every error is the sender's (4xx).
func decode(body []byte) (*Message, error) {
	var m Message
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, fmt.Errorf("decode payload: %w", err)
	}
	if m.Version != "4" {
		return nil, fmt.Errorf("payload version %q: only Alertmanager's version 4 is read", m.Version)
	}
	if len(m.Alerts) == 0 {
		return nil, errors.New("payload has no alerts")
	}
	if len(m.Alerts) > maxAlertsPerMessage {
		return nil, fmt.Errorf("payload has %d alerts, more than %d", len(m.Alerts), maxAlertsPerMessage)
	}
	for i, a := range m.Alerts {
		if a.Status != "firing" && a.Status != "resolved" {
			return nil, fmt.Errorf("alerts[%d]: status %q is neither firing nor resolved", i, a.Status)
		}
		if len(a.Labels) == 0 {
			return nil, fmt.Errorf("alerts[%d]: no labels", i)
		}
		if !fingerprintRE.MatchString(a.Fingerprint) {
			return nil, fmt.Errorf("alerts[%d]: fingerprint %q is not 16 hex digits", i, a.Fingerprint)
		}
		if fp := alertmanager.Fingerprint(a.Labels); fp != a.Fingerprint {
			return nil, fmt.Errorf("alerts[%d]: fingerprint %s is not the fingerprint %s of its labels", i, a.Fingerprint, fp)
		}
		if a.StartsAt.IsZero() {
			return nil, fmt.Errorf("alerts[%d]: no startsAt", i)
		}
	}
	return &m, nil
}
