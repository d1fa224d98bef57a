package procs

import (
	"bytes"
	"encoding/pem"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"
)

// Proxy stands between a pod and the API server, passing its requests (and
// its credentials) through, so a test can hold one request at a chosen
// moment: before it reaches the API server, or after it landed and before
// its answer returns.
type Proxy struct {
	URL string
	CA  []byte

	mu    sync.Mutex
	holds []*Hold
}

// Hold is one request held by a Proxy.
type Hold struct {
	match   func(r *http.Request, body []byte) bool
	landed  bool
	done    bool
	reached chan struct{}
	release chan struct{}
	once    sync.Once
}

// Reached is closed once the request is held.
func (h *Hold) Reached() <-chan struct{} { return h.reached }

// Release lets the request (or its answer) go on; a request whose client
// died meanwhile is dropped.
func (h *Hold) Release() { h.once.Do(func() { close(h.release) }) }

// NewProxy serves a TLS proxy to the API server until the test ends.
func NewProxy(t testing.TB) *Proxy {
	t.Helper()
	upstream, err := url.Parse(env.Config.Host)
	require.NoError(t, err)
	// The proxy's own connection carries no identity: the pod's bearer token passes through.
	rt, err := rest.TransportFor(&rest.Config{Host: env.Config.Host, TLSClientConfig: rest.TLSClientConfig{CAData: env.Config.CAData}})
	require.NoError(t, err)
	p := &Proxy{}
	rp := &httputil.ReverseProxy{
		Rewrite:       func(r *httputil.ProxyRequest) { r.SetURL(upstream); r.Out.Host = upstream.Host },
		Transport:     roundTripper(func(r *http.Request) (*http.Response, error) { return p.roundTrip(rt, r) }),
		FlushInterval: -1,
		ErrorLog:      nil,
	}
	srv := httptest.NewUnstartedServer(rp)
	srv.Config.ErrorLog = nil
	srv.StartTLS()
	t.Cleanup(func() {
		p.mu.Lock()
		for _, h := range p.holds {
			h.Release()
		}
		p.mu.Unlock()
		srv.CloseClientConnections()
		srv.Close()
	})
	p.URL = srv.URL
	p.CA = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	return p
}

// HoldBefore holds the first request match accepts before it reaches the API server.
func (p *Proxy) HoldBefore(t testing.TB, match func(r *http.Request, body []byte) bool) *Hold {
	return p.hold(t, match, false)
}

// HoldAfter lets the first request match accepts reach the API server and
// holds its answer.
func (p *Proxy) HoldAfter(t testing.TB, match func(r *http.Request, body []byte) bool) *Hold {
	return p.hold(t, match, true)
}

func (p *Proxy) hold(t testing.TB, match func(*http.Request, []byte) bool, landed bool) *Hold {
	h := &Hold{match: match, landed: landed, reached: make(chan struct{}), release: make(chan struct{})}
	p.mu.Lock()
	p.holds = append(p.holds, h)
	p.mu.Unlock()
	t.Cleanup(h.Release)
	return h
}

// take returns the first waiting hold that matches r, marking it used.
func (p *Proxy) take(r *http.Request) (*Hold, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var body []byte
	if r.Body != nil && r.Method != http.MethodGet {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			return nil, err
		}
		body = b
		r.Body = io.NopCloser(bytes.NewReader(b))
	}
	for _, h := range p.holds {
		if !h.done && h.match(r, body) {
			h.done = true
			return h, nil
		}
	}
	return nil, nil
}

var errClientGone = errors.New("the client went away while its request was held")

func (p *Proxy) roundTrip(next http.RoundTripper, r *http.Request) (*http.Response, error) {
	h, err := p.take(r)
	if err != nil || h == nil {
		if err != nil {
			return nil, err
		}
		return next.RoundTrip(r)
	}
	if !h.landed {
		close(h.reached)
		select {
		case <-h.release:
		case <-r.Context().Done():
		}
		if r.Context().Err() != nil {
			return nil, errClientGone
		}
		return next.RoundTrip(r)
	}
	resp, err := next.RoundTrip(r)
	close(h.reached)
	select {
	case <-h.release:
	case <-r.Context().Done():
	}
	return resp, err
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
