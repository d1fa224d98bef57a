package procs

import (
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes"
)

// Clientset is a cluster-admin clientset.
func Clientset(t testing.TB) *kubernetes.Clientset {
	cs, err := kubernetes.NewForConfig(env.Config)
	require.NoError(t, err)
	return cs
}

// Get returns the status and body of url.
func Get(url string) (int, string) {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
