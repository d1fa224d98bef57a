package main

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/testsuite"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/remedy-dev/remedy/internal/devenv"
)

// TestTemporalTLS dials the real Temporal dev server through a TLS proxy
// that requires a client certificate from its own CA, the way a secured
// Temporal frontend does (`temporal server start-dev` has no TLS of its own).
func TestTemporalTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("-short (make test-unit): starts a real Temporal dev server; make test runs it")
	}
	cli := os.Getenv("TEMPORAL_CLI")
	require.NotEmpty(t, cli, "TEMPORAL_CLI is not set: run through `make test`, which builds the pinned temporal CLI")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	srv, err := testsuite.StartDevServer(ctx, testsuite.DevServerOptions{
		ExistingPath: cli, LogLevel: "error", Stdout: io.Discard, Stderr: io.Discard,
		ClientOptions: &client.Options{Namespace: "default"},
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Stop() })

	dir := t.TempDir()
	serverCA, clientCA, otherCA := newTestCA(t, "temporal-server-ca"), newTestCA(t, "temporal-client-ca"), newTestCA(t, "someone-else")
	proxyCert, proxyKey := serverCA.issue(t, "temporal-frontend", true)
	proxy := startTLSProxy(t, serverTLS(t, proxyCert, proxyKey, clientCA), srv.FrontendHostPort())

	serverCAFile := writeFile(t, dir, "server-ca.crt", serverCA.pem)
	otherCAFile := writeFile(t, dir, "other-ca.crt", otherCA.pem)
	certPEM, keyPEM := clientCA.issue(t, "remedy-worker", false)
	certFile, keyFile := writeFile(t, dir, "tls.crt", certPEM), writeFile(t, dir, "tls.key", keyPEM)
	foreignPEM, foreignKeyPEM := otherCA.issue(t, "intruder", false)
	foreignCert, foreignKey := writeFile(t, dir, "foreign.crt", foreignPEM), writeFile(t, dir, "foreign.key", foreignKeyPEM)
	apiKeyFile := writeFile(t, dir, "api-key", []byte("remedy-api-key\n"))

	dial := func(t *testing.T, f temporalFlags, extra ...grpc.DialOption) (client.Client, error) {
		f.address, f.namespace = proxy.addr, "default"
		opts, err := f.clientOptions()
		require.NoError(t, err)
		opts.ConnectionOptions.DialOptions = extra
		dctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		return client.DialContext(dctx, opts)
	}

	t.Run("right CA and client certificate", func(t *testing.T) {
		var sent authorizationRecorder
		c, err := dial(t, temporalFlags{tlsCA: serverCAFile, tlsCert: certFile, tlsKey: keyFile, apiKeyFile: apiKeyFile},
			grpc.WithChainUnaryInterceptor(sent.intercept))
		require.NoError(t, err)
		defer c.Close()
		_, err = c.CheckHealth(ctx, &client.CheckHealthRequest{})
		require.NoError(t, err)
		ns, err := c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: "default"})
		require.NoError(t, err)
		assert.Equal(t, "default", ns.GetNamespaceInfo().GetName())
		assert.Equal(t, "Bearer remedy-api-key", sent.last(), "the API key from the file goes with each call")
		assert.Contains(t, proxy.peers(), "remedy-worker", "the proxy verified the client certificate")
	})

	t.Run("the command's own dial", func(t *testing.T) {
		keys := filepath.Join(dir, "payload-keys")
		require.NoError(t, devenv.NewPayloadKeys(keys, "k1"))
		f := temporalFlags{address: proxy.addr, namespace: "default", tlsCA: serverCAFile, tlsCert: certFile, tlsKey: keyFile, serverName: "localhost",
			payloadKeys: keys}
		c, err := f.dial()
		require.NoError(t, err)
		defer c.Close()
		_, err = c.CheckHealth(ctx, &client.CheckHealthRequest{})
		require.NoError(t, err)
	})

	t.Run("no client certificate", func(t *testing.T) {
		_, err := dial(t, temporalFlags{tlsCA: serverCAFile})
		require.Error(t, err)
		t.Log(err) // "tls: certificate required", or a broken pipe if the proxy closed first
		proxy.requireRefused(t, "didn't provide a certificate")
	})

	t.Run("client certificate from another CA", func(t *testing.T) {
		_, err := dial(t, temporalFlags{tlsCA: serverCAFile, tlsCert: foreignCert, tlsKey: foreignKey})
		require.Error(t, err)
		t.Log(err)
		proxy.requireRefused(t, "certificate signed by unknown authority")
	})

	t.Run("wrong CA for the server", func(t *testing.T) {
		_, err := dial(t, temporalFlags{tlsCA: otherCAFile, tlsCert: certFile, tlsKey: keyFile})
		require.Error(t, err)
		t.Log(err)
		assert.Contains(t, err.Error(), "certificate signed by unknown authority")
	})

	t.Run("server name the certificate does not carry", func(t *testing.T) {
		_, err := dial(t, temporalFlags{tlsCA: serverCAFile, tlsCert: certFile, tlsKey: keyFile, serverName: "temporal.example.com"})
		require.Error(t, err)
		t.Log(err)
		assert.Contains(t, err.Error(), "temporal.example.com")
	})

	t.Run("plain text", func(t *testing.T) {
		_, err := dial(t, temporalFlags{})
		require.Error(t, err)
		t.Log(err)
	})
}

// tlsProxy terminates TLS and forwards the bytes to a plain backend. It
// records the client certificates it accepted and the handshakes it refused.
type tlsProxy struct {
	addr string

	mu      sync.Mutex
	cns     []string
	refused []string
}

func startTLSProxy(t *testing.T, cfg *tls.Config, backend string) *tlsProxy {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	p := &tlsProxy{addr: ln.Addr().String()}
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go p.forward(conn.(*tls.Conn), backend)
		}
	}()
	return p
}

func (p *tlsProxy) forward(conn *tls.Conn, backend string) {
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := conn.HandshakeContext(ctx); err != nil {
		p.mu.Lock()
		p.refused = append(p.refused, err.Error())
		p.mu.Unlock()
		return
	}
	p.mu.Lock()
	for _, c := range conn.ConnectionState().PeerCertificates[:1] {
		p.cns = append(p.cns, c.Subject.CommonName)
	}
	p.mu.Unlock()
	up, err := net.Dial("tcp", backend)
	if err != nil {
		return
	}
	defer up.Close()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, conn); done <- struct{}{} }()
	go func() { _, _ = io.Copy(conn, up); done <- struct{}{} }()
	<-done
}

func (p *tlsProxy) peers() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.cns...)
}

// requireRefused waits until the proxy has refused a handshake for reason;
// the client may see the alert before the proxy records it.
func (p *tlsProxy) requireRefused(t *testing.T, reason string) {
	t.Helper()
	require.Eventually(t, func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return strings.Contains(strings.Join(p.refused, "\n"), reason)
	}, 5*time.Second, 10*time.Millisecond, "the proxy refused no handshake for %q", reason)
}

// authorizationRecorder keeps the authorization header of the calls it sees;
// it runs after the SDK's API-key interceptor.
type authorizationRecorder struct {
	mu     sync.Mutex
	header string
}

func (r *authorizationRecorder) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if md, ok := metadata.FromOutgoingContext(ctx); ok {
		if v := md.Get("authorization"); len(v) > 0 {
			r.mu.Lock()
			r.header = v[0]
			r.mu.Unlock()
		}
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

func (r *authorizationRecorder) last() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.header
}
