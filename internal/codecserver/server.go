// Package codecserver is Remedy's codec server: the Temporal Web UI and the
// temporal CLI (--codec-endpoint) read Remedy's sealed payloads through it,
// and a person's approval decision is sealed by it with their Kubernetes
// identity (docs/security.md, "How a person's decision reaches a workflow").
//
// Every request is authenticated with a Kubernetes token (TokenReview):
// "Authorization: Bearer <token>" (the CLI's --codec-auth), or the HttpOnly
// cookie /login sets for the Web UI. /decode also needs the grant
// DecodeVerb on payloads.remedy.dev, cluster-wide (SubjectAccessReview),
// since it reads every payload; /encode seals what a person sends as theirs,
// which Remedy's workflows accept only as an approval decision they then
// authorize.
package codecserver

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/remedy-dev/remedy/internal/seal"
)

// The grant /decode needs: the verb DecodeVerb on the resource Resource of
// Group, cluster scope (no such resource is served; RBAC grants it by name).
const (
	DecodeVerb = "decode"
	Group      = "remedy.dev"
	Resource   = "payloads"
)

// CookieName holds a person's token for the Web UI (see /login).
const CookieName = "remedy-codec-token"

// MaxBodyBytes bounds a request: a history page's payloads.
const MaxBodyBytes = 16 << 20

// reviewTTL is how long a TokenReview or SubjectAccessReview answer is
// reused: the Web UI decodes a history in many small requests.
const reviewTTL = 30 * time.Second

// Reviewer asks the API server who a token is and what they may do.
type Reviewer interface {
	// Authenticate returns the token's user, or ok false when the API server does not know it.
	Authenticate(ctx context.Context, token string) (who seal.Person, ok bool, err error)
	// MayDecode asks whether who may decode payloads (DecodeVerb).
	MayDecode(ctx context.Context, who seal.Person) (bool, error)
}

// Server serves /encode, /decode and /login.
type Server struct {
	Keys     *seal.Keyring
	Reviewer Reviewer
	// AllowedOrigins are the Web UI origins (scheme://host:port) whose
	// browsers may call the server with credentials.
	AllowedOrigins []string
	Log            logr.Logger
	Now            func() time.Time

	mu    sync.Mutex
	cache map[string]cached
}

type cached struct {
	who       seal.Person
	ok        bool
	mayDecode *bool
	until     time.Time
}

// Handler is the server's HTTP handler.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/encode", s.codec(false))
	mux.HandleFunc("/decode", s.codec(true))
	mux.HandleFunc("/login", s.login)
	mux.HandleFunc("/logout", s.logout)
	return mux
}

func (s *Server) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// allowed reports whether origin is one of the Web UI origins.
func (s *Server) allowed(origin string) bool {
	return origin != "" && slices.Contains(s.AllowedOrigins, strings.TrimSuffix(origin, "/"))
}

// cors answers the browser's preflight and marks the answer readable by an
// allowed origin, with credentials (the cookie). It reports whether the
// request was a preflight, already answered.
func (s *Server) cors(w http.ResponseWriter, r *http.Request) bool {
	origin := r.Header.Get("Origin")
	w.Header().Add("Vary", "Origin")
	if s.allowed(origin) {
		h := w.Header()
		h.Set("Access-Control-Allow-Origin", origin)
		h.Set("Access-Control-Allow-Credentials", "true")
		h.Set("Access-Control-Allow-Methods", "POST, OPTIONS")
		// The UI's own headers (Content-Type, X-Namespace, Authorization with
		// "pass access token") vary by version: an allowed origin may send any.
		allow := "Authorization, Content-Type, X-Namespace"
		if req := r.Header.Get("Access-Control-Request-Headers"); req != "" {
			allow = req
		}
		h.Set("Access-Control-Allow-Headers", allow)
		h.Set("Access-Control-Max-Age", "600")
	}
	if r.Method == http.MethodOptions {
		w.WriteHeader(http.StatusNoContent)
		return true
	}
	return false
}

// token is the request's Kubernetes token: the Authorization header, or
// the /login cookie, which counts only on a request from an allowed origin
// (a page elsewhere must not use a person's cookie: no cross-site requests).
func (s *Server) token(r *http.Request) (string, error) {
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, tok, _ := strings.Cut(h, " ")
		if !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(tok) == "" {
			return "", errors.New(`the Authorization header is "Bearer <kubernetes token>"`)
		}
		return strings.TrimSpace(tok), nil
	}
	c, err := r.Cookie(CookieName)
	if err != nil || c.Value == "" {
		return "", errors.New(`no credentials: send "Authorization: Bearer <kubernetes token>" (temporal --codec-auth), or sign in at /login for the Web UI`)
	}
	if !s.allowed(r.Header.Get("Origin")) {
		return "", fmt.Errorf("the sign-in cookie is accepted only from the Web UI's origins (%s), not %q", strings.Join(s.AllowedOrigins, ", "), r.Header.Get("Origin"))
	}
	return c.Value, nil
}

