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
	var out []ActiveAlert
	if err := a.get(req, "list alertmanager alerts", &out); err != nil {
		return nil, err
	}
	return out, nil
}

// Started is when Alertmanager started (its status's uptime). It holds no
// alerts across a restart: until its senders have sent them again, an
// alert missing from its list may still fire.
func (a *Alertmanager) Started(ctx context.Context) (time.Time, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(a.URL, "/")+"/api/v2/status", nil)
	if err != nil {
		return time.Time{}, fmt.Errorf("build alertmanager request: %w", err)
	}
	var st struct {
		Uptime time.Time `json:"uptime"`
	}
	if err := a.get(req, "read alertmanager status", &st); err != nil {
		return time.Time{}, err
	}
	return st.Uptime, nil
}

// get sends req and decodes its JSON answer into out.
func (a *Alertmanager) get(req *http.Request, what string, out any) error {
	c := a.Client
	if c == nil {
		c = &http.Client{Timeout: 10 * time.Second}
	}
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("%s: %s: %s", what, resp.Status, b)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(out); err != nil {
		return fmt.Errorf("%s: decode: %w", what, err)
	}
	return nil
}

// Fingerprint is Alertmanager's fingerprint of a label set.
func Fingerprint(labels map[string]string) string {
	set := make(model.LabelSet, len(labels))
	for k, v := range labels {
		set[model.LabelName(k)] = model.LabelValue(v)
	}
	return set.Fingerprint().String()
}
