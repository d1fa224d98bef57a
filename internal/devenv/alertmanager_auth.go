package devenv

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/crypto/bcrypt"
)

// AlertmanagerUser is the basic-auth user the Alertmanagers started here
// admit (web.config.file's basic_auth_users); its password is fresh per start.
const AlertmanagerUser = "remedy"

// File names in the Alertmanager's directory: its web configuration, and the
// client configuration in amtool's --http.config.file format that the worker
// (--alertmanager-http-config-file) and amtool read.
const (
	webConfigFile  = "web.yml"
	HTTPConfigFile = "http-config.yml"
)

// NewAlertmanagerPassword is a fresh password for AlertmanagerUser, written
// with it into the client configuration at path, for the parts that must
// know it before Alertmanager starts (AlertmanagerOptions.Password).
func NewAlertmanagerPassword(path string) (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generate alertmanager password: %w", err)
	}
	password := hex.EncodeToString(b)
	return password, writeClientConfig(path, password)
}

func writeClientConfig(path, password string) error {
	client := fmt.Sprintf("basic_auth:\n  username: %s\n  password: %s\n", AlertmanagerUser, password)
	if err := os.WriteFile(path, []byte(client), 0o600); err != nil {
		return fmt.Errorf("write alertmanager client config: %w", err)
	}
	return nil
}

// writeAuth writes the Alertmanager's web configuration, which holds only
// the password's bcrypt hash, and its client configuration (HTTPConfig).
func (a *Alertmanager) writeAuth(password string) error {
	if password == "" {
		var err error
		if password, err = NewAlertmanagerPassword(filepath.Join(a.Dir, HTTPConfigFile)); err != nil {
			return err
		}
	} else if err := writeClientConfig(filepath.Join(a.Dir, HTTPConfigFile), password); err != nil {
		return err
	}
	a.Password, a.HTTPConfig = password, filepath.Join(a.Dir, HTTPConfigFile)
	hash, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.DefaultCost)
	if err != nil {
		return fmt.Errorf("hash alertmanager password: %w", err)
	}
	web := fmt.Sprintf("basic_auth_users:\n  %s: %s\n", AlertmanagerUser, hash)
	if err := os.WriteFile(filepath.Join(a.Dir, webConfigFile), []byte(web), 0o600); err != nil {
		return fmt.Errorf("write alertmanager web config: %w", err)
	}
	return nil
}

// Client is an HTTP client that authenticates to this Alertmanager.
func (a *Alertmanager) Client() *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: basicAuth{AlertmanagerUser, a.Password, http.DefaultTransport}}
}

// basicAuth adds the user's credentials to every request.
type basicAuth struct {
	user, password string
	next           http.RoundTripper
}

func (b basicAuth) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.SetBasicAuth(b.user, b.password)
	return b.next.RoundTrip(r)
}
