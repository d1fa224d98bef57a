package alertmanager

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The worker reads Alertmanager with the basic_auth of amtool's
// --http.config.file, read again for each request; a file it cannot use,
// or no file at all, refuses to start.
func TestAlertmanagerClientAuthenticates(t *testing.T) {
	var got [][2]string
	am := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, ok := r.BasicAuth()
		if !ok {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		got = append(got, [2]string{u, p})
		_, _ = w.Write([]byte(`[]`))
	}))
	defer am.Close()
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
		return p
	}
	pw := write("password", "s3cret\n")
	for _, tc := range []struct {
		name, config string
		want         [2]string
		err          string
	}{
		{"inline password", "basic_auth:\n  username: remedy\n  password: hunter2\n", [2]string{"remedy", "hunter2"}, ""},
		{"password_file", "basic_auth:\n  username: remedy\n  password_file: " + pw + "\n", [2]string{"remedy", "s3cret"}, ""},
		{"no basic_auth", "tls_config: {}\n", [2]string{}, "only basic_auth is read"},
		{"no username", "basic_auth:\n  password: x\n", [2]string{}, "username is required"},
		{"no password", "basic_auth:\n  username: remedy\n", [2]string{}, "has no password"},
		{"both passwords", "basic_auth:\n  username: remedy\n  password: x\n  password_file: " + pw + "\n", [2]string{}, "not both"},
		{"missing password_file", "basic_auth:\n  username: remedy\n  password_file: " + filepath.Join(dir, "nope") + "\n", [2]string{}, "password file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got = nil
			a, err := New(am.URL, write("http.yml", tc.config))
			if tc.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.err)
				return
			}
			require.NoError(t, err)
			_, err = a.Active(context.Background(), "demo")
			require.NoError(t, err)
			assert.Equal(t, [][2]string{tc.want}, got)
		})
	}

	t.Run("rotated", func(t *testing.T) {
		got = nil
		f := write("rotated.yml", "basic_auth:\n  username: remedy\n  password: old\n")
		a, err := New(am.URL, f)
		require.NoError(t, err)
		_, err = a.Active(context.Background(), "")
		require.NoError(t, err)
		write("rotated.yml", "basic_auth:\n  username: remedy\n  password: new\n")
		_, err = a.Active(context.Background(), "")
		require.NoError(t, err)
		assert.Equal(t, [][2]string{{"remedy", "old"}, {"remedy", "new"}}, got, "read again for each request")
	})

	_, err := New(am.URL, "")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "--alertmanager-http-config-file")
}
