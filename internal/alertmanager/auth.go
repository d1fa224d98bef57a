package alertmanager

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// alertmanagerHTTPConfig is the part of amtool's --http.config.file (and
// Prometheus's http_config) the worker reads: basic_auth, with the
// password inline or in password_file. Any other key is refused, so a
// setting the worker would silently ignore fails at start.
type alertmanagerHTTPConfig struct {
	BasicAuth *struct {
		Username     string `json:"username"`
		Password     string `json:"password,omitempty"`
		PasswordFile string `json:"password_file,omitempty"`
	} `json:"basic_auth"`
}

// readAlertmanagerCredentials reads the user and password of file.
func readAlertmanagerCredentials(file string) (user, password string, err error) {
	raw, err := os.ReadFile(file)
	if err != nil {
		return "", "", fmt.Errorf("read alertmanager http config: %w", err)
	}
	var c alertmanagerHTTPConfig
	if err := yaml.UnmarshalStrict(raw, &c); err != nil {
		return "", "", fmt.Errorf("parse alertmanager http config %s (only basic_auth is read): %w", file, err)
	}
	if c.BasicAuth == nil || c.BasicAuth.Username == "" {
		return "", "", fmt.Errorf("alertmanager http config %s: basic_auth.username is required", file)
	}
	password = c.BasicAuth.Password
	if c.BasicAuth.PasswordFile != "" {
		if password != "" {
			return "", "", fmt.Errorf("alertmanager http config %s: set basic_auth.password or password_file, not both", file)
		}
		p, err := os.ReadFile(c.BasicAuth.PasswordFile)
		if err != nil {
			return "", "", fmt.Errorf("read alertmanager password file: %w", err)
		}
		password = strings.TrimSpace(string(p))
	}
	if password == "" {
		return "", "", fmt.Errorf("alertmanager http config %s: basic_auth has no password", file)
	}
	return c.BasicAuth.Username, password, nil
}

// NewHTTPClient is the HTTP client the worker reads (and writes)
// Alertmanager's API with: it authenticates with the basic_auth of
// httpConfigFile (amtool's --http.config.file format), read again for each
// request so a rotated Secret applies at once. A file that cannot be read
// now fails here, at start.
func NewHTTPClient(httpConfigFile string) (*http.Client, error) {
	if _, _, err := readAlertmanagerCredentials(httpConfigFile); err != nil {
		return nil, err
	}
	return &http.Client{Timeout: 10 * time.Second, Transport: &alertmanagerAuth{file: httpConfigFile, next: http.DefaultTransport}}, nil
}

// alertmanagerAuth adds the file's basic-auth credentials to each request.
type alertmanagerAuth struct {
	file string
	next http.RoundTripper
}

func (a *alertmanagerAuth) RoundTrip(r *http.Request) (*http.Response, error) {
	user, password, err := readAlertmanagerCredentials(a.file)
	if err != nil {
		return nil, err
	}
	r = r.Clone(r.Context())
	r.SetBasicAuth(user, password)
	return a.next.RoundTrip(r)
}

// New is the Alertmanager at url, read with the credentials of
// httpConfigFile. Alert runs act only on alerts an authenticated
// Alertmanager holds: anyone may post to one without web authentication,
// so a URL without credentials is refused.
func New(url, httpConfigFile string) (*Client, error) {
	if httpConfigFile == "" {
		return nil, fmt.Errorf("alertmanager %s: no credentials (--alertmanager-http-config-file): Remedy acts only on an Alertmanager with web authentication, since anyone may post alerts to one without", url)
	}
	c, err := NewHTTPClient(httpConfigFile)
	if err != nil {
		return nil, err
	}
	return &Client{URL: url, Client: c}, nil
}

// RequiresAuth asks Alertmanager's API without credentials and expects a
// refusal (401 or 403): credentials sent to an Alertmanager without web
// authentication are ignored, and anyone may post alerts to it. A 2xx is
// an OpenError, which callers treat as final; anything else (unreachable)
// is an ordinary error, worth retrying.
func (a *Client) RequiresAuth(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(a.URL, "/")+"/api/v2/status", nil)
	if err != nil {
		return fmt.Errorf("build alertmanager request: %w", err)
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return fmt.Errorf("probe alertmanager authentication: %w", err)
	}
	resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return nil
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return &OpenError{Err: fmt.Errorf("alertmanager %s answers without credentials, so anyone may have posted this alert: Remedy acts only on an Alertmanager with web authentication (--web.config.file)", a.URL)}
	default:
		return fmt.Errorf("probe alertmanager authentication: %s", resp.Status)
	}
}

// OpenError is an Alertmanager that answers without credentials: what it
// holds may have been posted by anyone, so nothing it says may be acted on.
type OpenError struct{ Err error }

func (e *OpenError) Error() string { return e.Err.Error() }
func (e *OpenError) Unwrap() error { return e.Err }
