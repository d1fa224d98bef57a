package node

import (
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes"

	"github.com/remedy-dev/remedy/activities/execution"
	"github.com/remedy-dev/remedy/internal/compose"
	"github.com/remedy-dev/remedy/internal/devenv"
)

// testGate is the exec gate of the Jobs these tests run through the
// activity alone, served where the node's Pods reach it, as the in-process
// worker serves its own for full runs.
var testGate struct {
	once sync.Once
	gate *execution.ExecGate
	err  error
}

func execGate(t *testing.T, cs kubernetes.Interface) *execution.ExecGate {
	t.Helper()
	testGate.once.Do(func() {
		o, err := compose.ExecGate(devenv.NodeIP)
		if err != nil {
			testGate.err = err
			return
		}
		g := &execution.ExecGate{Client: cs, Namespace: devenv.Namespace, URL: o.URL, CA: o.CA, Wait: 10 * time.Second}
		mux := http.NewServeMux()
		mux.Handle(execution.ExecGatePath, g)
		srv := &http.Server{Handler: mux, TLSConfig: o.TLS, ReadHeaderTimeout: 10 * time.Second}
		go func() {
			if err := srv.ServeTLS(o.Listener, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
				panic(err)
			}
		}()
		testGate.gate = g
	})
	require.NoError(t, testGate.err)
	return testGate.gate
}
