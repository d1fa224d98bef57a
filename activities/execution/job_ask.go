package execution

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/remedy-dev/remedy/internal/actions"
)

// GateClient is how `remedy exec` asks the exec gate (job_gate.go).
type GateClient struct {
	// URL is the gate's ExecGatePath URL; CA the PEM its certificate chains to.
	URL string
	CA  []byte
	// TokenFile holds the Pod's projected token of audience ExecGateAudience
	// (re-read on every ask: the kubelet renews it).
	TokenFile string
	// Wait bounds how long the Pod keeps asking while no run attends its Job
	// (a worker restarting, the run's activity being retried); default 2m.
	Wait time.Duration
}

// GateRefusal is the gate's refusal: the Pod writes nothing.
type GateRefusal struct{ Message string }

func (r *GateRefusal) Error() string { return "refused by the write gate: " + r.Message }

// DefaultGateClient reads the Pod's environment as activities/execution/job.go sets it.
func DefaultGateClient() GateClient {
	return GateClient{URL: os.Getenv(ExecGateURLEnv), CA: []byte(os.Getenv(ExecGateCAEnv)), TokenFile: filepath.Join(ExecGateTokenDir, "token")}
}

// Ask asks the gate whether req may be written now. It returns nil only on
// the gate's pass; a *GateRefusal when the gate refuses; another error when
// no run answered within Wait. Every worker address the gate's name
// resolves to is asked, since only the replica whose run attends the Job answers.
func (c GateClient) Ask(ctx context.Context, req actions.Request) error {
	if c.URL == "" {
		return &GateRefusal{Message: "no exec gate configured ($" + ExecGateURLEnv + "): a job executor writes only on the gate's pass"}
	}
	u, err := url.Parse(c.URL)
	if err != nil || u.Scheme != "https" {
		return &GateRefusal{Message: fmt.Sprintf("the exec gate URL %q is not an https URL", c.URL)}
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(c.CA) {
		return &GateRefusal{Message: "no CA for the exec gate ($" + ExecGateCAEnv + ")"}
	}
	body, err := json.Marshal(GateAsk{Request: req})
	if err != nil {
		return fmt.Errorf("encode the ask: %w", err)
	}
	wait := c.Wait
	if wait <= 0 {
		wait = 2 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	last := errors.New("not asked")
	for delay := 250 * time.Millisecond; ; delay = min(2*delay, 5*time.Second) {
		addrs, err := net.DefaultResolver.LookupHost(ctx, u.Hostname())
		if err != nil {
			last = fmt.Errorf("resolve %s: %w", u.Hostname(), err)
		}
		for _, addr := range addrs {
			var ans GateAnswer
			ans, err = c.post(ctx, u, net.JoinHostPort(addr, port(u)), roots, body)
			switch {
			case err != nil:
				last = err
			case ans.Allowed:
				return nil
			case !ans.Retry:
				return &GateRefusal{Message: ans.Message}
			default:
				last = errors.New(ans.Message)
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no run answered the exec gate at %s within %s (last: %v): nothing written", c.URL, wait, last)
		case <-time.After(delay):
		}
	}
}

// post asks one worker address, checking its certificate against the gate's name.
func (c GateClient) post(ctx context.Context, u *url.URL, addr string, roots *x509.CertPool, body []byte) (GateAnswer, error) {
	token, err := os.ReadFile(c.TokenFile)
	if err != nil {
		return GateAnswer{}, fmt.Errorf("read the exec gate token: %w", err)
	}
	client := &http.Client{Timeout: 45 * time.Second, Transport: &http.Transport{
		DisableKeepAlives: true,
		TLSClientConfig:   &tls.Config{RootCAs: roots, ServerName: u.Hostname(), MinVersion: tls.VersionTLS12},
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, network, addr)
		},
	}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(body))
	if err != nil {
		return GateAnswer{}, fmt.Errorf("build the ask: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+string(bytes.TrimSpace(token)))
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return GateAnswer{}, fmt.Errorf("ask %s: %w", addr, err)
	}
	defer resp.Body.Close()
	var ans GateAnswer
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&ans); err != nil {
		return GateAnswer{}, fmt.Errorf("read the answer of %s (%s): %w", addr, resp.Status, err)
	}
	// A pass is only a 200 that says so; anything else unexplained is asked again.
	ans.Allowed = ans.Allowed && resp.StatusCode == http.StatusOK
	if !ans.Allowed && resp.StatusCode != http.StatusForbidden && resp.StatusCode != http.StatusUnauthorized {
		ans.Retry = true
	}
	return ans, nil
}

func port(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	return "443"
}
