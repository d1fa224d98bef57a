package codecserver

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/remedy-dev/remedy/internal/seal"
)

// tokens is a Reviewer over a fixed table; the real one is exercised
// against a real API server in test/integration/codec_test.go.
type tokens map[string]struct {
	who    seal.Person
	decode bool
}

func (t tokens) Authenticate(_ context.Context, tok string) (seal.Person, bool, error) {
	e, ok := t[tok]
	return e.who, ok, nil
}

func (t tokens) MayDecode(_ context.Context, who seal.Person) (bool, error) {
	for _, e := range t {
		if e.who.Username == who.Username {
			return e.decode, nil
		}
	}
	return false, nil
}

const ui = "http://127.0.0.1:8233"

func testServer(t *testing.T) (*Server, *seal.Keyring) {
	keys, err := seal.NewKeyring("k1", map[string][]byte{"k1": bytes.Repeat([]byte{3}, seal.KeySize)})
	require.NoError(t, err)
	return &Server{Keys: keys, AllowedOrigins: []string{ui}, Log: logr.Discard(), Reviewer: tokens{
		"reader": {seal.Person{Username: "alice", Groups: []string{"oncall"}}, true},
		"nobody": {seal.Person{Username: "bob"}, false},
	}}, keys
}

func payloadsBody(t *testing.T, ps ...*commonpb.Payload) *bytes.Reader {
	b, err := protojson.Marshal(&commonpb.Payloads{Payloads: ps})
	require.NoError(t, err)
	return bytes.NewReader(b)
}

func TestCodecAuthentication(t *testing.T) {
	s, keys := testServer(t)
	h := s.Handler()
	sealed, err := seal.DataConverter(keys).ToPayload(map[string]string{"secret": "value"})
	require.NoError(t, err)
	for _, tc := range []struct {
		name, path, auth, origin, cookie string
		want                             int
	}{
		{name: "no credentials", path: "/decode", want: http.StatusUnauthorized},
		{name: "not bearer", path: "/decode", auth: "Basic abc", want: http.StatusUnauthorized},
		{name: "unknown token", path: "/encode", auth: "Bearer forged", want: http.StatusUnauthorized},
		{name: "no decode grant", path: "/decode", auth: "Bearer nobody", want: http.StatusForbidden},
		{name: "reader", path: "/decode", auth: "Bearer reader", want: http.StatusOK},
		{name: "cookie from the UI", path: "/decode", cookie: "reader", origin: ui, want: http.StatusOK},
		{name: "cookie from another site", path: "/decode", cookie: "reader", origin: "https://evil.example", want: http.StatusUnauthorized},
		{name: "cookie without origin", path: "/decode", cookie: "reader", want: http.StatusUnauthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, tc.path, payloadsBody(t, sealed))
			if tc.auth != "" {
				r.Header.Set("Authorization", tc.auth)
			}
			if tc.origin != "" {
				r.Header.Set("Origin", tc.origin)
			}
			if tc.cookie != "" {
				r.AddCookie(&http.Cookie{Name: CookieName, Value: tc.cookie})
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			require.Equal(t, tc.want, w.Code, w.Body.String())
			if tc.want != http.StatusOK {
				assert.NotContains(t, w.Body.String(), "value")
				return
			}
			assert.Contains(t, w.Body.String(), protojsonData(`{"secret":"value"}`))
		})
	}
}

func protojsonData(s string) string {
	b, _ := protojson.Marshal(&commonpb.Payload{Data: []byte(s)})
	var m struct{ Data string }
	_ = jsonUnmarshal(b, &m)
	return m.Data
}

// The browser's preflight: only allowed origins get CORS headers with credentials.
func TestCodecCORS(t *testing.T) {
	s, _ := testServer(t)
	for origin, allowed := range map[string]bool{ui: true, "https://evil.example": false} {
		r := httptest.NewRequest(http.MethodOptions, "/decode", nil)
		r.Header.Set("Origin", origin)
		r.Header.Set("Access-Control-Request-Method", "POST")
		r.Header.Set("Access-Control-Request-Headers", "content-type,x-namespace")
		w := httptest.NewRecorder()
		s.Handler().ServeHTTP(w, r)
		assert.Equal(t, http.StatusNoContent, w.Code)
		if allowed {
			assert.Equal(t, origin, w.Header().Get("Access-Control-Allow-Origin"))
			assert.Equal(t, "true", w.Header().Get("Access-Control-Allow-Credentials"))
			assert.Equal(t, "content-type,x-namespace", w.Header().Get("Access-Control-Allow-Headers"))
		} else {
			assert.Empty(t, w.Header().Get("Access-Control-Allow-Origin"))
		}
	}
}

