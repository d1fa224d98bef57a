// Package sandboxtest holds what the policy sandbox's unit and integration
// tests throw at it: a listener that must hear nothing, and Rego that loops.
package sandboxtest

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

// Listener stands for anything the worker can reach. It counts the requests
// that reach it and answers with something worth stealing.
func Listener(t testing.TB) (url string, hits *atomic.Int32) {
	t.Helper()
	hits = new(atomic.Int32)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		_, _ = w.Write([]byte(`{"secret":"from-the-worker"}`))
	}))
	t.Cleanup(srv.Close)
	return srv.URL, hits
}

// Loop is a module in package pkg whose `pass` takes 100^4 steps whatever
// its input, allocating nothing that grows.
func Loop(pkg string) string {
	return "package " + pkg + `

xs := numbers.range(0, 99)

pass if {
	some a in xs
	some b in xs
	some c in xs
	some d in xs
	a + b + c + d < 0
}
`
}
