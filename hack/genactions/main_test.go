package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// deploy/actions must be what the catalog generates: run `make manifests`
// after changing an action's Rules.
func TestDeployActionsMatchTheCatalog(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, write(dir))
	want, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	require.NoError(t, err)
	committed, err := filepath.Glob("../../deploy/actions/*.yaml")
	require.NoError(t, err)
	assert.Len(t, committed, len(want), "deploy/actions has extra or missing files")
	for _, f := range want {
		gen, err := os.ReadFile(f)
		require.NoError(t, err)
		got, err := os.ReadFile(filepath.Join("../../deploy/actions", filepath.Base(f)))
		require.NoError(t, err, "run make manifests")
		assert.Equal(t, string(gen), string(got), "%s is stale: run make manifests", filepath.Base(f))
	}
}
