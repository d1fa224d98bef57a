package devenv

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
)

// Forwarder joins every TCP connection it accepts to one it dials. It puts
// the Temporal dev server, which listens on loopback, on the node's IP for
// Pods (Options.TemporalForPods): the dev server cannot bind another
// address itself, its services then dial each other on loopback and fail.
// Tests put the worker Pods' exec gate on the node's IP the same way.
type Forwarder struct {
	l     net.Listener
	dial  func() (net.Conn, error)
	mu    sync.Mutex
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// forward listens on listen (host:port; port 0 picks one) and forwards to to.
func forward(listen, to string) (*Forwarder, error) {
	return Forward(listen, func() (net.Conn, error) { return net.Dial("tcp", to) })
}

// Forward listens on listen (host:port; port 0 picks one) and joins each
// connection it accepts to the one dial returns then; one dial fails: that
// connection is closed.
func Forward(listen string, dial func() (net.Conn, error)) (*Forwarder, error) {
	l, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", listen, err)
	}
	f := &Forwarder{l: l, dial: dial, conns: map[net.Conn]struct{}{}}
	f.wg.Go(f.serve)
	return f, nil
}

// Addr is the address it listens on.
func (f *Forwarder) Addr() string { return f.l.Addr().String() }

func (f *Forwarder) serve() {
	for {
		in, err := f.l.Accept()
		if err != nil {
			return // closed
		}
		out, err := f.dial()
		if err != nil {
			_ = in.Close()
			continue
		}
		if !f.track(in, out) {
			return
		}
		f.wg.Go(func() { f.pipe(in, out) })
	}
}

// track records the pair unless the forwarder is closed.
func (f *Forwarder) track(conns ...net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.conns == nil {
		for _, c := range conns {
			_ = c.Close()
		}
		return false
	}
	for _, c := range conns {
		f.conns[c] = struct{}{}
	}
	return true
}

// pipe copies both ways until either side ends, then closes both.
func (f *Forwarder) pipe(in, out net.Conn) {
	done := make(chan struct{}, 2)
	copyTo := func(dst, src net.Conn) { _, _ = io.Copy(dst, src); done <- struct{}{} }
	go copyTo(out, in)
	go copyTo(in, out)
	<-done
	_ = in.Close()
	_ = out.Close()
	<-done
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.conns != nil {
		delete(f.conns, in)
		delete(f.conns, out)
	}
}

// Close stops listening, ends every forwarded connection and waits for them.
func (f *Forwarder) Close() error {
	err := f.l.Close()
	f.mu.Lock()
	for c := range f.conns {
		_ = c.Close()
	}
	f.conns = nil
	f.mu.Unlock()
	f.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}
