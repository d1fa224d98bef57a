package devenv

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeTools makes a repository with a versions file and a tools cache with
// the binaries OptionsFromEnv looks for, and returns both.
func fakeTools(t *testing.T) (repo, cache string) {
	repo, cache = t.TempDir(), t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(repo, "hack", "tools"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(repo, VersionsFile),
		[]byte("# pinned\nKUBERNETES_VERSION=v9.8.7\nKUBERNETES_BUILD=r9\n\nTEMPORAL_CLI_VERSION=v1.2.3\nPROMETHEUS_VERSION=v0.1.0\nPROMETHEUS_BUILD=r7\nKUBE_STATE_METRICS_VERSION=v2.3.4\n"), 0o644))
	for _, p := range []string{"kubernetes-v9.8.7-r9/kube-apiserver", "kubernetes-v9.8.7-r9/etcd", "kubernetes-v9.8.7-r9/kubectl", "temporal-v1.2.3/temporal",
		"prometheus-v0.1.0-r7/prometheus", "kube-state-metrics-v2.3.4/kube-state-metrics"} {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(cache, p)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(cache, p), nil, 0o755))
	}
	return repo, cache
}

// TestOptionsFromEnvPaths: the environment wins; where it is unset, the
// tools cache at the pinned versions.
func TestOptionsFromEnvPaths(t *testing.T) {
	for name, tc := range map[string]struct{ fromEnv bool }{
		"from the tools cache": {false},
		"from the environment": {true},
	} {
		t.Run(name, func(t *testing.T) {
			repo, cache := fakeTools(t)
			assets, temporal := filepath.Join(cache, "kubernetes-v9.8.7-r9"), filepath.Join(cache, "temporal-v1.2.3", "temporal")
			if tc.fromEnv {
				t.Setenv("REMEDY_TOOLS_CACHE", t.TempDir()) // empty: the lookup must not be used
				t.Setenv("KUBEBUILDER_ASSETS", assets)
				t.Setenv("TEMPORAL_CLI", temporal)
			} else {
				t.Setenv("REMEDY_TOOLS_CACHE", cache)
				t.Setenv("KUBEBUILDER_ASSETS", "")
				t.Setenv("TEMPORAL_CLI", "")
			}
			o, err := OptionsFromEnv(repo)
			require.NoError(t, err)
			assert.Equal(t, assets, o.Assets)
			assert.Equal(t, temporal, o.TemporalCLI)
		})
	}
}

func TestOptionsFromEnvNamesWhatIsMissing(t *testing.T) {
	repo, cache := fakeTools(t)
	require.NoError(t, os.Remove(filepath.Join(cache, "temporal-v1.2.3", "temporal")))
	t.Setenv("REMEDY_TOOLS_CACHE", cache)
	t.Setenv("KUBEBUILDER_ASSETS", "")
	t.Setenv("TEMPORAL_CLI", "")
	_, err := OptionsFromEnv(repo)
	require.Error(t, err)
	assert.Contains(t, err.Error(), filepath.Join(cache, "temporal-v1.2.3", "temporal"))
	assert.Contains(t, err.Error(), "make tools")
}

func TestOptionsFromEnvWithoutVersionsFile(t *testing.T) {
	t.Setenv("KUBEBUILDER_ASSETS", "")
	t.Setenv("TEMPORAL_CLI", "")
	_, err := OptionsFromEnv(t.TempDir())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "KUBEBUILDER_ASSETS or TEMPORAL_CLI is not set")
}

// TestCachedToolsMatchesTheRepository: the lookup reads this repository's
// versions, the ones install.sh builds.
func TestCachedToolsMatchesTheRepository(t *testing.T) {
	root := filepath.Join("..", "..")
	v, err := PinnedVersions(root)
	require.NoError(t, err)
	assets, temporal, err := CachedTools(root, "/cache")
	require.NoError(t, err)
	assert.Equal(t, "/cache/kubernetes-"+v["KUBERNETES_VERSION"]+"-"+v["KUBERNETES_BUILD"], assets)
	assert.Equal(t, "/cache/temporal-"+v["TEMPORAL_CLI_VERSION"]+"/temporal", temporal)
}

// TestMonitoringBinaries: the environment wins; where it is unset, the tools
// cache at the pinned versions, and a missing binary names `make tools`.
func TestMonitoringBinaries(t *testing.T) {
	repo, cache := fakeTools(t)
	t.Setenv("REMEDY_TOOLS_CACHE", cache)
	t.Setenv("PROMETHEUS", "")
	t.Setenv("KUBE_STATE_METRICS", "")
	prom, ksm, err := MonitoringBinaries(repo)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(cache, "prometheus-v0.1.0-r7", "prometheus"), prom)
	assert.Equal(t, filepath.Join(cache, "kube-state-metrics-v2.3.4", "kube-state-metrics"), ksm)

	own := filepath.Join(t.TempDir(), "prometheus")
	require.NoError(t, os.WriteFile(own, nil, 0o755))
	t.Setenv("PROMETHEUS", own)
	prom, _, err = MonitoringBinaries(repo)
	require.NoError(t, err)
	assert.Equal(t, own, prom)

	require.NoError(t, os.Remove(ksm))
	_, _, err = MonitoringBinaries(repo)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "make tools")
}