// /login keeps a reviewed token in an HttpOnly, Secure, SameSite=None cookie;
// a form posted from another site is refused.
func TestCodecLogin(t *testing.T) {
	s, _ := testServer(t)
	post := func(token, origin string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodPost, "http://codec.example/login", strings.NewReader(url.Values{"token": {token}}.Encode()))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if origin != "" {
			r.Header.Set("Origin", origin)
		}
		w := httptest.NewRecorder()
		s.Handler().ServeHTTP(w, r)
		return w
	}
	w := post("reader", "http://codec.example")
	require.Equal(t, http.StatusOK, w.Code)
	c := w.Result().Cookies()
	require.Len(t, c, 1)
	assert.Equal(t, CookieName, c[0].Name)
	assert.True(t, c[0].HttpOnly)
	assert.True(t, c[0].Secure)
	assert.Equal(t, http.SameSiteNoneMode, c[0].SameSite)
	assert.Contains(t, w.Body.String(), "Signed in as <b>alice</b>")

	w = post("forged", "http://codec.example")
	assert.Equal(t, http.StatusUnauthorized, w.Code)
	assert.Empty(t, w.Result().Cookies())
	w = post("reader", "https://evil.example")
	assert.Equal(t, http.StatusForbidden, w.Code)
	assert.Empty(t, w.Result().Cookies())
}

// /encode seals as the authenticated person: the worker's converter gives it
// only to a PersonSigned value, signed with that person, whatever the body says.
func TestCodecEncodeSealsAsThePerson(t *testing.T) {
	s, keys := testServer(t)
	body, err := converter.GetDefaultDataConverter().ToPayload(map[string]any{"approved": true, "approver": "root"})
	require.NoError(t, err)
	r := httptest.NewRequest(http.MethodPost, "/encode", payloadsBody(t, body))
	r.Header.Set("Authorization", "Bearer nobody")
	w := httptest.NewRecorder()
	s.Handler().ServeHTTP(w, r)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	var out commonpb.Payloads
	require.NoError(t, protojson.Unmarshal(w.Body.Bytes(), &out))
	require.Len(t, out.Payloads, 1)
	assert.NotContains(t, string(out.Payloads[0].Data), "approved", "sealed")

	var d signed
	require.NoError(t, seal.DataConverter(keys).FromPayload(out.Payloads[0], &d))
	assert.Equal(t, "bob", d.by.Username)
	var m map[string]any
	err = seal.DataConverter(keys).FromPayload(out.Payloads[0], &m)
	var refused *seal.RefusedError
	require.ErrorAs(t, err, &refused)
	assert.Equal(t, seal.RefusedPerson, refused.Kind)

	// Decoded for a reader, it is plain JSON again, with who sent it.
	r = httptest.NewRequest(http.MethodPost, "/decode", payloadsBody(t, out.Payloads...))
	r.Header.Set("Authorization", "Bearer reader")
	w = httptest.NewRecorder()
	s.Handler().ServeHTTP(w, r)
	require.Equal(t, http.StatusOK, w.Code)
	var dec commonpb.Payloads
	require.NoError(t, protojson.Unmarshal(w.Body.Bytes(), &dec))
	assert.Equal(t, converter.MetadataEncodingJSON, string(dec.Payloads[0].Metadata[converter.MetadataEncoding]))
	assert.JSONEq(t, `{"approved":true,"approver":"root"}`, string(dec.Payloads[0].Data))
	assert.Contains(t, string(dec.Payloads[0].Metadata["remedy-sent-by"]), `"username":"bob"`)

	// Only JSON is sealed as a person's.
	raw, err := converter.GetDefaultDataConverter().ToPayload([]byte{1, 2})
	require.NoError(t, err)
	r = httptest.NewRequest(http.MethodPost, "/encode", payloadsBody(t, raw))
	r.Header.Set("Authorization", "Bearer nobody")
	w = httptest.NewRecorder()
	s.Handler().ServeHTTP(w, r)
	assert.Equal(t, http.StatusBadRequest, w.Code)
}

type signed struct {
	Approved bool `json:"approved"`
	by       seal.Person
}

func (s *signed) SignedBy(p seal.Person) { s.by = p }

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }
