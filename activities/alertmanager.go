package activities

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/prometheus/common/model"
)

// Alertmanager reads active alerts from Alertmanager's API v2. The URL comes
// from the worker's configuration only, never from a workflow's input.
type Alertmanager struct {
	URL    string
	Client *http.Client
}

// ActiveAlert is one alert Alertmanager holds as firing.
type ActiveAlert struct {
	Fingerprint  string            `json:"fingerprint"`
	Labels       map[string]string `json:"labels"`
	Annotations  map[string]string `json:"annotations"`
	StartsAt     time.Time         `json:"startsAt"`
	EndsAt       time.Time         `json:"endsAt"`
	GeneratorURL string            `json:"generatorURL"`
	Status       struct {
		State string `json:"state"`
	} `json:"status"`
}

// Active lists the alerts Alertmanager holds whose namespace label is
// namespace, or all of them for "" (silenced and inhibited ones included:
// they still fire).
func (a *Alertmanager) Active(ctx context.Context, namespace string) ([]ActiveAlert, error) {
	q := url.Values{"active": {"true"}, "silenced": {"true"}, "inhibited": {"true"}, "unprocessed": {"true"}}
	if namespace != "" {
		q.Set("filter", fmt.Sprintf("namespace=%q", namespace))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(a.URL, "/")+"/api/v2/alerts?"+q.Encode(), nil)
	if err != nil {
		return nil, fmt.Errorf("build alertmanager request: %w", err)
	}
	c := a.Client
	if c == nil {
		c = &http.Client{Timeout: 10 * time.Second}
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("list alertmanager alerts: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, fmt.Errorf("list alertmanager alerts: %s: %s", resp.Status, b)
	}
	var out []ActiveAlert
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(&out); err != nil {
		return nil, fmt.Errorf("decode alertmanager alerts: %w", err)
	}
	return out, nil
}

// Fingerprint is Alertmanager's fingerprint of a label set.
func Fingerprint(labels map[string]string) string {
	set := make(model.LabelSet, len(labels))
	for k, v := range labels {
		set[model.LabelName(k)] = model.LabelValue(v)
	}
	return set.Fingerprint().String()
}