// authenticate reviews the request's token.
func (s *Server) authenticate(r *http.Request) (seal.Person, string, error) {
	tok, err := s.token(r)
	if err != nil {
		return seal.Person{}, "", err
	}
	key := fmt.Sprintf("%x", sha256.Sum256([]byte(tok)))
	s.mu.Lock()
	c, hit := s.cache[key]
	s.mu.Unlock()
	if hit && s.now().Before(c.until) {
		if !c.ok {
			return seal.Person{}, "", errors.New("the token is not valid (TokenReview)")
		}
		return c.who, key, nil
	}
	who, ok, err := s.Reviewer.Authenticate(r.Context(), tok)
	if err != nil {
		return seal.Person{}, "", fmt.Errorf("review token: %w", err)
	}
	s.remember(key, cached{who: who, ok: ok, until: s.now().Add(reviewTTL)})
	if !ok {
		return seal.Person{}, "", errors.New("the token is not valid (TokenReview)")
	}
	return who, key, nil
}

func (s *Server) remember(key string, c cached) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cache == nil || len(s.cache) > 10000 {
		s.cache = map[string]cached{}
	}
	s.cache[key] = c
}

// mayDecode asks once per reviewTTL whether who may decode.
func (s *Server) mayDecode(ctx context.Context, key string, who seal.Person) (bool, error) {
	s.mu.Lock()
	c := s.cache[key]
	s.mu.Unlock()
	if c.mayDecode != nil && s.now().Before(c.until) {
		return *c.mayDecode, nil
	}
	ok, err := s.Reviewer.MayDecode(ctx, who)
	if err != nil {
		return false, err
	}
	c.mayDecode = &ok
	s.remember(key, c)
	return ok, nil
}

// codec serves /encode or /decode in Temporal's remote codec format: a JSON
// Payloads message in, the same number of payloads out.
func (s *Server) codec(decode bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.cors(w, r) {
			return
		}
		if r.Method != http.MethodPost {
			http.Error(w, "POST a JSON Payloads message", http.StatusMethodNotAllowed)
			return
		}
		who, key, err := s.authenticate(r)
		if err != nil {
			s.Log.Info("codec request refused", "path", r.URL.Path, "origin", r.Header.Get("Origin"), "reason", err.Error())
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		if decode {
			ok, err := s.mayDecode(r.Context(), key, who)
			if err != nil {
				http.Error(w, fmt.Sprintf("review access: %v", err), http.StatusInternalServerError)
				return
			}
			if !ok {
				s.Log.Info("decode refused", "user", who.Username)
				http.Error(w, fmt.Sprintf("user %q may not decode Remedy's payloads: it needs the verb %q on %s.%s (cluster scope; see deploy/rbac/payload-reader-example.yaml)",
					who.Username, DecodeVerb, Resource, Group), http.StatusForbidden)
				return
			}
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
		if err != nil {
			http.Error(w, fmt.Sprintf("read body: %v", err), http.StatusBadRequest)
			return
		}
		var in commonpb.Payloads
		if err := protojson.Unmarshal(body, &in); err != nil {
			http.Error(w, fmt.Sprintf("the body is a JSON Payloads message: %v", err), http.StatusBadRequest)
			return
		}
		var out []*commonpb.Payload
		if decode {
			out = s.decode(in.Payloads)
		} else if out, err = s.encode(in.Payloads, who); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		b, err := protojson.Marshal(&commonpb.Payloads{Payloads: out})
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		_, _ = w.Write(b)
	}
}

// encode seals each payload as the person's: JSON only (what the CLI and
// the UI send for --input), and nothing the worker accepts but an approval
// decision.
func (s *Server) encode(payloads []*commonpb.Payload, who seal.Person) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		sealed, err := s.Keys.SealPerson(p, who)
		if err != nil {
			return nil, fmt.Errorf("payload %d: %w", i, err)
		}
		out[i] = sealed
	}
	s.Log.Info("sealed payloads as a person's", "user", who.Username, "payloads", len(out))
	return out, nil
}

// decode opens what Remedy's keys seal and returns the rest as it came: a
// payload recorded before sealing, or one that does not open, is shown as it
// is rather than failing the whole page.
func (s *Server) decode(payloads []*commonpb.Payload) []*commonpb.Payload {
	codec := &seal.Codec{Keys: s.Keys}
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		out[i] = p
		if string(p.GetMetadata()[converter.MetadataEncoding]) != seal.Encoding {
			continue
		}
		opened, err := codec.Decode([]*commonpb.Payload{p})
		if err != nil {
			continue
		}
		out[i] = readable(opened[0])
	}
	return out
}

// readable turns a person's opened payload back into plain JSON, with who
// sent it beside it in the metadata, so the UI and the CLI show it.
func readable(p *commonpb.Payload) *commonpb.Payload {
	who, ok := seal.PersonOf(p)
	if !ok {
		return p
	}
	by, _ := json.Marshal(who)
	return &commonpb.Payload{Metadata: map[string][]byte{converter.MetadataEncoding: []byte(converter.MetadataEncodingJSON), "remedy-sent-by": by}, Data: p.Data}
}
