package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestProductLinksNoDevEnvironment: the product binary, the one the image
// ships, links neither the local platform (remedy-dev's envtest, Temporal dev
// server and node) nor Helm. envtest's package init writes a cache
// directory, which the image's read-only root refuses.
func TestProductLinksNoDevEnvironment(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	require.NoError(t, err, "%s", out)
	deps := strings.Fields(string(out))
	require.Contains(t, deps, "github.com/remedy-dev/remedy/operator", "the list is the binary's")
	for _, banned := range []string{
		"sigs.k8s.io/controller-runtime/pkg/envtest",
		"sigs.k8s.io/controller-runtime/pkg/internal/testing/",
		"go.temporal.io/sdk/testsuite",
		"go.temporal.io/server/",
		"github.com/temporalio/temporalite",
		"helm.sh/",
		"github.com/remedy-dev/remedy/internal/devenv",
		"github.com/remedy-dev/remedy/internal/devcompose",
		"github.com/remedy-dev/remedy/internal/image",
		"github.com/remedy-dev/remedy/test/",
	} {
		for _, d := range deps {
			assert.False(t, d == strings.TrimSuffix(banned, "/") || strings.HasPrefix(d, banned), "cmd/remedy links %s", d)
		}
	}
}
