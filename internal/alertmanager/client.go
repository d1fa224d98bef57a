package alertmanager

import (
	"bytes"
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

// Client reads active alerts from Alertmanager's API v2. The URL comes
// from the worker's configuration only, never from a workflow's input.
type Client struct {
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
func (a *Client) Active(ctx context.Context, namespace string) ([]ActiveAlert, error) {
	var filter []string
	if namespace != "" {
		filter = []string{fmt.Sprintf("namespace=%q", namespace)}
	}
	return a.Matching(ctx, filter)
}

// Matching lists the firing alerts (silenced and inhibited ones included)
// that satisfy every matcher of filter, in Alertmanager's syntax.
func (a *Client) Matching(ctx context.Context, filter []string) ([]ActiveAlert, error) {
	q := url.Values{"active": {"true"}, "silenced": {"true"}, "inhibited": {"true"}, "unprocessed": {"true"}, "filter": filter}
	var out []ActiveAlert
	if err := a.Call(ctx, http.MethodGet, "/api/v2/alerts?"+q.Encode(), nil, &out); err != nil {
		return nil, fmt.Errorf("list alertmanager alerts: %w", err)
	}
	return out, nil
}

// RestartGrace is how long after Alertmanager starts its list may still
// lack firing alerts: it keeps none across a restart, and Prometheus sends
// them again every resend delay (1m by default), plus a rule evaluation
// interval or two.
const RestartGrace = 2 * time.Minute

// Started is when Alertmanager started (its status's uptime). It holds no
// alerts across a restart: until its senders have sent them again, an
// alert missing from its list may still fire.
func (a *Client) Started(ctx context.Context) (time.Time, error) {
	var st struct {
		Uptime time.Time `json:"uptime"`
	}
	if err := a.Call(ctx, http.MethodGet, "/api/v2/status", nil, &st); err != nil {
		return time.Time{}, fmt.Errorf("read alertmanager status: %w", err)
	}
	return st.Uptime, nil
}

// Call sends one request to Alertmanager's API and decodes a 200's body into out.
func (a *Client) Call(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("encode body: %w", err)
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(a.URL, "/")+path, rd)
	if err != nil {
		return fmt.Errorf("build alertmanager request: %w", err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	c := a.Client
	if c == nil {
		c = &http.Client{Timeout: 10 * time.Second}
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return &APIError{Status: resp.StatusCode, Msg: fmt.Sprintf("%s: %s", resp.Status, bytes.TrimSpace(b))}
	}
	if out == nil {
		return nil
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(out); err != nil {
		return fmt.Errorf("decode alertmanager response: %w", err)
	}
	return nil
}

// APIError is a non-200 answer of Alertmanager's API.
type APIError struct {
	Status int
	Msg    string
}

func (e *APIError) Error() string { return e.Msg }

// Fingerprint is Alertmanager's fingerprint of a label set.
func Fingerprint(labels map[string]string) string {
	set := make(model.LabelSet, len(labels))
	for k, v := range labels {
		set[model.LabelName(k)] = model.LabelValue(v)
	}
	return set.Fingerprint().String()
}
