package codecserver

import (
	"html/template"
	"net/http"
	"net/url"
	"time"
)

// cookieAge bounds how long a browser keeps a person's token; the token's
// own expiry and revocation still apply (every use is reviewed again).
const cookieAge = 8 * time.Hour

// The Web UI cannot send a Kubernetes token itself: it sends a bearer token
// only of its own OIDC sign-in ("pass access token"), and a browser's
// cookies with "include cross-origin credentials". So a person signs in here
// once with a token (`kubectl create token ...`), and the server keeps it in
// an HttpOnly cookie that only the Web UI's origins may use.
var loginPage = template.Must(template.New("login").Parse(`<!doctype html>
<html><head><title>Remedy codec server</title></head><body>
<h1>Remedy codec server</h1>
{{if .User}}<p>Signed in as <b>{{.User}}</b>. The Temporal Web UI ({{range .Origins}}{{.}} {{end}}) now decodes Remedy's payloads with your identity:
set its codec endpoint to <code>{{.Endpoint}}</code> with <i>Include cross-origin credentials</i> on.</p>
<form method="post" action="logout"><button>Sign out</button></form>
{{else}}{{if .Error}}<p style="color:red">{{.Error}}</p>{{end}}
<form method="post" action="login">
<p>Paste a Kubernetes token (for example <code>kubectl create token &lt;serviceaccount&gt;</code>, or your own).
It is reviewed by the API server (TokenReview) and kept in an HttpOnly cookie that only the Web UI's origins may use.</p>
<textarea name="token" rows="6" cols="80" autocomplete="off"></textarea><br>
<button>Sign in</button></form>{{end}}
</body></html>
`))

type loginView struct {
	User, Error, Endpoint string
	Origins               []string
}

func (s *Server) view(r *http.Request) loginView {
	scheme := "https"
	if r.TLS == nil {
		scheme = "http"
	}
	return loginView{Origins: s.AllowedOrigins, Endpoint: scheme + "://" + r.Host}
}

// sameOrigin refuses a form posted from another site (login CSRF).
func sameOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" || o == "null" {
		return r.Header.Get("Sec-Fetch-Site") == "" || r.Header.Get("Sec-Fetch-Site") == "same-origin"
	}
	u, err := url.Parse(o)
	return err == nil && u.Host == r.Host
}

func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	v := s.view(r)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Frame-Options", "DENY")
	switch r.Method {
	case http.MethodGet:
		if c, err := r.Cookie(CookieName); err == nil {
			if who, ok, err := s.Reviewer.Authenticate(r.Context(), c.Value); err == nil && ok {
				v.User = who.Username
			}
		}
	case http.MethodPost:
		if !sameOrigin(r) {
			http.Error(w, "sign in from this page", http.StatusForbidden)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
		tok := r.PostFormValue("token")
		who, ok, err := s.Reviewer.Authenticate(r.Context(), tok)
		switch {
		case err != nil:
			w.WriteHeader(http.StatusInternalServerError)
			v.Error = "could not review the token: " + err.Error()
		case !ok || tok == "":
			w.WriteHeader(http.StatusUnauthorized)
			v.Error = "the API server does not accept this token"
		default:
			http.SetCookie(w, &http.Cookie{Name: CookieName, Value: tok, Path: "/", MaxAge: int(cookieAge.Seconds()),
				HttpOnly: true, Secure: true, SameSite: http.SameSiteNoneMode})
			s.Log.Info("signed in for the Web UI", "user", who.Username)
			v.User = who.Username
		}
	default:
		http.Error(w, "GET or POST", http.StatusMethodNotAllowed)
		return
	}
	_ = loginPage.Execute(w, v)
}

func (s *Server) logout(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || !sameOrigin(r) {
		http.Error(w, "POST from this page", http.StatusForbidden)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, Secure: true, SameSite: http.SameSiteNoneMode})
	http.Redirect(w, r, "login", http.StatusSeeOther)
}
